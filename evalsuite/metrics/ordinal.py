"""Quadratic weighted Cohen's kappa, the agreement metric of ordinal cards (PANDA's ISUP grade 0-5).

Kaggle scored the PANDA challenge with it: disagreements cost the squared distance between the
true and the predicted grade, so calling a grade 5 slide grade 4 costs less than calling it 0.
kappa = 1 - sum(w * O) / sum(w * E), with O the confusion counts, E = outer(true totals,
predicted totals) / N the counts expected by chance, w_ij = (i - j)^2 over the card's class
indices. It is a function of the (weighted) confusion matrix only, so the bootstrap
(bootstrap.py) scores each draw from the same weighted confusion counts as balanced accuracy.
The distances are the card's class indices, all of them: equal to scikit-learn's
`cohen_kappa_score(weights="quadratic", labels=range(C))`, and to its default (labels seen in
truth or prediction) whenever every class occurs; with a grade absent from both, scikit-learn's
default would close the gap (grades 0, 2, 5 become 0, 1, 2), ours keeps the grade distances.
Undefined (nan) when chance disagreement is 0, i.e. truth and prediction are one and the same class.
"""

import numpy as np

ORDINAL_METRIC = "quadratic_kappa"


def kappa_from_confusion(confusion: np.ndarray) -> float:
    """Quadratic weighted kappa of a [C, C] confusion matrix (rows truth, columns prediction), counts or weights."""
    confusion = np.asarray(confusion, dtype=np.float64)
    total = confusion.sum()
    if total == 0:
        return float("nan")
    index = np.arange(confusion.shape[0])
    cost = (index[:, None] - index[None, :]) ** 2
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / total
    chance_cost = float((cost * expected).sum())
    if chance_cost == 0:
        return float("nan")
    return 1.0 - float((cost * confusion).sum()) / chance_cost


def quadratic_kappa(y_true, proba: np.ndarray) -> float:
    """Quadratic weighted kappa of the most probable class against integer labels `y_true`."""
    classes = proba.shape[1]
    pairs = np.asarray(y_true, dtype=np.int64) * classes + proba.argmax(axis=1)
    return kappa_from_confusion(np.bincount(pairs, minlength=classes * classes).reshape(classes, classes))
