"""The classification metrics (numpy) equal scikit-learn's, including splits that lack a class and tied scores."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score, roc_auc_score

from evalsuite.metrics.classification import METRICS


def _sklearn(name: str, y, proba) -> float:
    predicted = proba.argmax(axis=1)
    if name == "balanced_accuracy":
        return balanced_accuracy_score(y, predicted)
    if name == "f1_macro":
        return f1_score(y, predicted, average="macro", zero_division=0)
    if name == "accuracy":
        return accuracy_score(y, predicted)
    present = [c for c in range(proba.shape[1]) if 0 < (y == c).sum() < len(y)]
    return float(np.mean([roc_auc_score(y == c, proba[:, c]) for c in present]))


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("case", ["plain", "class_missing_from_truth", "ties", "two_classes"])
def test_metrics_equal_scikit_learn(name, case):
    rng = np.random.default_rng(len(case))
    classes = 2 if case == "two_classes" else 5
    y = rng.integers(0, classes, size=80)
    proba = rng.dirichlet(np.ones(classes), size=80)
    if case == "class_missing_from_truth":
        y[y == 3] = 0  # class 3 is still predicted: balanced accuracy and F1 must treat it as scikit-learn does
    if case == "ties":
        proba = np.round(proba, 1)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = _sklearn(name, y, proba)
    assert METRICS[name](y, proba) == pytest.approx(expected, abs=1e-12)
