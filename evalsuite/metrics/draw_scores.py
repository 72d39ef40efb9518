"""Many models' scores on the same bootstrap draws, a block of draws at a time.

Rank intervals and paired tests both need, for every model of a task, its score in each of the same 1000
draws. Scoring one draw at a time through `weighted_metrics` costs a Python call per model, seed and draw
and recomputes every metric to keep one; here the draws come as a matrix [draws, items] (a block at a time,
so memory stays bounded whatever the split's size) and a scorer with a `scores(weights)` method turns it
into one score per draw with a few array operations: the weighted confusion matrices of every draw and seed
are one sparse product of the draws with the items' (seed, true class, predicted class) indicator matrix,
AUROC's weighted positives and negatives per tied score the same with the score groups' indicator. A scorer
with only `score(weights)` is called once per draw. The draws are those of `bootstrap.draw_weights` (same seed,
same order), so the results equal scoring draw by draw.
"""

import numpy as np

from evalsuite.metrics.bootstrap import draw_weights

BLOCK_BYTES = 32 * 1024**2  # one block of draws as float64 [draws, items] takes at most this


def draw_blocks(groups, items: int, draws: int, seed: int, block_bytes: int | None = None):
    """`draw_weights`' draws stacked into float64 blocks [<= block, items] of at most `block_bytes` (BLOCK_BYTES)."""
    block = max(1, min(draws, (block_bytes or BLOCK_BYTES) // max(1, 8 * items)))
    buffer = []
    for weights in draw_weights(groups, items, draws, seed):
        buffer.append(weights)
        if len(buffer) == block:
            yield _stacked(buffer)
            buffer = []
    if buffer:
        yield _stacked(buffer)


def _stacked(rows: list) -> np.ndarray:
    # Items along the contiguous axis of memory: the sparse products multiply by weights.T, then with no copy.
    return np.stack(rows, axis=1).T


def block_scores(scorer, weights: np.ndarray) -> np.ndarray:
    """One score per row of `weights` [draws, items]."""
    if hasattr(scorer, "scores"):
        return np.asarray(scorer.scores(weights), dtype=np.float64)
    return np.array([scorer.score(w) for w in weights], dtype=np.float64)


def per_draw_scores(scorers: dict, groups, items: int, draws: int, seed: int) -> dict:
    """{name: float64 [draws]}: every scorer's score in each draw of the same cluster bootstrap."""
    found = {name: [] for name in scorers}
    for weights in draw_blocks(groups, items, draws, seed):
        for name, scorer in scorers.items():
            found[name].append(block_scores(scorer, weights))
    return {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in found.items()}


class CategorySums:
    """Per draw, the summed weight (times a value per item, when given) of each category of the items, in each of
    several labellings of the same items (a model's seeds): one sparse product with the indicator matrix
    [labellings x categories, items], which holds one entry per item and labelling."""

    def __init__(self, labellings: list, categories: int, values: np.ndarray | None = None):
        from scipy.sparse import csr_matrix  # only where draws are scored: `leaderboard` without them starts faster

        items, self.categories = len(labellings[0]), categories
        rows = np.concatenate([number * categories + np.asarray(category, dtype=np.int64).reshape(-1)
                               for number, category in enumerate(labellings)])
        data = np.ones(len(rows)) if values is None else np.tile(np.asarray(values, dtype=np.float64), len(labellings))
        self.indicator = csr_matrix((data, (rows, np.tile(np.arange(items), len(labellings)))),
                                    shape=(len(labellings) * categories, items))

    def sums(self, weights: np.ndarray) -> np.ndarray:
        """float64 [draws, labellings, categories] of item weights [draws, items]."""
        found = np.asarray(self.indicator @ weights.T).T
        return found.reshape(len(weights), -1, self.categories)


def confusion_scores(confusion: np.ndarray) -> dict:
    """balanced_accuracy, f1_macro and accuracy of confusion matrices [draws, C, C], as bootstrap.py defines them
    for one matrix (balanced accuracy over classes present in the truth, F1 over classes in truth or prediction)."""
    support, predicted = confusion.sum(axis=2), confusion.sum(axis=1)
    true_positive = np.diagonal(confusion, axis1=1, axis2=2)
    present, counted = support > 0, support + predicted > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(present, true_positive / np.where(present, support, 1), 0.0)
        f1 = np.where(counted, 2 * true_positive / np.where(counted, support + predicted, 1), 0.0)
        return {"balanced_accuracy": recall.sum(axis=1) / present.sum(axis=1),
                "f1_macro": f1.sum(axis=1) / counted.sum(axis=1),
                "accuracy": np.trace(confusion, axis1=1, axis2=2) / confusion.sum(axis=(1, 2))}


class AurocScores:
    """Per draw, one class's one-vs-rest AUROC: weighted positives and negatives per tied-score group."""

    def __init__(self, y_true: np.ndarray, scores: np.ndarray, label: int):
        _, group = np.unique(scores, return_inverse=True)
        positive = (np.asarray(y_true) == label).astype(np.float64)
        groups = int(group.max()) + 1 if len(group) else 0
        self.positive = CategorySums([group.reshape(-1)], groups, positive)
        self.negative = CategorySums([group.reshape(-1)], groups, 1.0 - positive)

    def scores(self, weights: np.ndarray) -> np.ndarray:
        positive, negative = self.positive.sums(weights)[:, 0], self.negative.sums(weights)[:, 0]
        total_positive, total_negative = positive.sum(axis=1), negative.sum(axis=1)
        below = np.cumsum(negative, axis=1) - negative
        with np.errstate(invalid="ignore", divide="ignore"):
            auroc = (positive * (below + 0.5 * negative)).sum(axis=1) / (total_positive * total_negative)
        return np.where((total_positive > 0) & (total_negative > 0), auroc, np.nan)


def macro_mean(per_class: np.ndarray) -> np.ndarray:
    """Mean over classes (axis 1) of the defined values; nan where none is defined."""
    defined = ~np.isnan(per_class)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(defined, per_class, 0.0).sum(axis=1) / defined.sum(axis=1)
