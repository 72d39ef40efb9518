"""The wide leaderboard: one row per model, one cell per task, ranks and their sum.

Built from the long CSV's rows (evalsuite.results.leaderboard.read_rows) in four steps:
1. keep the rows the filters ask for;
2. keep, for each (model, task, probe, seed), only the latest run (re-runs replace older runs);
3. per (model, task), pick the probe with the best mean val score in the metric's direction (highest, or
   lowest for an error such as mse or nll: metrics/directions.py), never looking at test; an exact tie (at
   the ranking's 6 decimals) goes to the probe with the lower mean val NLL, a proper scoring rule, so a
   saturated val metric (1.000 for every probe) does not hand the cell to whichever probe sorts first by name;
   the name settles only what NLL cannot (no NLL rows: survival, segmentation). No genuine val (HEST's val is
   train): the card's recipe or an error (reporting/table/no_val.py). The chosen probe's seeds on the requested
   split are summarised as mean and sample std;
4. rank models per task (1 = best, ties share the average rank) and sum the ranks over the columns with two or more
   models (`ranked_tasks`: a lone model's "#1" ranks nothing): the mean rank is the figure over those tasks; scores
   are averaged only over tasks of one metric and one task kind (`metric_means`: no mean of accuracy and Pearson r,
   nor of a tile and a slide task's balanced accuracy; reporting/table/task_groups.py). A seed whose value is nan (an
   undefined metric) makes its cell's mean nan, ranked last, with a note naming it; a column without one finite mean
   is not ranked (nothing to rank by) and counts in no mean rank. Each cell carries its runs' precision
   (reporting/table/precisions.py says where models of different precisions are compared).
`--metric throughput_img_s` (or forward_img_s) shows what extraction cost instead of a score: the probe is chosen
on the task's headline metric and the cell is the mean, over the chosen runs, of the leaderboard column of that
name (schema 5; higher is better).
Intervals, rank intervals, best sets and cluster counts come afterwards (reporting/statistics/column_statistics.py)."""

import dataclasses
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.directions import higher_is_better
from evalsuite.reporting.table.cell_intervals import with_seed_intervals
from evalsuite.reporting.table.no_val import in_sample_val, probe_without_val
from evalsuite.reporting.table.precisions import with_precisions
from evalsuite.reporting.table.run_columns import run_column_scores
from evalsuite.reporting.table.task_groups import mean_groups, overall_columns, task_kinds
from evalsuite.reporting.table.undefined_values import undefined_seed_notes

SELECTION_SPLIT = "val"
TIE_BREAK_METRIC = "nll"  # a proper scoring rule: it tells apart probes whose val metric saturates
# Stored values have 6 decimals; rounding means to that before ranking keeps float noise
# (the same seeds summed in another order) from breaking a tie.
RANK_DECIMALS = 6
# Leaderboard columns (schema 5) that `--metric` may name: one value per run, not per split; higher is better.
RUN_COLUMN_METRICS = ("throughput_img_s", "forward_img_s")


@dataclass(frozen=True)
class Cell:
    mean: float
    std: float | None  # sample std over seeds (n - 1); None with a single seed
    seeds: tuple
    probe: str
    rank: float = math.nan
    run_ids: tuple = ()  # the run of each seed, in `seeds` order
    rank_interval: tuple | None = None  # (low, high) 95 % bootstrap rank interval, when predictions exist
    interval: tuple | None = None  # (low, high) 95 % interval of `mean` (reporting/statistics/column_statistics.py)
    interval_note: str = ""  # what a reader must know about `interval` (metrics/shown_intervals.py), if anything
    best_set: bool | None = None  # in the column's 95 % model confidence set; None: not tested
    best_set_p: float | None = None  # the model's MCS p-value (in the set at level a when >= a)
    untested: str = ""  # why the column could not be tested, when it could not
    precision: str = ""  # what its runs' backbone computed in (';'-joined when seeds differ; "": not recorded)


@dataclass
class ModelRow:
    model: str
    cells: dict  # task -> Cell
    metric_means: dict = field(default_factory=dict)  # mean_groups key -> mean over the group's tasks
    rank_sum: float | None = None
    mean_rank_interval: tuple | None = None  # 95 % bootstrap interval of rank_sum / tasks (column_statistics.py)
    weights_ids: tuple = ()  # more than one: the model's cells come from different weights


@dataclass
class WideTable:
    split: str
    tasks: list
    metrics: dict  # task -> the metric shown for it
    rows: list  # ModelRow, best rank sum first
    notes: list = field(default_factory=list)
    clusters: dict = field(default_factory=dict)  # task -> (count, unit): what the column's statistics rest on
    kinds: dict = field(default_factory=dict)  # task -> its card's kind, for tasks sharing a metric ("": unknown)
    published: dict = field(default_factory=dict)  # (model, task) -> a peer's figure (results/published.py)


@dataclass(frozen=True)
class Filters:
    tasks: tuple = ()
    models: tuple = ()
    probes: tuple = ()


def build_wide_table(rows: list[dict], split: str = "test", metric: str | None = None,
                     filters: Filters = Filters(), source: str = "the leaderboard", out_dir=None) -> WideTable:
    """`out_dir`: the results folder, whose run JSONs name each task's card (its kind; task_groups.py)."""
    rows = _latest_runs(_filtered(rows, filters, source))
    by_run_column = metric in RUN_COLUMN_METRICS
    chosen_on = _metric_per_task(rows, None if by_run_column else metric, source)
    _check_known(split, {r["split"] for r in rows}, "split", source)
    scores, runs = _scores(rows, chosen_on)
    shown, notes = (run_column_scores(rows, chosen_on, metric, source) if by_run_column else (scores, []))
    choice = _ProbeChoice(scores, _scores(rows, {task: TIE_BREAK_METRIC for task in chosen_on})[0], chosen_on, source,
                          in_sample_val(rows))
    cells = {key: _cell(choice, shown, runs, key, probes, split)
             for key, probes in _probes_per_cell(scores, split).items()}
    cells = {key: cell for key, cell in cells.items() if cell is not None}
    metrics = {task: metric for task in chosen_on} if by_run_column else chosen_on
    tasks = sorted(metrics)
    if not by_run_column:  # one seed: its own interval is the interval of the cell's number
        cells = with_seed_intervals(cells, rows, metrics, split)
    notes += undefined_seed_notes(cells, shown, metrics, split)
    kinds = task_kinds(rows, metrics, out_dir)
    table_rows, weights = _ranked_rows(with_precisions(cells, rows), tasks, metrics, kinds), _weights_by_model(rows)
    for table_row in table_rows:
        table_row.weights_ids = weights[table_row.model]
    return WideTable(split=split, tasks=tasks, metrics=metrics, rows=table_rows, kinds=kinds,
                     notes=notes + _mixed_weights_notes(table_rows))


def _filtered(rows: list[dict], filters: Filters, source: str) -> list[dict]:
    for column, wanted in (("task", filters.tasks), ("model", filters.models), ("probe", filters.probes)):
        for name in wanted:
            _check_known(name, {r[column] for r in rows}, column, source)
        if wanted:
            rows = [r for r in rows if r[column] in wanted]
    if not rows:
        raise EvalsuiteError(f"no rows in {source} match all of --task, --model and --probe; loosen a filter")
    return rows


def _check_known(name: str, known: set, column: str, source: str) -> None:
    if name not in known:
        raise EvalsuiteError(f"unknown {column} '{name}' in {source}; it has: {', '.join(sorted(known))}")


def _latest_runs(rows: list[dict]) -> list[dict]:
    """Only the rows of the latest run per (model, task, probe, seed); later in the file wins a timestamp tie."""
    latest = {}
    for row in rows:
        ident = (row["model"], row["task"], row["probe"], row["seed"])
        if ident not in latest or row["timestamp_utc"] >= latest[ident]["timestamp_utc"]:
            latest[ident] = row
    return [r for r in rows if latest[(r["model"], r["task"], r["probe"], r["seed"])]["run_id"] == r["run_id"]]


def _metric_per_task(rows: list[dict], metric: str | None, source: str) -> dict:
    if metric is not None:
        _check_known(metric, {r["metric"] for r in rows}, "metric", source)
        return {r["task"]: metric for r in rows}
    headlines = defaultdict(set)
    for row in rows:
        headlines[row["task"]].add(row["headline_metric"])
    for task, names in headlines.items():
        if len(names) > 1:
            raise EvalsuiteError(f"task '{task}' has runs with different headline metrics ({', '.join(sorted(names))}) "
                                 f"in {source}, so its card changed; pass --metric to pick one")
    return {task: names.pop() for task, names in headlines.items()}


def _scores(rows: list[dict], metrics: dict) -> tuple[dict, dict]:
    """(model, task, probe, split) -> {seed: value} for each task's metric, and the same keys -> {seed: run_id}."""
    scores, runs = defaultdict(dict), defaultdict(dict)
    for row in rows:
        if row["metric"] == metrics[row["task"]]:
            key = (row["model"], row["task"], row["probe"], row["split"])
            scores[key][row["seed"]], runs[key][row["seed"]] = row["value"], row["run_id"]
    return scores, runs


def _probes_per_cell(scores: dict, split: str) -> dict:
    """(model, task) -> the probes with scores on `split`, sorted."""
    probes = defaultdict(set)
    for model, task, probe, score_split in scores:
        if score_split == split:
            probes[(model, task)].add(probe)
    return {key: sorted(names) for key, names in probes.items()}


def _cell(choice: "_ProbeChoice", shown: dict, runs: dict, key: tuple, probes: list, split: str) -> Cell | None:
    """The chosen probe's seeds on `split`; `choice` picks the probe on val, `shown` gives the values (None: no
    value)."""
    model, task = key
    probe = probes[0] if len(probes) == 1 else choice.best(model, task, probes)
    values = shown.get((model, task, probe, split))
    if not values:
        return None
    seeds = tuple(sorted(values))
    numbers = [values[s] for s in seeds]
    # statistics.stdev fails on nan or inf ('float' object has no attribute 'numerator'): no spread is shown then.
    std = statistics.stdev(numbers) if len(numbers) > 1 and all(map(math.isfinite, numbers)) else None
    run_ids = tuple(runs[(model, task, probe, split)].get(s, "") for s in seeds)
    return Cell(mean=statistics.fmean(numbers), std=std, seeds=seeds, probe=probe, run_ids=run_ids)


@dataclass(frozen=True)
class _ProbeChoice:
    """Which probe a (model, task) cell shows: the best val mean of the task's metric in its direction; exact ties
    go to the lower val NLL, then to the name (the choice must be stable)."""
    scores: dict  # (model, task, probe, split) -> {seed: value} of each task's metric
    tie_break: dict  # the same keys -> {seed: value} of TIE_BREAK_METRIC
    metrics: dict  # task -> metric
    source: str
    in_sample: frozenset = frozenset()  # (model, task, probe) whose val rows are train's: not chosen on (no_val.py)

    def best(self, model: str, task: str, probes: list) -> str:
        val_means = self._val_means(self.scores, model, task, probes)
        in_sample = any((model, task, probe) in self.in_sample for probe in probes)
        if in_sample or not val_means:
            return probe_without_val(model, task, probes, in_sample, self.source)
        return choose_probe(val_means, self._val_means(self.tie_break, model, task, probes), self.metrics[task])

    @staticmethod
    def _val_means(scores: dict, model: str, task: str, probes: list) -> dict:
        return {p: statistics.fmean(scores[(model, task, p, SELECTION_SPLIT)].values())
                for p in probes if (model, task, p, SELECTION_SPLIT) in scores}


def choose_probe(val_means: dict, val_nll: dict, metric: str) -> str:
    """The probe (a key of `val_means`, its mean val `metric`) a cell shows: the best in the metric's direction,
    exact ties (6 decimals) to the lower mean val NLL (`val_nll`, may lack probes), then to the name. The Slurm
    templates' summary line calls this too, so a job log names the probe the leaderboard shows."""
    return min(val_means, key=lambda p: (_rank_key(val_means[p], higher_is_better(metric)),
                                         _rank_key(val_nll.get(p, math.nan), higher_better=False), p))


def _ranked_rows(cells: dict, tasks: list, metrics: dict, kinds: dict) -> list[ModelRow]:
    by_model = defaultdict(dict)
    for (model, task), cell in cells.items():
        by_model[model][task] = cell
    for task in tasks:
        _rank_task(by_model, task, higher_is_better(metrics[task]))
    overall = overall_columns({task: [c[task] for c in by_model.values() if task in c] for task in tasks})
    groups = mean_groups(tasks, metrics, kinds)
    rows = [_model_row(model, task_cells, overall, groups) for model, task_cells in by_model.items()]
    # Equal rank sums go to the better mean score, which exists only when every task is of one metric and kind.
    only = next(iter(groups)) if len(groups) == 1 else None
    sign = (-1 if higher_is_better(groups[only][0]) else 1) if only else 0
    complete = sorted((r for r in rows if r.rank_sum is not None),
                      key=lambda r: (r.rank_sum, sign * r.metric_means.get(only, 0.0), r.model))
    return complete + sorted((r for r in rows if r.rank_sum is None), key=lambda r: r.model)


def _rank_task(by_model: dict, task: str, higher_better: bool = True) -> None:
    """Rank 1 for the best mean (highest, or lowest for an error metric); tied means share the average of their
    positions; NaN ranks last."""
    entries = {m: c for m, c in by_model.items() if task in c}
    if not any(math.isfinite(c[task].mean) for c in entries.values()):
        return  # no number to rank by: the ranks stay nan (column_statistics.py says why)
    key = {m: _rank_key(c[task].mean, higher_better) for m, c in entries.items()}
    ordered = sorted(entries, key=lambda m: key[m])
    position = 0
    while position < len(ordered):
        tied = [m for m in ordered[position:] if key[m] == key[ordered[position]]]
        shared = position + (len(tied) + 1) / 2
        for model in tied:
            entries[model][task] = dataclasses.replace(entries[model][task], rank=shared)
        position += len(tied)


def _rank_key(mean: float, higher_better: bool = True) -> float:
    rounded = round(mean, RANK_DECIMALS)
    return math.inf if math.isnan(mean) else -rounded if higher_better else rounded


def _model_row(model: str, task_cells: dict, overall: list, groups: dict) -> ModelRow:
    row = ModelRow(model=model, cells=task_cells)
    if all(task in task_cells for task in overall):  # a model missing a ranked task is not comparable over tasks
        row.metric_means = {key: statistics.fmean(task_cells[t].mean for t in names)
                            for key, (_, _, names) in groups.items() if all(t in task_cells for t in names)}
        row.rank_sum = sum(task_cells[t].rank for t in overall) if overall else None
    return row


def ranked_tasks(table: WideTable) -> list:
    """The tasks the overall ranking (rank sum, mean rank, its interval) runs over: ranked columns (a finite mean)
    with two or more models (task_groups.overall_columns)."""
    return overall_columns({task: [row.cells[task] for row in table.rows if task in row.cells]
                            for task in table.tasks})


def _weights_by_model(rows: list[dict]) -> dict:
    weights = defaultdict(set)
    for row in rows:
        if row.get("weights_id"):
            weights[row["model"]].add(row["weights_id"])
    return defaultdict(tuple, {model: tuple(sorted(ids)) for model, ids in weights.items()})


def _mixed_weights_notes(table_rows: list[ModelRow]) -> list[str]:
    """The model name alone does not pin the weights (a checkpoint retrained under the same file name)."""
    return [f"model '{r.model}' mixes {len(r.weights_ids)} weights ({', '.join(r.weights_ids)}) across its runs; "
            "re-run it on every task or give the checkpoints distinct names"
            for r in table_rows if len(r.weights_ids) > 1]
