"""A regression cell's score in any bootstrap draw, from the predicted targets its runs stored.

The draws are item weights (how often a draw took each test item), the same rows of `bootstrap.draw_weights` as a
classification cell's, so every model of a column is scored on the same resampled items. A draw's score is the
run's own: the metric of the rows repeated that often, per target, the mean over the targets defined in the draw
(regression.py), averaged over the model's seeds. With all weights 1 it is the cell's number, and with one seed
the run's own interval comes from the same draws (DRAW_SEED).
"""

import numpy as np

from evalsuite.metrics.regression import REGRESSION_METRICS, _mean_over_defined, _Split


def has_regression_form(metric: str) -> bool:
    """Whether `metric` is scored from stored predicted targets (the means over targets, not the counts)."""
    return metric in REGRESSION_METRICS


class RegressionScorer:
    """One model's `metric` for item weights, averaged over its seeds' predictions [items, targets]."""

    def __init__(self, targets, predictions: list, metric: str):
        if not has_regression_form(metric):
            raise ValueError(f"no per-item form of regression metric '{metric}'")
        targets = np.asarray(targets, dtype=np.float64)
        targets = targets.reshape(len(targets), -1)
        # Sorted once per seed: every block of draws reuses the tie groups Spearman needs.
        self.splits = [_Split(targets, np.asarray(p, dtype=np.float64).reshape(targets.shape)) for p in predictions]
        self.metric = metric

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """float64 [draws]: the score for each row of item weights [draws, items], the mean over seeds."""
        per_seed = [_mean_over_defined(split.per_target(weights.T)[self.metric], axis=0) for split in self.splits]
        return np.mean(per_seed, axis=0)

    def score(self, weights: np.ndarray) -> float:
        return float(self.scores(np.asarray(weights, dtype=np.float64).reshape(1, -1))[0])
