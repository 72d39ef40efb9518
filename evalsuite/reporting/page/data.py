"""What `evalsuite report` shows, gathered from the leaderboard, the run JSONs and the stored test predictions.

The report is a view: it reads, never writes. docs/report.md states every rule used here:
- a cell (model x task) is the wide table's (reporting/table/wide.py): the probe chosen on val, the mean over seeds of the
  task's headline metric on test, its rank, and the column statistics of reporting/statistics/column_statistics.py, the same
  `leaderboard` shows: the 95 % interval of the mean (its own bootstrap draws), the rank interval, and whether it
  is in the column's 95 % model confidence set (`best_set`; None with `untested` = why, when the column could not
  be tested);
- a model's floor is its own random-init row's mean, per task (reporting/table/floors.py: X+random-init, else the one
  random-init model of X's architecture); a random-init model that is no shown model's floor is no floor;
- the overall ranking is the mean of each model's rank over the columns with two or more models (wide.ranked_tasks:
  a lone model's #1 ranks nothing), for models with every such column; its interval is the 95 % bootstrap interval
  of that mean rank (every such task re-ranked in each draw), when every such task has draws;
- each cell carries the precision its runs' backbone computed in, and a note names the columns whose models ran in
  different precisions (reporting/table/precisions.py).
- a model's cost is its backbone's FLOPs per image (the leaderboard's gflops_per_image, load-independent); the rates
  a run measured go with the device and host load they were measured under (reporting/page/cost.py).
"""

import math
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.reporting.page.beyond import beyond_rows, reliability_bins
from evalsuite.reporting.statistics.cell_draws import PredictionsLoader
from evalsuite.reporting.statistics.column_statistics import add_column_statistics
from evalsuite.reporting.table.floors import architectures, floor_cells, floor_labels, own_floors, random_init_models
from evalsuite.reporting.table.precisions import mixed_precision_note
from evalsuite.reporting.table.wide import Filters, build_wide_table, ranked_tasks
from evalsuite.reporting.views.formats import mean_rank
from evalsuite.results.leaderboard import LEADERBOARD_FILE, check_leaderboard_file, device_hours, read_rows
from evalsuite.results.predictions import NoPredictions
from evalsuite.results.published import figures_beside
from evalsuite.results.run_fields import read_run_fields
from evalsuite.results.run_json import RUNS_FOLDER


@dataclass
class ReportCell:
    model: str
    task: str
    metric: str
    mean: float
    std: float | None
    seeds: tuple
    probe: str
    rank: float
    rank_interval: tuple | None
    interval: tuple | None  # the 95 % interval of `mean` (column_statistics.py)
    run_ids: tuple = ()
    best_set: bool | None = None  # in the column's 95 % model confidence set; None: not tested
    best_set_p: float | None = None  # MCS p-value (in the set at level a when >= a)
    untested: str = ""  # why the column could not be tested
    interval_note: str = ""  # how to read `interval` (metrics/shown_intervals.py), when it needs a note
    cost: dict = field(default_factory=dict)  # gflops_per_image, params; and measured: report_cost.MEASURED_FIELDS
    provenance: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # other test metrics of the chosen probe: calibration and the like
    reliability: dict | None = None  # first seed's reliability-diagram bins (report_beyond.reliability_bins)
    precision: str = ""  # what its runs' backbone computed in ("": not recorded)


@dataclass
class Report:
    source: str
    tasks: list
    metrics: dict  # task -> headline metric
    models: list  # in the wide table's order (best rank sum first)
    cells: dict  # (model, task) -> ReportCell
    floors: dict  # (model, task) -> (its own random-init model, that model's mean): floors.py
    overall: list  # (model, mean rank, (low, high) or None), best first
    notes: list = field(default_factory=list)
    clusters: dict = field(default_factory=dict)  # task -> (count, unit): what the column's statistics rest on
    beyond: dict = field(default_factory=dict)  # section -> rows (report_beyond.beyond_rows)
    random_init: dict = field(default_factory=dict)  # random-init model shown -> the models whose floor it is
    ranked_tasks: list | None = None  # the columns the overall ranking runs over (None: every task)
    published: dict = field(default_factory=dict)  # (model, task) -> a peer's figure (results/published.py)


def collect(out_dir: Path, filters: Filters = Filters()) -> Report:
    """The report of the leaderboard under `out_dir` (one-line errors for an empty or foreign file)."""
    source = Path(out_dir) / LEADERBOARD_FILE
    check_leaderboard_file(source, "pass the --out folder of evalsuite runs")
    rows = read_rows(source)
    if not rows:
        raise EvalsuiteError(f"{source} has no rows yet; run `evalsuite run` or `evalsuite sweep run` first")
    loader = PredictionsLoader(out_dir)  # the column statistics' predictions are reused by the reliability plots
    table = add_column_statistics(build_wide_table(rows, "test", None, filters, source=str(source),
                                                   out_dir=out_dir), out_dir, loader=loader)
    by_key = _test_rows(rows)
    cells = {(row.model, task): _cell(row.model, task, table.metrics[task], cell, by_key)
             for row in table.rows for task, cell in row.cells.items()}
    models, randoms = [row.model for row in table.rows], random_init_models(rows)
    owners, floor_notes = own_floors(models, randoms, architectures(Path(out_dir), _first_runs(table)))
    report = Report(source=str(source), tasks=table.tasks, metrics=table.metrics, models=models, cells=cells,
                    floors=floor_cells(owners, cells), overall=_overall(table),
                    notes=list(table.notes) + floor_notes + list(filter(None, [mixed_precision_note(table)])),
                    clusters=dict(table.clusters), random_init=floor_labels(owners, randoms, models),
                    beyond=beyond_rows(rows, set(models), set(table.tasks)), ranked_tasks=ranked_tasks(table),
                    published=figures_beside(table))
    _add_reliability(report, table, loader)
    _add_provenance(report, out_dir)
    return report


def _test_rows(rows: list) -> dict:
    """{(model, task, probe, seed, run_id): {metric: row}} of the test split."""
    found = {}
    for row in rows:
        if row["split"] == "test":
            key = (row["model"], row["task"], row["probe"], int(row["seed"]), row["run_id"])
            found.setdefault(key, {})[row["metric"]] = row
    return found


def _cell(model: str, task: str, metric: str, cell, by_key: dict) -> ReportCell:
    seeds = [by_key.get((model, task, cell.probe, seed, run_id), {}) for seed, run_id in zip(cell.seeds, cell.run_ids)]
    return ReportCell(model=model, task=task, metric=metric, mean=cell.mean, std=cell.std, seeds=cell.seeds,
                      probe=cell.probe, rank=cell.rank, rank_interval=cell.rank_interval, interval=cell.interval,
                      run_ids=tuple(cell.run_ids), best_set=cell.best_set, best_set_p=cell.best_set_p,
                      untested=cell.untested, interval_note=cell.interval_note, cost=_cost(seeds, metric),
                      extra=_extra_metrics(seeds, metric), precision=cell.precision)


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _cost(seeds: list, metric: str) -> dict:
    """The first seed's run's cost columns: the backbone's FLOPs and parameters (load-independent) and the rates it
    measured, with the device and the host load they were measured under; device-hours under its schema 5 name in
    older rows."""
    first = next((s[metric] for s in seeds if metric in s), {})
    numbers = {name: _number(first.get(name)) for name in ("gflops_per_image", "params", "throughput_img_s",
                                                           "forward_img_s", "host_load_1m")}
    return {**numbers, "device_hours_est": _number(device_hours(first)), "device_name": first.get("device_name") or ""}


def _extra_metrics(seeds: list, headline: str) -> dict:
    """Mean over seeds of every other test metric the chosen probe reported."""
    names = sorted({name for s in seeds for name in s if name != headline})
    means = {}
    for name in names:
        values = [_number(s[name]["value"]) for s in seeds if name in s]
        values = [v for v in values if v is not None]
        if values:
            means[name] = float(np.mean(values))
    return means


def _first_runs(table) -> dict:
    """{model: the first run behind its cells}: the run JSON that names its architecture."""
    return {row.model: next(run for cell in row.cells.values() for run in cell.run_ids if run)
            for row in table.rows if any(run for cell in row.cells.values() for run in cell.run_ids)}


def _overall(table) -> list:
    # The mean rank of the wide table over its ranked columns (two or more models, a finite mean).
    ranking = [(row.model, mean_rank(row, table), row.mean_rank_interval) for row in table.rows
               if row.rank_sum is not None]
    return sorted(ranking, key=lambda entry: (entry[1], entry[0]))


def _add_reliability(report: Report, table, loader: PredictionsLoader) -> None:
    """The first seed's reliability bins of every classification cell whose predictions are stored; a cell whose
    predictions file is damaged gets a note naming it and the fix, not a silent gap in the section."""
    for row in table.rows:
        for task, cell in row.cells.items():
            try:
                predictions = loader.cell(row.model, task, cell)
            except NoPredictions:  # none stored (an older run, a probe without per-item predictions): nothing to say
                continue
            except EvalsuiteError as exc:
                report.notes.append(f"no reliability diagram of {row.model} × {task}: {exc}")
                continue
            if predictions.probas:  # classification; segmentation stores confusion counts instead
                bins = reliability_bins(predictions.labels, predictions.probas[0])
                report.cells[(row.model, task)] = replace(report.cells[(row.model, task)], reliability=bins)


def _add_provenance(report: Report, out_dir: Path) -> None:
    for key, cell in report.cells.items():
        records = [_run_json(out_dir, run_id) for run_id in dict.fromkeys(cell.run_ids)]
        report.cells[key] = replace(cell, provenance=_provenance(records))


def _run_json(out_dir: Path, run_id: str) -> dict:
    return read_run_fields(Path(out_dir) / RUNS_FOLDER / f"{run_id}.json")


def _provenance(records: list) -> dict:
    records = [r for r in records if r]
    if not records:
        return {}
    first = records[0]
    versions = first.get("versions", {})
    return {"evalsuite": versions.get("evalsuite"), "commit": versions.get("evalsuite_git"),
            "torch": versions.get("torch"), "timm": versions.get("timm"), "device": first.get("device"),
            "precision": first.get("precision"), "seeds": sorted({s for r in records for s in r.get("seeds", [])}),
            "cache_keys": (first.get("cache") or {}).get("keys", {}), "card": (first.get("task") or {}).get("path"),
            "card_sha256": (first.get("task") or {}).get("sha256"), "date": first.get("timestamp_utc"),
            "runs": [r.get("run_id") for r in records], "command": reproduce_command(first, records)}


def reproduce_command(record: dict, records: list) -> str:
    """The `evalsuite run` command that reproduces the cell, from the run's config."""
    config = record.get("config", {})
    seeds = sorted({s for r in records for s in r.get("seeds", [])})
    words = ["evalsuite", "run", "--task", config.get("task", "?"), "--model", config.get("model", "?")]
    for flag, name in (("--weights", "weights"), ("--pooling", "pooling"), ("--data-root", "data_root"),
                       ("--precision", "precision"), ("--label", "label")):
        if config.get(name) not in (None, "", "auto"):
            words += [flag, str(config[name])]
    # The flags that change which samples are scored (the others change speed or memory, not the numbers).
    for flag, name, given in (("--random-init", "random_init", True), ("--no-count-check", "check_counts", False),
                              ("--skip-bad-slides", "skip_bad_slides", True)):
        if config.get(name, not given) is given:
            words.append(flag)
    if config.get("probes"):
        words += ["--probes", ",".join(config["probes"])]
    return shlex.join(words + ["--seeds", ",".join(map(str, seeds)), "--out", str(config.get("out_dir", "."))])
