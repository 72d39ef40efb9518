"""What the wide table says about each task column beyond its means, from every model's scores on shared draws.

For each task whose models stored test predictions for the same test items (reporting/statistics/cell_draws.py), the models'
scores in the task's 1000 cluster-bootstrap draws (bootstrap.task_draw_seed) give, with the test split's K clusters
(`WideTable.clusters`, what every statement of the column rests on):
- each cell's `interval`: the shown interval (metrics/shown_intervals.py) of its own mean's draws (the mean over seeds
  in every draw), the interval of the number in the cell, and its `interval_note` where a reader needs one;
- each cell's `rank_interval`: its rank among the column's models in every draw read for K clusters
  (few_clusters.widened), 2.5th and 97.5th percentiles;
- the column's model confidence set (metrics/multiple_comparisons.py; up to few_clusters.WILD_MAX_CLUSTERS clusters
  from the wild cluster bootstrap-t of the models' leave-one-cluster-out scores): `best_set` True for the models
  that cannot be told apart from the best at 95 %, with the family-wise error controlled including the choice of
  the best;
- per model with every ranked task (wide.ranked_tasks: two or more models), the interval of its mean rank over those
  tasks: every such task re-ranked in each draw (draw b of every task together), the mean over tasks, percentiles.
A column that cannot be tested (no stored predictions, other test items, fewer clusters than
few_clusters.MIN_CLUSTERS, a metric not scored from items, no finite score) gets `untested` = why on each cell, and
a note naming the task; never a reading of "worse". A column whose cells hold no finite mean (every value nan) is not
tested whatever its predictions say (its cells show no number to put an interval or a mark on) and, unranked
(wide.py), counts in no mean rank. A lone model's column is not marked (there is no one to tell it apart from), but
why it has no draws is still said when a file is at fault. A cell whose mean is nan (one undefined seed) is scored nan
in every draw, as the table shows it: ranked last. Cells without
draws keep the interval the runs recorded for the same number where there is one: one seed's own interval (the
leaderboard row's ci_low, ci_high), or for several seeds of one run the run's interval of their mean
(`intervals_95_seed_mean`). docs/significance.md has the procedures.
"""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, task_draw_seed
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.few_clusters import WILD_MAX_CLUSTERS, too_few_clusters, widened
from evalsuite.metrics.multiple_comparisons import model_confidence_set
from evalsuite.metrics.shown_intervals import shown_interval
from evalsuite.metrics.significance import average_ranks, ranks_from_scores
from evalsuite.reporting.statistics.cell_draws import PredictionsLoader, cluster_count, has_draw_form, same_items
from evalsuite.reporting.table.wide import RUN_COLUMN_METRICS, WideTable, ranked_tasks
from evalsuite.results.predictions import NoPredictions
from evalsuite.results.run_json import RUNS_FOLDER

NO_PREDICTIONS = "a run has no stored test predictions"  # then why: a rerun stores them, or none is stored


class FileFault(str):
    """Why a column has no draws, when a file is at fault (a damaged predictions file, seeds on other items): said
    even for a lone model's column, which is never marked, since the fix is the user's (delete it and rerun)."""


def add_column_statistics(table: WideTable, out_dir: Path, loader: PredictionsLoader | None = None,
                          draws: int = BOOTSTRAP_DRAWS) -> WideTable:
    """The table with every column's intervals, rank intervals and best set where its draws exist, notes where
    not, and each complete model's mean-rank interval. `loader`: one whose draw scores later tests reuse."""
    loader = loader or PredictionsLoader(out_dir)
    drawn, untested, unclustered, lone = {}, {}, [], {}
    for task in table.tasks:
        ranked = [row for row in table.rows if task in row.cells]
        if ranked and not any(math.isfinite(row.cells[task].mean) for row in ranked):
            untested[task] = f"no model has a finite {table.metrics[task]} on the {table.split} split (every value " \
                             "is nan or infinite: the metric is undefined there), so the column is not ranked"
            _mark_untested(ranked, task, untested[task], drop_intervals=True)
            continue
        scores, why = column_draws(table, task, loader, draws)
        if scores is None:
            too_few = task in table.clusters  # then no interval either, even a lone model's from its run
            if why and (len(ranked) > 1 or too_few):  # a lone model has nothing to be told apart from: no mark
                untested[task] = why
                _mark_untested(ranked, task, why, drop_intervals=too_few)
            elif why:
                lone[task] = why
            continue
        scores = _as_shown(scores, {row.model: row.cells[task].mean for row in ranked})
        reference = loader.cell(ranked[0].model, task, ranked[0].cells[task])
        clusters = cluster_count(reference)
        table.clusters[task] = (clusters, reference.unit)
        drawn[task] = {m: (observed, widened(values, observed, clusters)) for m, (observed, values) in scores.items()}
        if reference.clusters is None:
            unclustered.append(task)
        left_out = loader.left_out_scores(task, {row.model: loader.cell(row.model, task, row.cells[task])
                                                 for row in ranked}, table.metrics[task]) \
            if len(ranked) > 1 and clusters <= WILD_MAX_CLUSTERS else None
        why = _fill_column(table, task, ranked, scores, (clusters, reference.unit), left_out)
        if why:
            untested[task] = why
    _fill_missing_intervals(table, Path(out_dir))
    said = {task for task, why in lone.items() if isinstance(why, FileFault)} | set(untested)  # a note says why
    _add_mean_rank_intervals(table, drawn, {**lone, **untested}, said)
    table.notes += _notes(untested, unclustered) + _lone_notes(lone) + _interval_notes(table)
    return table


def _as_shown(scores: dict, means: dict) -> dict:
    """The draws of a cell whose mean is nan (a seed's metric undefined, or the value edited) are nan too, so its
    statistics say what its number says (ranked last, never in the best set) whatever its predictions score."""
    return {model: (math.nan, np.full_like(values, np.nan)) if math.isnan(means[model]) else (observed, values)
            for model, (observed, values) in scores.items()}


def _lone_notes(lone: dict) -> list[str]:
    """A lone model's column is not marked, but a damaged predictions file or seeds on other items is said: the
    file to delete and rerun."""
    return [f"{task}: no interval or rank from the stored test predictions: {why}" for task, why in lone.items()
            if isinstance(why, FileFault)]


def column_draws(table: WideTable, task: str, loader: PredictionsLoader, draws: int) -> tuple:
    """({model: (observed, float [draws])}, "") for a testable column, else (None, why not; "" for a per-run
    column, which is not a score of test items)."""
    metric = table.metrics[task]
    if metric in RUN_COLUMN_METRICS:
        return None, ""
    if not has_draw_form(metric):
        return None, f"{metric} is not scored from per-item predictions, which its runs do not store"
    ranked = [row for row in table.rows if task in row.cells]
    if not ranked:
        return None, ""
    try:
        loaded = {row.model: loader.cell(row.model, task, row.cells[task]) for row in ranked}
    except NoPredictions as exc:
        return None, f"{NO_PREDICTIONS}: {exc.why}"
    except EvalsuiteError as exc:  # a damaged file, seeds on other items: its own message names the file and fix
        return None, FileFault(exc)
    reference = next(iter(loaded.values()))
    if not all(same_items(reference, other) for other in loaded.values()):
        return None, ("its runs were tested on different items (another split, or data changed or reordered): rerun "
                      "them on the same")
    clusters = cluster_count(reference)
    if clusters < 2:
        return None, f"its test split is one {reference.unit}: there is nothing to resample"
    if too_few_clusters(clusters, reference.unit):
        table.clusters[task] = (clusters, reference.unit)
        return None, too_few_clusters(clusters, reference.unit)
    return loader.draw_scores(task, loaded, metric, draws), ""


def _mark_untested(ranked: list, task: str, why: str, drop_intervals: bool = False) -> None:
    """No mark; with `drop_intervals` (too few clusters) not the interval a cell kept from its run either (a run
    made before the few-cluster rule stored one)."""
    for row in ranked:
        row.cells[task] = replace(row.cells[task], untested=why, **({"interval": None} if drop_intervals else {}))


def _fill_column(table: WideTable, task: str, ranked: list, scores: dict, clusters: tuple,
                 left_out: dict | None) -> str:
    """Every cell's interval, rank interval and best-set membership; why the set could not be found, if so."""
    metric, (count, unit) = table.metrics[task], clusters
    per_draw = {model: values for model, (_, values) in scores.items()}
    observed = {m: value for m, (value, _) in scores.items()}
    if not any(np.isfinite(value) for value in observed.values()):
        why = f"no model has a finite {metric} on it"
        _mark_untested(ranked, task, why)
        return why
    spread = {m: widened(per_draw[m], observed[m], count) for m in per_draw}
    ranks = ranks_from_scores(spread, metric) if len(ranked) > 1 else {}
    best = model_confidence_set(observed, per_draw, higher_is_better(metric), clusters=count, left_out=left_out,
                                seed=task_draw_seed(task)) if len(ranked) > 1 else None
    undefined = sorted(m for m, value in observed.items() if np.isnan(value))  # a cell whose mean is nan
    why = ("no bootstrap draw scored every model" + (f" ({', '.join(undefined)}: {metric} nan, undefined)"
                                                     if undefined else "")) if best is None and len(ranked) > 1 else ""
    for row in ranked:
        shown = shown_interval(observed[row.model], per_draw[row.model], count, metric, unit, CONFIDENCE)
        finite = not any(np.isnan(bound) for bound in shown.bounds)
        changes = {"interval": shown.bounds if finite else None, "interval_note": shown.note, "untested": why}
        if row.model in ranks:
            changes["rank_interval"] = ranks[row.model]
        if best is not None:
            changes.update(best_set=best.contains(row.model), best_set_p=best.p_values[row.model])
        row.cells[task] = replace(row.cells[task], **changes)
    return why


def _fill_missing_intervals(table: WideTable, out_dir: Path) -> None:
    """Several seeds of one run without draws here (a regression or survival run): the run's interval of their
    mean, when the run scored exactly the cell's seeds."""
    for row in table.rows:
        for task, cell in row.cells.items():
            if task in table.clusters and too_few_clusters(*table.clusters[task]):
                continue
            if cell.interval is None and len(cell.seeds) > 1 and len(set(cell.run_ids)) == 1:
                found = _run_mean_interval(out_dir, cell.run_ids[0], cell.probe, table.metrics[task], cell.seeds)
                if found is not None:
                    row.cells[task] = replace(cell, interval=found)


def _run_mean_interval(out_dir: Path, run_id: str, probe: str, metric: str, seeds: tuple) -> tuple | None:
    try:
        record = json.loads((out_dir / RUNS_FOLDER / f"{run_id}.json").read_text())
        scored = sorted(str(r.get("seed")) for r in record.get("probes") or [] if r.get("probe") == probe)
        bounds = record["intervals_95_seed_mean"]["test"][probe][metric]
        low, high = float(bounds[0]), float(bounds[1])
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    if scored != sorted(str(s) for s in seeds) or np.isnan(low) or np.isnan(high):
        return None
    return low, high


def _add_mean_rank_intervals(table: WideTable, drawn: dict, untested: dict, said: set = frozenset()) -> None:
    """`untested`: why a column has no draws; `said`: the columns whose own note says it (not said twice)."""
    complete, tasks = [row for row in table.rows if row.rank_sum is not None], ranked_tasks(table)
    if not complete or any(table.metrics[t] in RUN_COLUMN_METRICS for t in table.tasks):
        return
    lacking = [task for task in tasks if task not in drawn]  # an unranked column counts in no mean rank
    if lacking:
        reasons = [f"{t}: {'its note says why' if t in said else untested[t]}" for t in lacking if t in untested]
        table.notes.append(f"no interval of the mean rank over tasks: {', '.join(lacking)} "
                           f"{'has' if len(lacking) == 1 else 'have'} no bootstrap draws "
                           f"({'; '.join(reasons) or 'one model'})")
        return
    per_task = [_draw_ranks(drawn[task], [row.model for row in complete], higher_is_better(table.metrics[task]))
                for task in tasks]
    means = np.mean(per_task, axis=0)  # [draws, complete models]
    tail = (1 - CONFIDENCE) / 2 * 100
    low = np.percentile(means, tail, axis=0, method="lower")
    high = np.percentile(means, 100 - tail, axis=0, method="higher")
    for i, row in enumerate(complete):
        row.mean_rank_interval = (float(low[i]), float(high[i]))


def _draw_ranks(scores: dict, models: list, higher_better: bool) -> np.ndarray:
    """[draws, len(models)]: each model's rank among every model of the column in each draw."""
    column = sorted(scores)
    ranks = average_ranks(np.stack([scores[m][1] for m in column], axis=1), higher_better)
    return ranks[:, [column.index(m) for m in models]]


def _notes(untested: dict, unclustered: list) -> list[str]:
    notes = [f"{task} not tested (marked ?): {why}" for task, why in untested.items()]
    if unclustered:
        notes.append(f"intervals, rank intervals and best sets of {', '.join(unclustered)} treat the test items as "
                     "independent (no patient or slide ids known); items of one slide are correlated, so they may "
                     "be too narrow")
    return notes


def _interval_notes(table: WideTable) -> list[str]:
    """One note per cell whose interval needs one (exact, bias-corrected, lopsided: metrics/shown_intervals.py)."""
    return [f"{task}, {row.model}: interval {row.cells[task].interval_note}" for task in table.tasks
            for row in table.rows if task in row.cells and row.cells[task].interval_note]
