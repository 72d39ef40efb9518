"""A wide-table cell's stored test predictions and its scores in the bootstrap draws, read and computed once.

Every statistic of a task column (the interval of each mean, rank intervals, the model confidence set) and every
paired test of `leaderboard --compare` starts here: the runs the wide table shows (evalsuite.reporting.table.wide:
latest run per model/task/probe/seed, the probe chosen on val), their `<run_id>.predictions.npz`
(evalsuite.results.predictions), and each model's score in the task's cluster-bootstrap draws
(bootstrap.task_draw_seed: the draws the task's runs scored their own intervals on).
A model with several seeds is scored in every draw by its metric averaged over its seeds, so the observed score is
the table's cell. Two cells are on the same test items when their item ids (a hash of each item's identity, where
both files store them), label arrays and clusters are identical.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import cluster_index, task_draw_seed
from evalsuite.metrics.draw_scores import block_scores, per_draw_scores
from evalsuite.metrics.few_clusters import leave_one_out_weights
from evalsuite.metrics.regression_draws import RegressionScorer, has_regression_form
from evalsuite.metrics.segmentation import ConfusionScorer, has_confusion_form
from evalsuite.metrics.significance import ItemScorer, has_item_form
from evalsuite.results.predictions import NoPredictions, load_predictions, prediction_key

LEAVE_OUT = "pass --task to leave the task out"


@dataclass(frozen=True)
class CellPredictions:
    """One model's chosen runs on one task: the test items and one probability matrix per seed (segmentation: one
    per-image confusion count array per seed, and the class names; regression: one predicted-target matrix per
    seed, `labels` the targets)."""
    labels: np.ndarray
    clusters: np.ndarray | None
    unit: str
    probas: list
    confusions: list = field(default_factory=list)
    class_names: list | None = None
    predictions: list = field(default_factory=list)
    item_ids: np.ndarray | None = None  # the stored hash of each test item's identity; None: an older file


class PredictionsLoader:
    """Predictions files read once per run, whichever cells share them; each cell's scores in the bootstrap draws
    computed once, whichever intervals, sets and tests use them."""

    def __init__(self, out_dir: Path):
        self.out_dir, self.loaded, self.scored = Path(out_dir), {}, {}

    def draw_scores(self, task: str, cells: dict, metric: str, draws: int) -> dict:
        """{model: (observed score, float [draws])} of `cells` ({model: CellPredictions}, all on the same test items
        as `same_items` checks); the draws are the task's cluster bootstrap (task_draw_seed), the same for every
        model."""
        seed = task_draw_seed(task)
        missing = {m: cell for m, cell in cells.items() if (task, m, metric, draws, seed) not in self.scored}
        if missing:
            scorers = {m: cell_scorer(cell, metric) for m, cell in missing.items()}
            reference = next(iter(missing.values()))
            items = len(reference.labels)
            found = per_draw_scores(scorers, reference.clusters, items, draws, seed)
            for m, scorer in scorers.items():
                self.scored[(task, m, metric, draws, seed)] = (scorer.score(np.ones(items)), found[m])
        return {m: self.scored[(task, m, metric, draws, seed)] for m in cells}

    def left_out_scores(self, task: str, cells: dict, metric: str) -> dict:
        """{model: float [K]}: each cell's score with each of the test split's K clusters left out (the jackknife
        the few-cluster best set reads, few_clusters.wild_t_draws)."""
        reference = next(iter(cells.values()))
        weights = leave_one_out_weights(reference.clusters, len(reference.labels))
        found = {}
        for model, cell in cells.items():
            key = (task, model, metric, "left out")
            if key not in self.scored:
                self.scored[key] = block_scores(cell_scorer(cell, metric), weights)
            found[model] = self.scored[key]
        return found

    def cell(self, model: str, task: str, cell) -> CellPredictions:
        found, first = {"probas": [], "confusions": [], "predictions": []}, None
        for run_id, seed in zip(cell.run_ids, cell.seeds):
            if run_id not in self.loaded:
                self.loaded[run_id] = load_predictions(self.out_dir, run_id)
            stored = self.loaded[run_id]
            key = prediction_key(cell.probe, seed)
            stores = [name for name in found if key in getattr(stored, name)]
            if not stores:
                why = (f"probe '{cell.probe}' stores no per-item test predictions (its score is not made of one "
                       "prediction per test item)")
                raise NoPredictions(f"run {run_id} ({model} on {task}): {why}; {LEAVE_OUT}", why)
            if first is not None and not same_items(first, stored):
                raise EvalsuiteError(f"the seeds of {model} on {task} were tested on different items (runs "
                                     f"{cell.run_ids[0]} and {run_id}); the data changed between runs: rerun them")
            first = first or stored
            found[stores[0]].append(getattr(stored, stores[0])[key])
        return CellPredictions(first.labels, first.clusters, first.cluster_unit, found["probas"], found["confusions"],
                               first.class_names, found["predictions"], first.item_ids)


def cluster_count(cell: CellPredictions) -> int:
    """How many clusters the cell's test items fall into (each item its own when none are known)."""
    return cluster_index(cell.clusters, len(cell.labels))[1]


def has_draw_form(metric: str) -> bool:
    """Whether a cell's `metric` can be scored in bootstrap draws from some kind's stored per-item predictions."""
    return has_item_form(metric) or has_confusion_form(metric) or has_regression_form(metric)


def same_items(one, other) -> bool:
    """Whether two runs' (or cells') predictions are of the same test items in the same order: their item ids where
    both files store them (the same labels in another item order are other items), and their labels and clusters."""
    one_ids, other_ids = getattr(one, "item_ids", None), getattr(other, "item_ids", None)
    if one_ids is not None and other_ids is not None and not np.array_equal(one_ids, other_ids):
        return False
    if len(one.labels) != len(other.labels) or not np.array_equal(one.labels, other.labels):
        return False
    if (one.clusters is None) != (other.clusters is None):
        return False
    # As strings: a file from before integer ids were kept names the same clusters as strings.
    return one.clusters is None or np.array_equal(one.clusters.astype(str), other.clusters.astype(str))


def cell_scorer(cell: CellPredictions, metric: str):
    """The cell's scorer of item weights: per-image confusion counts (segmentation), predicted targets (regression)
    or class probabilities."""
    if cell.confusions:
        return ConfusionScorer(cell.confusions, metric, cell.class_names)
    if cell.predictions:
        return RegressionScorer(cell.labels, cell.predictions, metric)
    return ItemScorer(cell.labels, cell.probas, metric)
