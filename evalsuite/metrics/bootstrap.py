"""The bootstrap of test metrics: resample test clusters with replacement (draws), and score one draw.

1000 draws, seeded, percentile interval (2.5 %, 97.5 %), as THUNDER and Patho-Bench report.
A cluster is what the reader knows to be one independent unit (a patient, a slide); a draw
takes as many clusters as there are, with replacement, and every item of each (a cluster
bootstrap). Items of one patient are correlated, so resampling them one by one would give an
interval that is too narrow. A reader that knows no clusters gives none, and each item is
its own cluster (the tile-level bootstrap). With fewer than two clusters there is no spread
to resample: the interval is (nan, nan).
Each draw is a vector of item weights (how often each test item was drawn), so the metrics
come from weighted confusion matrices and weighted rank sums instead of re-running
scikit-learn a thousand times; `weighted_metrics` with all weights 1 equals metrics.py.
A draw that lacks a class still scores (balanced accuracy over present classes, AUROC over
classes with positives and negatives). The calibration errors (calibration.py) are weighted
bincounts over each item's precomputed confidence bin, correctness, Brier and NLL terms.
The intervals are intervals.py's: it scores a block of these draws at once (draw_scores.py); `weighted_metrics`
scores one draw, the reference the blocked scores are tested against.
"""

import hashlib

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.calibration import CalibrationItems
from evalsuite.metrics.ordinal import ORDINAL_METRIC, kappa_from_confusion

BOOTSTRAP_DRAWS = 1000
CONFIDENCE = 0.95
DRAWS_SUFFIX = "_draws"  # a split scorer's per-draw scores of a metric, beside its "_ci" interval
NOTE_SUFFIX = "_interval_note"  # a split scorer's note on a metric's interval (shown_intervals.py), when it has one


def task_draw_seed(task: str) -> int:
    """The seed of one task's bootstrap draws: every seed of every probe and model on the task is scored on the same
    draws (so a mean over seeds has draws of its own, and the report's marks, rank intervals and `--compare` pair
    models draw by draw), while two tasks with the same number of clusters get different, independent resamples (a
    seed shared by every task drew the same clusters for all of them). The first 4 bytes of SHA-256 of the name."""
    return int.from_bytes(hashlib.sha256(f"evalsuite draws {task}".encode()).digest()[:4], "big")


class _ClassRanks:
    """Per class: test items grouped by tied score, in ascending score order (for AUROC)."""

    def __init__(self, y_true: np.ndarray, scores: np.ndarray, label: int):
        # Items of one tied score form one group whose counts are sums, so their order within it does not matter:
        # the default (unstable) sort, and groups read off the sorted scores rather than sorted again by np.unique
        # (few-shot builds these per class for each of its 500 support sets: benchmarks/scale.py).
        order = np.argsort(scores)
        ordered = scores[order]
        self.group = np.concatenate([[0], np.cumsum(ordered[1:] != ordered[:-1])]) if len(order) else \
            np.zeros(0, dtype=np.int64)
        self.order, self.positive = order, (y_true[order] == label)
        self.groups = self.group.max() + 1 if len(order) else 0

    def auroc(self, weights: np.ndarray) -> float:
        w = weights[self.order]
        pos = np.bincount(self.group, weights=w * self.positive, minlength=self.groups)
        neg = np.bincount(self.group, weights=w * ~self.positive, minlength=self.groups)
        total_pos, total_neg = pos.sum(), neg.sum()
        if total_pos == 0 or total_neg == 0:
            return np.nan
        negatives_below = np.cumsum(neg) - neg
        return float((pos * (negatives_below + 0.5 * neg)).sum() / (total_pos * total_neg))


def _confusion_metrics(confusion: np.ndarray) -> dict:
    support = confusion.sum(axis=1)
    predicted = confusion.sum(axis=0)
    true_positive = np.diag(confusion)
    present = support > 0
    recall = np.divide(true_positive, support, out=np.zeros_like(true_positive), where=present)
    f1_denominator = support + predicted
    f1 = np.divide(2 * true_positive, f1_denominator, out=np.zeros_like(true_positive), where=f1_denominator > 0)
    return {
        "balanced_accuracy": float(recall[present].mean()) if present.any() else np.nan,
        "f1_macro": float(f1[f1_denominator > 0].mean()),  # classes in truth or prediction, as metrics.py
        "accuracy": float(true_positive.sum() / confusion.sum()),
    }


def weighted_metrics(y_true, predicted, ranks, weights, classes: int,
                     calibration: CalibrationItems | None = None, ordinal: bool = False) -> dict:
    """Metrics of the items repeated `weights` times; with `calibration` (the items' CalibrationItems) also
    ece, mce, brier and nll; with `ordinal` also the quadratic weighted kappa (ordinal.py)."""
    pairs = np.asarray(y_true) * classes + predicted
    confusion = np.bincount(pairs, weights=weights, minlength=classes * classes).reshape(classes, classes)
    metrics = _confusion_metrics(confusion)
    if ordinal:
        metrics[ORDINAL_METRIC] = kappa_from_confusion(confusion)
    aurocs = [r.auroc(weights) for r in ranks]
    metrics["auroc_macro_ovr"] = float(np.nanmean(aurocs)) if not np.all(np.isnan(aurocs)) else np.nan
    if calibration is not None:
        metrics.update(calibration.metrics(weights))
    return metrics


def draw_weights(groups, items: int, draws: int, seed: int):
    """Per cluster-bootstrap draw, float64 [items]: how often each item is taken (its cluster drawn with replacement;
    with one cluster per item the item bootstrap). Every interval and paired test draws through here, so one seed
    gives the same draws everywhere; one draw at a time keeps memory O(items)."""
    cluster_of_item, clusters = cluster_index(groups, items)
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        drawn = np.bincount(rng.integers(0, clusters, size=clusters), minlength=clusters)
        yield drawn[cluster_of_item].astype(np.float64)


def interval_clusters(reader, split: str, items: int) -> tuple[str, list | None]:
    """(unit name, cluster id of each of the split's `items` or None) that `reader` offers the bootstrap.

    Readers (evalsuite.readers.base.Reader) name the unit in `interval_unit` and give ids through
    `groups(split)`, in the dataset order the feature cache keeps; None resamples tiles."""
    unit, groups = reader.interval_unit, reader.groups(split)
    if groups is not None and len(groups) != items:
        raise EvalsuiteError(f"the cached {split} split has {items} samples but the reader lists {len(groups)}; the "
                             "data under --data-root changed since the features were cached: remove the task's cache "
                             "(`evalsuite cache ls`, then `evalsuite cache rm KEY`) and rerun")
    return unit, groups


def independence_note(unit: str, groups, items: int, fix: str = "") -> str | None:
    """The one-line caveat of intervals and paired tests over `items` test items without clusters (`groups` None):
    they treat items as independent, which items of one slide or patient are not. None when clusters are known."""
    if groups is not None:
        return None
    note = (f"intervals and paired tests treat the {items} test {unit}s as independent items (no patient or slide "
            "ids known); items of one slide are correlated, so they may be too narrow")
    return f"{note}; {fix}" if fix else note


def cluster_index(groups, items: int) -> tuple[np.ndarray, int]:
    """(cluster number of each item, number of clusters); `groups=None`: each item its own cluster."""
    if groups is None:
        return np.arange(items), items
    if len(groups) != items:
        raise ValueError(f"{len(groups)} cluster ids for {items} test items")
    _, of_item = np.unique(np.asarray(groups), return_inverse=True)
    return of_item.reshape(-1), int(of_item.max()) + 1 if items else 0


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple:
    """(low, high): the percentile interval of a score's bootstrap draws (nan draws left out; (nan, nan) if all are).
    Every interval shown beside a number is this, of that number's own draws."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0 or np.isnan(values).all():
        return (np.nan, np.nan)
    tail = (1 - confidence) / 2 * 100
    return (float(np.nanpercentile(values, tail)), float(np.nanpercentile(values, 100 - tail)))
