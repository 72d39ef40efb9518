"""Classification metrics, from scikit-learn, computed from class probabilities.

Balanced accuracy (mean per-class recall) is the headline for imbalanced tile tasks, as in
eva and Patho-Bench; macro F1 (THUNDER, nanopath), accuracy and macro one-vs-rest AUROC
are reported beside it. The calibration errors of the same probabilities (ece, mce, brier, nll;
calibration.py, lower is better) are reported too, but are not in METRICS: the probes select
hyperparameters by maximising a METRICS entry. A card with `ordinal: true` (classes listed in
their order, e.g. PANDA's ISUP grades) also gets the quadratic weighted kappa (ordinal.py), with
the same bootstrap interval; it is reported, not used for selection.
scikit-learn is imported by the metric functions, not here: `leaderboard` and `report` read metrics and rank
from weighted confusion matrices, and importing scikit-learn took 1.0 of its 1.2 s (benchmarks/startup.py).
"""

import numpy as np

from evalsuite.metrics.bootstrap import bootstrap_intervals
from evalsuite.metrics.calibration import calibration_metrics
from evalsuite.metrics.ordinal import ORDINAL_METRIC, quadratic_kappa


def _balanced_accuracy(y_true, proba):
    from sklearn.metrics import balanced_accuracy_score

    return balanced_accuracy_score(y_true, proba.argmax(axis=1))


def _f1_macro(y_true, proba):
    # scikit-learn's default labels: the classes in truth or prediction. A class absent from both
    # has no defined F1 and is left out, rather than counted as 0 (which would score a split
    # lacking a class below a perfect prediction).
    from sklearn.metrics import f1_score

    return f1_score(y_true, proba.argmax(axis=1), average="macro", zero_division=0)


def _accuracy(y_true, proba):
    from sklearn.metrics import accuracy_score

    return accuracy_score(y_true, proba.argmax(axis=1))


def _auroc_macro_ovr(y_true, proba):
    """Mean one-vs-rest AUROC over the classes that have positives and negatives in y_true.

    A split may lack a class entirely (small tasks); such a class has no defined AUROC and is
    left out of the mean instead of failing the run.
    """
    from sklearn.metrics import roc_auc_score

    per_class = []
    for c in range(proba.shape[1]):
        positives = y_true == c
        if positives.any() and not positives.all():
            per_class.append(roc_auc_score(positives, proba[:, c]))
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
                                 seed: int = 0) -> dict:
    """The scorer of kind `classification`: {metric: value} of a fitted probe on one split; with intervals also
    {metric + "_ci": (low, high)} from the bootstrap (drawn with `seed`) over the clusters `groups` (one id per
    item; None: items). An ordinal `card` adds the quadratic weighted kappa."""
    proba = probe.predict_proba(features)
    ordinal = bool(getattr(card, "ordinal", False))
    metrics = compute_metrics(labels, proba, ordinal)
    if with_intervals:
        metrics.update({f"{name}_ci": interval for name, interval in
                        bootstrap_intervals(np.asarray(labels), proba, seed=seed, groups=groups,
                                            ordinal=ordinal).items()})
    return metrics
