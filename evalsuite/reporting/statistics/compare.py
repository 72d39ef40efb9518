"""`leaderboard --compare A B`: per task, is A better than B on the same test items? From the stored predictions.

Both models' cells are the wide table's (reporting/statistics/cell_draws.py reads them and scores them in the task's
cluster-bootstrap draws; a model with several seeds is scored in every draw by its metric averaged over seeds, so
the observed score is the table's cell). Two models are compared on a task only on the same test items. Per task:
the paired bootstrap of A - B on the task's metric, its draws read for the task's K clusters
(few_clusters.widened), gives the interval and the task's own p (or, for accuracy with one seed each and no
clusters, the exact McNemar p); a task of fewer than few_clusters.MIN_CLUSTERS clusters is not tested, with the
reason. Over the tasks, the step-down max-t test (metrics/multiple_comparisons.py, each task's t(K - 1) reference)
on the same draws adjusts for testing every task at once without a Holm multiplier, so the smallest adjusted p stays
1 / 1001 at any number of tasks; a task's verdict is "A better" /
"B better" when the adjusted p is below 0.05. A task whose predictions name no clusters gets a note: its test
treats the items as independent. A task that cannot be tested (a per-run metric, no stored predictions, other test
items, a damaged file) is skipped with its reason, and the others are compared: a sweep of several task kinds is
compared where it can be; with no task left, the reasons are the error. The legend says what precision each
model's backbone computed in, and compared tasks where the two ran in different precisions get one note naming
them (reporting/table/precisions.py). docs/significance.md has the formulas.
"""

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import independence_note
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.few_clusters import tie_tolerance, too_few_clusters, widened
from evalsuite.metrics.multiple_comparisons import stepdown_max_t
from evalsuite.metrics.significance import ALPHA, PairedResult, mcnemar_exact, paired_result
from evalsuite.reporting.statistics.cell_draws import LEAVE_OUT as _LEAVE_OUT
from evalsuite.reporting.statistics.cell_draws import (
    CellPredictions,
    PredictionsLoader,
    cluster_count,
    has_draw_form,
    same_items,
)
from evalsuite.reporting.table.precisions import mixed_precision_note
from evalsuite.reporting.table.text_table import format_table
from evalsuite.reporting.table.wide import RUN_COLUMN_METRICS, WideTable


@dataclass(frozen=True)
class TaskComparison:
    task: str
    metric: str
    items: int
    clusters: str  # e.g. "40 patient" or "120 tile"
    result: PairedResult
    cluster_count: int = 0  # the test split's clusters (K), what the task's statements rest on
    p_adjusted: float = float("nan")  # step-down max-t over the compared tasks
    verdict: str = ""
    draws: np.ndarray | None = None  # A - B in each bootstrap draw (nan: undefined)


@dataclass
class Comparison:
    a: str
    b: str
    tasks: list  # TaskComparison
    notes: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # task -> why it could not be tested
    precisions: dict = field(default_factory=dict)  # model -> its cells' precisions on the compared tasks


def compare_models(table: WideTable, out_dir: Path, a: str, b: str, source: str, draws: int = 1000) -> Comparison:
    """The per-task paired comparison of models `a` and `b` (both must be rows of `table`)."""
    rows = {row.model: row for row in table.rows}
    for name in (a, b):
        if name not in rows:
            raise EvalsuiteError(f"unknown model '{name}' in {source}; it has: {', '.join(sorted(rows))}")
    shared = [t for t in table.tasks if t in rows[a].cells and t in rows[b].cells]
    if not shared:
        raise EvalsuiteError(f"models '{a}' and '{b}' share no task in {source} (with the filters given); "
                             "run both on the same task")
    loader, compared, notes, skipped = PredictionsLoader(out_dir), [], [], {}
    for task in shared:
        metric = table.metrics[task]
        try:
            first, second = _testable_cells(loader, task, metric, rows[a], rows[b])
        except EvalsuiteError as exc:  # this task's reason; the others are still compared
            skipped[task] = str(exc).replace(f"; {_LEAVE_OUT}", "")
            continue
        scores = loader.draw_scores(task, {a: first, b: second}, metric, draws)
        compared.append(compare_task(task, metric, first, second, (scores[a], scores[b])))
        if first.clusters is None:  # McNemar or an item bootstrap: both assume independent test items
            notes.append(f"{task}: {independence_note(first.unit, None, len(first.labels))}")
    if not compared:
        raise EvalsuiteError(f"no task of '{a}' and '{b}' could be compared: {'; '.join(skipped.values())}; "
                             f"{_LEAVE_OUT}, or pass --metric with a score of test items")
    adjusted = _adjusted(compared, draws)
    compared = [replace(c, p_adjusted=float(p), verdict=_verdict(c.result, float(p), c.metric, a, b,
                                                                  (c.cluster_count, c.clusters.split(" ", 1)[1])))
                for c, p in zip(compared, adjusted)]
    tasks = [c.task for c in compared]
    notes += filter(None, [mixed_precision_note(table, tasks, "--compare pairs")])
    precisions = {name: ", ".join(sorted({rows[name].cells[t].precision for t in tasks} - {""})) for name in (a, b)}
    return Comparison(a=a, b=b, tasks=compared, notes=notes, skipped=skipped, precisions=precisions)


def _testable_cells(loader: PredictionsLoader, task: str, metric: str, row_a, row_b) -> tuple:
    """Both models' CellPredictions on `task`, or an EvalsuiteError saying why the task cannot be tested."""
    if not has_draw_form(metric):
        per_run = "measured per run" if metric in RUN_COLUMN_METRICS else "not computed from per-item predictions"
        raise EvalsuiteError(f"{metric} on task '{task}' is {per_run}")
    first, second = loader.cell(row_a.model, task, row_a.cells[task]), loader.cell(row_b.model, task, row_b.cells[task])
    if not same_items(first, second):
        raise EvalsuiteError(f"models '{row_a.model}' and '{row_b.model}' share no test items on task '{task}' "
                             f"({len(first.labels)} vs {len(second.labels)} items, or other labels, clusters or "
                             "item ids): "
                             "their runs used different data; rerun both on the same data")
    return first, second


def _adjusted(compared: list, draws: int) -> np.ndarray:
    """Step-down max-t p-values over the tasks, from each task's A - B draws (draw b of every task together)."""
    per_task = np.full((draws, len(compared)), np.nan)
    for column, comparison in enumerate(compared):
        if comparison.draws is not None and len(comparison.draws) == draws:
            per_task[:, column] = comparison.draws
    return stepdown_max_t(np.array([c.result.difference for c in compared]), per_task,
                          clusters=[c.cluster_count for c in compared])


def compare_task(task: str, metric: str, a: CellPredictions, b: CellPredictions, scores: tuple) -> TaskComparison:
    """The paired test of cells `a` and `b` from their `PredictionsLoader.draw_scores` (a's, b's)."""
    (score_a, draws_a), (score_b, draws_b) = scores
    differences, clusters = None, cluster_count(a)
    if too_few_clusters(clusters):  # nothing (one cluster) or too little to resample
        result = PairedResult(score_a, score_b, score_a - score_b, *(float("nan"),) * 3, "bootstrap", 0)
    else:
        differences = draws_a - draws_b
        result = paired_result(score_a, score_b, widened(differences, score_a - score_b, clusters))
    if metric == "accuracy" and a.clusters is None and len(a.probas) == len(b.probas) == 1:
        # Independent items, one prediction each: the exact test needs no resampling (the interval stays bootstrap).
        correct_a, correct_b = (p[0].argmax(axis=1) == a.labels for p in (a.probas, b.probas))
        result = replace(result, p_value=mcnemar_exact(correct_a, correct_b)[2], method="mcnemar")
    return TaskComparison(task=task, metric=metric, items=len(a.labels), clusters=f"{clusters} {a.unit}",
                          result=result, cluster_count=clusters, draws=differences)


def _verdict(result: PairedResult, p_adjusted: float, metric: str, a: str, b: str, clusters: tuple) -> str:
    if np.isnan(p_adjusted):
        return f"not tested: {too_few_clusters(*clusters) or 'no bootstrap draw scored both models'}"
    if p_adjusted >= ALPHA or abs(result.difference) <= tie_tolerance(result.a, result.b):
        return "no significant difference"
    a_better = (result.difference > 0) == higher_is_better(metric)
    return f"{a if a_better else b} better"


def comparison_text(comparison: Comparison) -> str:
    header = ["task", "metric", "items", "clusters", comparison.a, comparison.b, "A-B", "95% CI", "test", "p",
              "p_adj", "verdict"]
    body = [[c.task, c.metric, c.items, c.clusters, f"{c.result.a:.4f}", f"{c.result.b:.4f}",
             f"{c.result.difference:+.4f}", f"[{c.result.low:+.4f}, {c.result.high:+.4f}]", c.result.method,
             _p(c.result.p_value), _p(c.p_adjusted), c.verdict] for c in comparison.tasks]
    legend = [f"A = {comparison.a}{_precision(comparison, comparison.a)}, B = {comparison.b}"
              f"{_precision(comparison, comparison.b)}: test split, paired on the same test items; "
              "scores are means over seeds (as in the wide table)",
              f"p: this task alone, paired bootstrap ({comparison.tasks[0].result.draws if comparison.tasks else 0} "
              "draws over the clusters column, read with its t(K - 1) reference) or exact McNemar; p_adj: step-down "
              "max-t over the "
              f"{len(comparison.tasks)} task(s), studentised, from the same draws (the family-wise error over the "
              f"tasks at {ALPHA}); the verdict reads p_adj < {ALPHA} (docs/significance.md)"]
    skipped = [f"not compared: {task}: {why}" for task, why in comparison.skipped.items()]
    return "\n".join(legend + [format_table(header, body)] + skipped)


def _precision(comparison: Comparison, model: str) -> str:
    """" (fp32)": what the model's backbone computed in on the compared tasks ("": not recorded, before schema 4)."""
    found = comparison.precisions.get(model)
    return f" ({found})" if found else ""


def _p(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.4g}"
