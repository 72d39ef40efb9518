"""`leaderboard --compare A B` and the wide table's rank intervals, from the runs' stored test predictions.

Both use the runs the wide table shows (evalsuite.reporting.wide: latest run per model/task/probe/seed, the
probe chosen on val) and their `<run_id>.predictions.npz` (evalsuite.reporting.predictions). Two models are
compared on a task only on the same test items: identical label arrays (same length, same order) and the same
bootstrap clusters. A model with several seeds is scored, in every bootstrap draw, by its metric averaged over
seeds, so the observed score is the table's cell. Per task: the paired bootstrap of A - B on the task's metric,
or for accuracy with one seed each and no clusters the exact McNemar test; p-values are Holm-adjusted over the
compared tasks, and a task's verdict is "A better" / "B better" when the adjusted p is below 0.05. A task whose
predictions name no clusters gets a note: its test (and rank intervals) treat the items as independent.
docs/significance.md has the formulas.
"""

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import cluster_index, independence_note
from evalsuite.metrics.draw_scores import per_draw_scores
from evalsuite.metrics.segmentation import ConfusionScorer, has_confusion_form
from evalsuite.metrics.significance import (ALPHA, ItemScorer, PairedResult, has_item_form, higher_is_better, holm,
                                            mcnemar_exact, paired_result, ranks_from_scores)
from evalsuite.reporting.leaderboard import format_table
from evalsuite.reporting.predictions import load_predictions, prediction_key
from evalsuite.reporting.wide import RUN_COLUMN_METRICS, WideTable

_LEAVE_OUT = "pass --task to leave the task out"


@dataclass(frozen=True)
class CellPredictions:
    """One model's chosen runs on one task: the test items and one probability matrix per seed (segmentation: one
    per-image confusion count array per seed, and the class names)."""
    labels: np.ndarray
    clusters: np.ndarray | None
    unit: str
    probas: list
    confusions: list = field(default_factory=list)
    class_names: list | None = None


@dataclass(frozen=True)
class TaskComparison:
    task: str
    metric: str
    items: int
    clusters: str  # e.g. "40 patient" or "120 tile"
    result: PairedResult
    p_holm: float = float("nan")
    verdict: str = ""


@dataclass
class Comparison:
    a: str
    b: str
    tasks: list  # TaskComparison
    notes: list = field(default_factory=list)


class PredictionsLoader:
    """Predictions files read once per run, whichever cells share them; each cell's scores in the bootstrap draws
    computed once, whichever tests and rank intervals use them."""

    def __init__(self, out_dir: Path):
        self.out_dir, self.loaded, self.scored = Path(out_dir), {}, {}

    def draw_scores(self, task: str, cells: dict, metric: str, draws: int, seed: int) -> dict:
        """{model: (observed score, float [draws])} of `cells` ({model: CellPredictions}, all on the same test items
        as `same_items` checks); the draws are the cluster bootstrap's (`seed`), the same for every model."""
        missing = {m: cell for m, cell in cells.items() if (task, m, metric, draws, seed) not in self.scored}
        if missing:
            scorers = {m: cell_scorer(cell, metric) for m, cell in missing.items()}
            reference = next(iter(missing.values()))
            items = len(reference.labels)
            found = per_draw_scores(scorers, reference.clusters, items, draws, seed)
            for m, scorer in scorers.items():
                self.scored[(task, m, metric, draws, seed)] = (scorer.score(np.ones(items)), found[m])
        return {m: self.scored[(task, m, metric, draws, seed)] for m in cells}

    def cell(self, model: str, task: str, cell) -> CellPredictions:
        probas, confusions, first = [], [], None
        for run_id, seed in zip(cell.run_ids, cell.seeds):
            if run_id not in self.loaded:
                self.loaded[run_id] = load_predictions(self.out_dir, run_id)
            stored = self.loaded[run_id]
            key = prediction_key(cell.probe, seed)
            if key not in stored.probas and key not in stored.confusions:
                raise EvalsuiteError(f"run {run_id} ({model} on {task}) stored no test predictions for probe "
                                     f"'{cell.probe}' seed {seed} (only classification and segmentation probes "
                                     f"store them); {_LEAVE_OUT}")
            if first is not None and not same_items(first, stored):
                raise EvalsuiteError(f"the seeds of {model} on {task} were tested on different items (runs "
                                     f"{cell.run_ids[0]} and {run_id}); the data changed between runs: rerun them")
            first = first or stored
            if key in stored.probas:
                probas.append(stored.probas[key])
            else:
                confusions.append(stored.confusions[key])
        return CellPredictions(first.labels, first.clusters, first.cluster_unit, probas, confusions, first.class_names)


def same_items(one, other) -> bool:
    if len(one.labels) != len(other.labels) or not np.array_equal(one.labels, other.labels):
        return False
    if (one.clusters is None) != (other.clusters is None):
        return False
    return one.clusters is None or np.array_equal(one.clusters, other.clusters)


def compare_models(table: WideTable, out_dir: Path, a: str, b: str, source: str, draws: int = 1000,
                   seed: int = 0) -> Comparison:
    """The per-task paired comparison of models `a` and `b` (both must be rows of `table`)."""
    rows = {row.model: row for row in table.rows}
    for name in (a, b):
        if name not in rows:
            raise EvalsuiteError(f"unknown model '{name}' in {source}; it has: {', '.join(sorted(rows))}")
    shared = [t for t in table.tasks if t in rows[a].cells and t in rows[b].cells]
    if not shared:
        raise EvalsuiteError(f"models '{a}' and '{b}' share no task in {source} (with the filters given); "
                             "run both on the same task")
    loader, compared, notes = PredictionsLoader(out_dir), [], []
    for task in shared:
        metric = table.metrics[task]
        if not (has_item_form(metric) or has_confusion_form(metric)):
            per_run = "measured per run" if metric in RUN_COLUMN_METRICS else "not computed from class probabilities"
            raise EvalsuiteError(f"--compare tests scores of test items; {metric} on task '{task}' is {per_run}: "
                                 f"pass --metric with a classification score or {_LEAVE_OUT}")
        first, second = loader.cell(a, task, rows[a].cells[task]), loader.cell(b, task, rows[b].cells[task])
        if not same_items(first, second):
            raise EvalsuiteError(f"models '{a}' and '{b}' share no test items on task '{task}' ({len(first.labels)} "
                                 f"vs {len(second.labels)} items, or other labels or clusters): their runs used "
                                 f"different data; rerun both on the same data or {_LEAVE_OUT}")
        scores = loader.draw_scores(task, {a: first, b: second}, metric, draws, seed)
        compared.append(compare_task(task, metric, first, second, (scores[a], scores[b])))
        if first.clusters is None:  # McNemar or an item bootstrap: both assume independent test items
            notes.append(f"{task}: {independence_note(first.unit, None, len(first.labels))}")
    adjusted = holm([c.result.p_value for c in compared])
    compared = [replace(c, p_holm=float(p), verdict=_verdict(c.result, float(p), c.metric, a, b))
                for c, p in zip(compared, adjusted)]
    return Comparison(a=a, b=b, tasks=compared, notes=notes)


def cell_scorer(cell: CellPredictions, metric: str):
    """The cell's scorer of item weights: per-image confusion counts (segmentation) or class probabilities."""
    if cell.confusions:
        return ConfusionScorer(cell.confusions, metric, cell.class_names)
    return ItemScorer(cell.labels, cell.probas, metric)


def compare_task(task: str, metric: str, a: CellPredictions, b: CellPredictions, scores: tuple) -> TaskComparison:
    """The paired test of cells `a` and `b` from their `PredictionsLoader.draw_scores` (a's, b's)."""
    (score_a, draws_a), (score_b, draws_b) = scores
    if cluster_index(a.clusters, len(a.labels))[1] < 2:  # nothing to resample
        result = PairedResult(score_a, score_b, score_a - score_b, *(float("nan"),) * 3, "bootstrap", 0)
    else:
        result = paired_result(score_a, score_b, draws_a - draws_b)
    if metric == "accuracy" and a.clusters is None and len(a.probas) == len(b.probas) == 1:
        # Independent items, one prediction each: the exact test needs no resampling (the interval stays bootstrap).
        correct_a, correct_b = (p[0].argmax(axis=1) == a.labels for p in (a.probas, b.probas))
        result = replace(result, p_value=mcnemar_exact(correct_a, correct_b)[2], method="mcnemar")
    units = len(np.unique(a.clusters)) if a.clusters is not None else len(a.labels)
    return TaskComparison(task=task, metric=metric, items=len(a.labels), clusters=f"{units} {a.unit}", result=result)


def _verdict(result: PairedResult, p_holm: float, metric: str, a: str, b: str) -> str:
    if np.isnan(p_holm):
        return "not testable (fewer than 2 clusters)"
    if p_holm >= ALPHA or result.difference == 0:
        return "no significant difference"
    a_better = (result.difference > 0) == higher_is_better(metric)
    return f"{a if a_better else b} better"


def comparison_text(comparison: Comparison) -> str:
    header = ["task", "metric", "items", "clusters", comparison.a, comparison.b, "A-B", "95% CI", "test", "p",
              "p_holm", "verdict"]
    body = [[c.task, c.metric, c.items, c.clusters, f"{c.result.a:.4f}", f"{c.result.b:.4f}",
             f"{c.result.difference:+.4f}", f"[{c.result.low:+.4f}, {c.result.high:+.4f}]", c.result.method,
             _p(c.result.p_value), _p(c.p_holm), c.verdict] for c in comparison.tasks]
    legend = [f"A = {comparison.a}, B = {comparison.b}: test split, paired on the same test items; "
              "scores are means over seeds (as in the wide table)",
              f"p: paired bootstrap ({comparison.tasks[0].result.draws if comparison.tasks else 0} draws over "
              "clusters) or exact McNemar; p_holm: Holm-adjusted over the tasks; "
              f"significant when p_holm < {ALPHA} (docs/significance.md)"]
    return "\n".join(legend + [format_table(header, body)])


def _p(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.4g}"


def add_rank_intervals(table: WideTable, out_dir: Path, draws: int = 1000, seed: int = 0,
                       loader: PredictionsLoader | None = None) -> WideTable:
    """The table with each cell's 95 % bootstrap rank interval, on tasks where every ranked model has stored
    predictions for the same test items; other tasks get a note instead. `loader`: one whose draw scores later
    tests reuse."""
    loader, skipped, unclustered = loader or PredictionsLoader(out_dir), [], []
    for task in table.tasks:
        ranked = [row for row in table.rows if task in row.cells]
        if len(ranked) < 2 or not (has_item_form(table.metrics[task]) or has_confusion_form(table.metrics[task])):
            continue  # one model has nothing to be ranked against; a per-run or non-class metric has no items
        try:
            loaded = {row.model: loader.cell(row.model, task, row.cells[task]) for row in ranked}
        except EvalsuiteError:
            skipped.append(task)
            continue
        reference = next(iter(loaded.values()))
        if not all(same_items(reference, other) for other in loaded.values()):
            skipped.append(task)
            continue
        if reference.clusters is None:
            unclustered.append(task)
        intervals = _rank_intervals(loader, task, loaded, table.metrics[task], draws, seed)
        for row in ranked:  # fewer than two clusters: (nan, nan), no interval to show
            if not np.isnan(intervals[row.model][0]):
                row.cells[task] = replace(row.cells[task], rank_interval=intervals[row.model])
    if unclustered:
        table.notes.append(f"rank intervals of {', '.join(unclustered)} treat the test items as independent (no "
                           "patient or slide ids known); items of one slide are correlated, so they may be too narrow")
    if skipped:
        table.notes.append(f"no rank intervals for {', '.join(skipped)}: a run there has no stored test predictions "
                           "(made before they were stored, or of a task kind that stores none) or other test items; "
                           "rerun it to get them")
    return table


def _rank_intervals(loader: PredictionsLoader, task: str, loaded: dict, metric: str, draws: int, seed: int) -> dict:
    reference = next(iter(loaded.values()))
    if cluster_index(reference.clusters, len(reference.labels))[1] < 2:
        return {model: (float("nan"), float("nan")) for model in loaded}
    scores = loader.draw_scores(task, loaded, metric, draws, seed)
    return ranks_from_scores({model: per_draw for model, (_, per_draw) in scores.items()}, metric)


def overlaps_leader(table: WideTable, task: str, model: str) -> bool:
    """True when `model`'s rank interval on `task` overlaps the task leader's (rank 1) interval; the leader
    itself and cells without intervals are never marked."""
    cells = {row.model: row.cells[task] for row in table.rows if task in row.cells}
    leader = min(cells, key=lambda m: (cells[m].rank, m))
    mine, best = cells[model].rank_interval, cells[leader].rank_interval
    if model == leader or mine is None or best is None or np.isnan(mine[0]) or np.isnan(best[0]):
        return False
    return mine[0] <= best[1]
