"""Percentile bootstrap intervals of one probe's test metrics, a block of draws at a time.

The draws are `bootstrap.draw_weights`' (1000, seeded, clusters resampled with replacement: bootstrap.py says why),
and each metric is `bootstrap.weighted_metrics`' for the same draw. The confusion-matrix metrics and the calibration
errors are computed for a block of draws [draws, items] at once: the weighted confusion matrices of the block are one
sparse product (draw_scores.py), the calibration sums per confidence bin three more. AUROC stays draw by draw
(`_ClassRanks`): for it the block's sparse product was 2-3x slower than per-draw bincounts at CRC-100K's 9 classes x
7,180 test tiles. Against scoring everything draw by draw (one-off, one process): 2x faster at BACH's 132 test photos,
1.2x at PCam's 32,768 test tiles, the same at CRC-100K's.
"""

import numpy as np

from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, _ClassRanks, cluster_index, percentile_interval
from evalsuite.metrics.calibration import CalibrationItems
from evalsuite.metrics.draw_scores import CategorySums, confusion_scores, draw_blocks, macro_mean
from evalsuite.metrics.ordinal import ORDINAL_METRIC, kappa_from_confusion

# A block of draws as float64 [draws, items]: with the sparse sums of its confusion matrices and calibration bins a
# run's scoring stays within tens of MiB at PCam's 32,768 test tiles (the report's larger blocks score many models).
BLOCK_BYTES = 4 * 1024**2


class DrawMetrics:
    """Every interval metric of one probability matrix, for each row of item weights [draws, items]."""

    def __init__(self, y_true: np.ndarray, proba: np.ndarray, ordinal: bool = False):
        self.classes = proba.shape[1]
        self.ordinal = ordinal
        predicted = proba.argmax(axis=1)
        self.pairs = CategorySums([y_true * self.classes + predicted], self.classes ** 2)
        self.ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(self.classes)]
        calibration = CalibrationItems(y_true, proba)
        self.bin_sums = [CategorySums([calibration.bin], calibration.n_bins, values)
                         for values in (None, calibration.correct, calibration.confidence)]
        self.item_terms = np.stack([calibration.brier, calibration.nll], axis=1)  # [items, 2]

    def scores(self, weights: np.ndarray) -> dict:
        """{metric: float64 [draws]}, the metrics `weighted_metrics` gives one draw."""
        confusion = self.pairs.sums(weights).reshape(-1, self.classes, self.classes)
        found = confusion_scores(confusion)
        if self.ordinal:
            found[ORDINAL_METRIC] = np.array([kappa_from_confusion(matrix) for matrix in confusion])
        found["auroc_macro_ovr"] = macro_mean(np.array([[r.auroc(w) for r in self.ranks] for w in weights]))
        found.update(self._calibration(weights))
        return found

    def _calibration(self, weights: np.ndarray) -> dict:
        """ece, mce, brier and nll per draw, as CalibrationItems.metrics (nan for a draw of total weight 0)."""
        count, correct, confidence = (sums.sums(weights)[:, 0] for sums in self.bin_sums)
        total = weights.sum(axis=1)
        filled = count > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = np.where(filled, np.abs(correct - confidence) / np.where(filled, count, 1), 0.0)
            ece = (count / total[:, None] * gap).sum(axis=1)
            mce = np.where(filled, gap, -np.inf).max(axis=1)
            brier, nll = (weights @ self.item_terms / total[:, None]).T
        empty = total <= 0
        return {name: np.where(empty, np.nan, values)
                for name, values in zip(("ece", "mce", "brier", "nll"), (ece, mce, brier, nll))}


def bootstrap_intervals(y_true: np.ndarray, proba: np.ndarray, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                        confidence: float = CONFIDENCE, groups=None, ordinal: bool = False) -> dict:
    """{metric: (low, high)} of the percentile bootstrap interval over resampled test clusters.

    `groups`: one cluster id per test item (e.g. its patient), or None for one cluster per item; `ordinal`: also
    the quadratic weighted kappa. With fewer than two clusters every interval is (nan, nan)."""
    found = bootstrap_draw_scores(y_true, proba, draws, seed, groups, ordinal)
    return {name: percentile_interval(values, confidence) for name, values in found.items()}


def bootstrap_draw_scores(y_true: np.ndarray, proba: np.ndarray, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                          groups=None, ordinal: bool = False) -> dict:
    """{metric: float64 [draws]}: every interval metric in each draw (no draws, [0], with fewer than two clusters)."""
    y_true = np.asarray(y_true, dtype=np.int64)
    items = proba.shape[0]
    metrics = DrawMetrics(y_true, np.asarray(proba, dtype=np.float64), ordinal)
    if cluster_index(groups, items)[1] < 2:
        return {name: np.zeros(0) for name in metrics.scores(np.ones((1, items)))}
    found = {}
    for weights in draw_blocks(groups, items, draws, seed, BLOCK_BYTES):
        for name, values in metrics.scores(weights).items():
            found.setdefault(name, []).append(values)
    return {name: np.concatenate(parts) for name, parts in found.items()}
