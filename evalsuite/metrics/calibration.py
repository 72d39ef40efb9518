"""Calibration of a probe's test probabilities: ECE, MCE, Brier score and NLL (lower is better for all four).

Every function takes integer labels y_true [N], class probabilities proba [N, C] and optional item
weights [N] (how often the bootstrap drew each item; a weighted value equals the unweighted one on the
items repeated that often). docs/calibration.md has the formulas.

- ece: top-label expected calibration error (Guo et al. 2017), 15 equal-width confidence bins on (0, 1].
  An item's confidence is its largest probability, it is correct when that class (argmax, first on ties)
  is the true one; ece = sum over bins of (bin share of items) * |accuracy in bin - mean confidence in bin|.
- mce: max over non-empty bins of |accuracy - mean confidence| (Naeini et al. 2015).
- brier: multi-class Brier score (Brier 1950), mean over items of sum_c (p_c - onehot_c)^2, in [0, 2];
  for two classes it is twice scikit-learn's binary `brier_score_loss` (which scores the positive class
  only) and equals it with `scale_by_half=False`.
- nll: mean over items of -ln max(p_true, PROBABILITY_FLOOR); the floor keeps a zero probability on the
  true class finite (-ln 2.2e-16 = 36.04), as scikit-learn's `log_loss` clips at the float64 machine eps.

Definitions and bin edges follow THUNDER, MICS-Lab/thunder src/thunder/utils/calibration_metrics.py at
commit 6fe47e0975411bb692263217a816b62a0c809a39 (`expected_calibration_error`,
`maximum_calibration_error`): bin edges np.linspace(0, 1, M + 1), an item is in bin (lower, upper]
(`confidences > bin_lower` and `<= bin_upper`), empty bins skipped. THUNDER calls them with its default
M=5; we use 15 bins (Guo et al., torchmetrics' default); `ece(..., n_bins=5)` reproduces THUNDER's number.
torchmetrics' MulticlassCalibrationError bins [lower, upper) (torch.bucketize(right=True)) and puts a
confidence of exactly 1.0 in a bin of its own, so the two agree unless a confidence lies on an edge.
THUNDER reports no Brier score or NLL.
"""

import numpy as np

N_BINS = 15
PROBABILITY_FLOOR = float(np.finfo(np.float64).eps)  # 2.22e-16, scikit-learn's log_loss clip for float64


def bin_edges(n_bins: int = N_BINS) -> np.ndarray:
    return np.linspace(0.0, 1.0, n_bins + 1)


def confidence_bin(confidence: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Bin number of each confidence: bin b holds edges[b] < confidence <= edges[b + 1] (THUNDER's convention).

    searchsorted(side="left") returns i with edges[i-1] < x <= edges[i], so bin = i - 1. A confidence of 0
    (an all-zero row) joins the first bin and a rounding excess above 1 the last, instead of falling outside."""
    return np.clip(np.searchsorted(bin_edges(n_bins), confidence, side="left") - 1, 0, n_bins - 1)


class CalibrationItems:
    """Each test item's bin, correctness, confidence, Brier term and NLL term, computed once.

    `metrics(weights)` is then a few weighted bincounts and dot products, so the bootstrap's 1000 draws
    do not redo the argmax, the binning or the logarithms."""

    def __init__(self, y_true, proba, n_bins: int = N_BINS):
        y_true = np.asarray(y_true, dtype=np.int64).reshape(-1)
        proba = np.asarray(proba, dtype=np.float64)
        if proba.ndim != 2 or len(proba) != len(y_true):
            raise ValueError(f"proba of shape {proba.shape} for {len(y_true)} labels; expected ({len(y_true)}, C)")
        if len(y_true) and not 0 <= y_true.min() <= y_true.max() < proba.shape[1]:
            raise ValueError(f"labels {y_true.min()}..{y_true.max()} outside the {proba.shape[1]} probability columns")
        self.n_bins, self.items = n_bins, len(y_true)
        rows = np.arange(self.items)
        predicted = proba.argmax(axis=1) if self.items else np.zeros(0, dtype=np.int64)
        self.confidence = proba[rows, predicted]
        self.correct = (predicted == y_true).astype(np.float64)
        self.bin = confidence_bin(self.confidence, n_bins)
        p_true = proba[rows, y_true]
        # sum_c (p_c - onehot_c)^2 = sum_c p_c^2 - 2 p_true + 1
        self.brier = np.einsum("ij,ij->i", proba, proba) - 2.0 * p_true + 1.0
        self.nll = -np.log(np.clip(p_true, PROBABILITY_FLOOR, 1.0))

    def bins(self, weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weight, accuracy, mean confidence) per bin; accuracy and confidence are nan in an empty bin."""
        w = np.ones(self.items) if weights is None else np.asarray(weights, dtype=np.float64)
        count = np.bincount(self.bin, weights=w, minlength=self.n_bins)
        correct = np.bincount(self.bin, weights=w * self.correct, minlength=self.n_bins)
        confidence = np.bincount(self.bin, weights=w * self.confidence, minlength=self.n_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            return count, correct / count, confidence / count

    def metrics(self, weights=None) -> dict:
        """{ece, mce, brier, nll} for item weights (None: each item once); nan when the total weight is 0."""
        w = np.ones(self.items) if weights is None else np.asarray(weights, dtype=np.float64)
        total = float(w.sum())
        if total <= 0:
            return dict.fromkeys(("ece", "mce", "brier", "nll"), float("nan"))
        count, accuracy, confidence = self.bins(w)
        filled = count > 0
        gap = np.abs(accuracy[filled] - confidence[filled])
        return {
            "ece": float((count[filled] / total * gap).sum()),
            "mce": float(gap.max()),
            "brier": float(w @ self.brier / total),
            "nll": float(w @ self.nll / total),
        }


def ece(y_true, proba, weights=None, n_bins: int = N_BINS) -> float:
    return CalibrationItems(y_true, proba, n_bins).metrics(weights)["ece"]


def mce(y_true, proba, weights=None, n_bins: int = N_BINS) -> float:
    return CalibrationItems(y_true, proba, n_bins).metrics(weights)["mce"]


def brier(y_true, proba, weights=None) -> float:
    return CalibrationItems(y_true, proba).metrics(weights)["brier"]


def nll(y_true, proba, weights=None) -> float:
    return CalibrationItems(y_true, proba).metrics(weights)["nll"]


def calibration_metrics(y_true, proba, weights=None) -> dict:
    """All four at once (one pass over the items)."""
    return CalibrationItems(y_true, proba).metrics(weights)


CALIBRATION_METRICS = {"ece": ece, "mce": mce, "brier": brier, "nll": nll}
