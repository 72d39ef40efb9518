"""A wide-table cell's stored test predictions and its scores in the bootstrap draws, read and computed once.

Every statistic of a task column (the interval of each mean, rank intervals, the model confidence set) and every
paired test of `leaderboard --compare` starts here: the runs the wide table shows (evalsuite.reporting.wide:
latest run per model/task/probe/seed, the probe chosen on val), their `<run_id>.predictions.npz`
(evalsuite.reporting.predictions), and each model's score in the same cluster-bootstrap draws (bootstrap.DRAW_SEED).
A model with several seeds is scored in every draw by its metric averaged over its seeds, so the observed score is
the table's cell. Two cells are on the same test items when their label arrays and clusters are identical.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.draw_scores import per_draw_scores
from evalsuite.metrics.segmentation import ConfusionScorer
from evalsuite.metrics.significance import ItemScorer
from evalsuite.reporting.predictions import NoPredictions, load_predictions, prediction_key

LEAVE_OUT = "pass --task to leave the task out"


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


class PredictionsLoader:
    """Predictions files read once per run, whichever cells share them; each cell's scores in the bootstrap draws
    computed once, whichever intervals, sets and tests use them."""

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
                raise NoPredictions(f"run {run_id} ({model} on {task}) stored no test predictions for probe "
                                     f"'{cell.probe}' seed {seed} (only classification and segmentation probes "
                                     f"store them); {LEAVE_OUT}")
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


def cell_scorer(cell: CellPredictions, metric: str):
    """The cell's scorer of item weights: per-image confusion counts (segmentation) or class probabilities."""
    if cell.confusions:
        return ConfusionScorer(cell.confusions, metric, cell.class_names)
    return ItemScorer(cell.labels, cell.probas, metric)
