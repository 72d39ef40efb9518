"""Ridge regression probes for regression cards (a float target vector per tile), from streamed statistics.

Both read the float16 cache a batch at a time (probes/batches.py) and keep only float64 sums of size
[D, D] and [D, T]: the train split is never held as float32.

- `RidgeProbe` (recipe `ridge`): features standardised on train, a ridge per alpha of a grid, the alpha with
  the best val score on the card's selection metric kept. The penalty is per sample: each fit minimises
  mean squared error + alpha ||w||^2 on standardised features, so an alpha means the same on 300 tiles as on
  300,000. One eigendecomposition of the train covariance gives every alpha's solution.
- `HestRidgeProbe` (recipe `ridge_hest`): HEST-Benchmark's own regression (mahmoodlab/HEST
  src/hest/bench/benchmark.py and trainer.py): StandardScaler and PCA to 256 components fit on train, then
  scikit-learn's Ridge(solver="lsqr", alpha=100 / (components x targets), fit_intercept=False, max_iter=1000)
  on the PCA scores as float32, as HEST passes them. The PCA is exact (eigendecomposition of the train
  covariance, components signed as scikit-learn's svd_flip signs them); docs/probes.md says where that
  differs from scikit-learn's default solver.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.regression import REGRESSION_METRICS, check_regression_targets
from evalsuite.probes.base import POSITIVE, FittedProbe
from evalsuite.probes.batches import all_indices, iter_float32_batches

DEFAULT_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


class _TrainStatistics:
    """Streamed sums of one split (float64): rows, and of the features minus the first batch's mean (a shift that
    keeps X^T X from cancelling digits when a feature's mean is large against its spread), their sums, X^T X,
    X^T Y; and the target sums."""

    def __init__(self, features, targets: np.ndarray, batch_size: int, device):
        dim, outputs = features.shape[1], targets.shape[1]
        self.rows, self.sum_x, self.sum_y = len(features), np.zeros(dim), targets.sum(axis=0)
        self.xx, self.xy, self.shift = np.zeros((dim, dim)), np.zeros((dim, outputs)), None
        for indices, batch in iter_float32_batches(features, all_indices(features), batch_size, device):
            rows = batch.double().cpu().numpy()
            self.shift = rows.mean(axis=0) if self.shift is None else self.shift
            rows -= self.shift
            self.sum_x += rows.sum(axis=0)
            self.xx += rows.T @ rows
            self.xy += rows.T @ targets[indices]

    def standardised(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(mean, scale, covariance of the standardised features, their cross-covariance with the targets): as
        scikit-learn's StandardScaler, population variance and a scale of 1 where a feature is constant."""
        mean, mean_y = self.sum_x / self.rows, self.sum_y / self.rows  # mean of the shifted features
        covariance = self.xx / self.rows - np.outer(mean, mean)
        variance = np.clip(np.diag(covariance), 0.0, None)
        scale = np.where(variance > 0, np.sqrt(variance), 1.0)
        cross = (self.xy / self.rows - np.outer(mean, mean_y)) / scale[:, None]
        return mean + self.shift, scale, covariance / np.outer(scale, scale), cross


def _standardised_batches(features, mean: np.ndarray, scale: np.ndarray, batch_size: int, device):
    for indices, batch in iter_float32_batches(features, all_indices(features), batch_size, device):
        yield indices, (batch.double().cpu().numpy() - mean) / scale


def _check_inputs(features, targets, what: str, training: bool) -> np.ndarray:
    if getattr(features, "ndim", None) != 2:
        raise EvalsuiteError(f"{what}: features must be 2-D [samples, dim], got shape "
                             f"{getattr(features, 'shape', None)}")
    targets = check_regression_targets(targets, what, training=training)
    if len(features) != len(targets):
        raise EvalsuiteError(f"{what}: {len(features)} feature rows but {len(targets)} target rows")
    return targets


class RidgeProbe(FittedProbe):
    targets = ("vector",)
    PARAM_RULES = {"alpha": POSITIVE}

    def __init__(self, num_classes: int = 0, alpha: float | list[float] = DEFAULT_ALPHAS, batch_size: int = 4096,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.alphas = [float(a) for a in (alpha if isinstance(alpha, (list, tuple)) else [alpha])]
        if not self.alphas or min(self.alphas) <= 0:
            raise EvalsuiteError(f"ridge probe: alpha must be positive numbers, got {alpha!r}")
        self.batch_size, self.device, self.seed = int(batch_size), torch.device(device), seed

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "pearson"):
        targets = _check_inputs(features, labels, "ridge probe train split", training=True)
        val_targets = _check_inputs(val_features, val_labels, "ridge probe val split", training=False)
        statistics = _TrainStatistics(features, targets, self.batch_size, self.device)
        self.mean_, self.scale_, covariance, cross = statistics.standardised()
        self.intercept_ = statistics.sum_y / statistics.rows
        eigenvalues, eigenvectors = np.linalg.eigh(covariance)
        projected = eigenvectors.T @ cross  # each alpha's weights are eigenvectors @ (projected / (lambda + alpha))
        weights = [eigenvectors @ (projected / (np.clip(eigenvalues, 0, None) + a)[:, None]) for a in self.alphas]
        scores = [REGRESSION_METRICS[selection_metric](val_targets, self._predict(val_features, w)) for w in weights]
        best = int(np.nanargmax(scores)) if not np.all(np.isnan(scores)) else 0
        self.coef_ = weights[best]
        self.selected_params_ = {"alpha": self.alphas[best], "val_" + selection_metric: float(scores[best])}
        return self

    def predict(self, features) -> np.ndarray:
        return self._predict(features, self.coef_)

    def _predict(self, features, weights: np.ndarray) -> np.ndarray:
        out = np.empty((len(features), weights.shape[1]))
        for indices, rows in _standardised_batches(features, self.mean_, self.scale_, self.batch_size, self.device):
            out[indices] = rows @ weights + self.intercept_
        return out


class HestRidgeProbe(FittedProbe):
    targets = ("vector",)
    chooses_on_val = False  # HEST's alpha rule needs no val split
    PARAM_RULES = {"alpha_numerator": POSITIVE}

    def __init__(self, num_classes: int = 0, components: int = 256, alpha_numerator: float = 100.0,
                 max_iter: int = 1000, batch_size: int = 4096, device: torch.device = torch.device("cpu"),
                 seed: int = 0):
        self.components, self.alpha_numerator, self.max_iter = int(components), float(alpha_numerator), int(max_iter)
        self.batch_size, self.device, self.seed = int(batch_size), torch.device(device), seed

    def fit(self, features, labels, val_features=None, val_labels=None, selection_metric: str = "pearson"):
        from sklearn.linear_model import Ridge

        targets = _check_inputs(features, labels, "ridge_hest probe train split", training=True)
        statistics = _TrainStatistics(features, targets, self.batch_size, self.device)
        self.mean_, self.scale_, covariance, _ = statistics.standardised()
        self.components_ = _principal_axes(covariance, min(self.components, *features.shape))
        scores = self._scores(features)
        alpha = self.alpha_numerator / (scores.shape[1] * targets.shape[1])  # HEST trainer.py's rule
        self.ridge_ = Ridge(solver="lsqr", alpha=alpha, fit_intercept=False, max_iter=self.max_iter,
                            random_state=self.seed).fit(scores, targets.astype(np.float32))
        self.selected_params_ = {"alpha": alpha, "components": int(scores.shape[1])}
        return self

    def predict(self, features) -> np.ndarray:
        return self.ridge_.predict(self._scores(features)).astype(np.float64)

    def _scores(self, features) -> np.ndarray:
        """PCA scores [N, components] as float32, as HEST hands them to its ridge."""
        out = np.empty((len(features), self.components_.shape[1]), dtype=np.float32)
        for indices, rows in _standardised_batches(features, self.mean_, self.scale_, self.batch_size, self.device):
            out[indices] = rows @ self.components_
        return out


def _principal_axes(covariance: np.ndarray, count: int) -> np.ndarray:
    """[D, count]: the leading eigenvectors of the covariance, each signed so that its largest absolute entry is
    positive (scikit-learn's svd_flip on components, so the PCA scores equal scikit-learn's)."""
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    axes = eigenvectors[:, np.argsort(eigenvalues)[::-1][:count]]
    signs = np.sign(axes[np.argmax(np.abs(axes), axis=0), np.arange(count)])
    return axes * np.where(signs == 0, 1.0, signs)
