"""Classification metrics computed from class probabilities, with numpy, equal to scikit-learn's.

Balanced accuracy (mean per-class recall) is the headline for imbalanced tile tasks, as in
eva and Patho-Bench; macro F1 (THUNDER, nanopath), accuracy and macro one-vs-rest AUROC
are reported beside it. The calibration errors of the same probabilities (ece, mce, brier, nll;
calibration.py, lower is better) are reported too, but are not in METRICS: the probes select
hyperparameters by maximising a METRICS entry. A card with `ordinal: true` (classes listed in
their order, e.g. PANDA's ISUP grades) also gets the quadratic weighted kappa (ordinal.py), with
the same bootstrap interval; it is reported, not used for selection.
The functions are the bootstrap's (bootstrap.py: a confusion matrix, and rank sums with ties at their mean
rank) at unit weights, equal to scikit-learn's balanced_accuracy_score, f1_score(average="macro",
zero_division=0), accuracy_score and roc_auc_score (tests/metrics/test_classification_metrics.py). They
were scikit-learn's calls: importing it took 1.0 s of every run and of `leaderboard`, and its input checks
about 1 ms per call, which the probes' val selection and few-shot's 100 support sets per shot paid many times.
"""

import numpy as np

from evalsuite.metrics.bootstrap import _ClassRanks, _confusion_metrics, cluster_index
from evalsuite.metrics.calibration import calibration_metrics
from evalsuite.metrics.intervals import bootstrap_draw_scores
from evalsuite.metrics.ordinal import ORDINAL_METRIC, quadratic_kappa
from evalsuite.metrics.shown_intervals import with_draws


def _confusion(y_true, proba) -> np.ndarray:
    y_true = np.asarray(y_true, dtype=np.int64)
    classes = max(proba.shape[1], int(y_true.max()) + 1 if len(y_true) else 0)
    pairs = y_true * classes + np.asarray(proba).argmax(axis=1)
    return np.bincount(pairs, minlength=classes * classes).reshape(classes, classes).astype(np.float64)


def _balanced_accuracy(y_true, proba):
    """Mean recall over the classes in y_true (scikit-learn's balanced_accuracy_score)."""
    return _confusion_metrics(_confusion(y_true, proba))["balanced_accuracy"]


def _f1_macro(y_true, proba):
    # scikit-learn's default labels: the classes in truth or prediction. A class absent from both
    # has no defined F1 and is left out, rather than counted as 0 (which would score a split
    # lacking a class below a perfect prediction).
    return _confusion_metrics(_confusion(y_true, proba))["f1_macro"]


def _accuracy(y_true, proba):
    return _confusion_metrics(_confusion(y_true, proba))["accuracy"]


def _auroc_macro_ovr(y_true, proba):
    """Mean one-vs-rest AUROC over the classes that have positives and negatives in y_true.

    A split may lack a class entirely (small tasks); such a class has no defined AUROC and is
    left out of the mean instead of failing the run.
    """
    y_true, proba = np.asarray(y_true), np.asarray(proba, dtype=np.float64)
    ones = np.ones(len(y_true))
    per_class = [_ClassRanks(y_true, proba[:, c], c).auroc(ones) for c in range(proba.shape[1])]
    per_class = [value for value in per_class if not np.isnan(value)]
    return float(np.mean(per_class)) if per_class else float("nan")


METRICS = {
    "balanced_accuracy": _balanced_accuracy,
    "f1_macro": _f1_macro,
    "accuracy": _accuracy,
    "auroc_macro_ovr": _auroc_macro_ovr,
}


def compute_metrics(y_true: np.ndarray, proba: np.ndarray, ordinal: bool = False) -> dict:
    """All registered metrics (METRICS, with `ordinal` the quadratic weighted kappa, then the calibration errors)
    for integer labels and an (N, C) probability matrix."""
    y_true = np.asarray(y_true)
    metrics = {name: float(fn(y_true, proba)) for name, fn in METRICS.items()}
    if ordinal:
        metrics[ORDINAL_METRIC] = quadratic_kappa(y_true, proba)
    metrics.update(calibration_metrics(y_true, proba))
    return metrics


def classification_split_metrics(card, probe, features, labels, with_intervals: bool = False, groups=None,
                                 seed: int = 0, unit: str = "cluster") -> dict:
    """The scorer of kind `classification`: {metric: value} of a fitted probe on one split; with intervals also
    {metric + "_ci": (low, high)} and {metric + "_draws": per-draw scores} from the bootstrap (drawn with `seed`;
    the runner passes the task's bootstrap.task_draw_seed for every probe seed) over the clusters `groups` (one id
    per item, `unit` what they are; None: items), shown as shown_intervals.py says. An ordinal `card` adds the
    quadratic weighted kappa."""
    proba = probe.predict_proba(features)
    ordinal = bool(getattr(card, "ordinal", False))
    metrics = compute_metrics(labels, proba, ordinal)
    if with_intervals:
        drawn = bootstrap_draw_scores(np.asarray(labels), proba, seed=seed, groups=groups, ordinal=ordinal)
        metrics.update(with_draws(drawn, metrics, cluster_index(groups, len(labels))[1], unit))
    return metrics
