"""Logistic-regression probe on slide embeddings, Patho-Bench's linear probe (patho_bench/experiments/
LinearProbeExperiment.py at 660e770): scikit-learn's LogisticRegression (lbfgs, multinomial for three or more classes,
L2 penalty of strength 1/C, max_iter 10000 as patho_bench/ExperimentFactory.py sets it, random_state 0) with balanced
class weights, one model per C of the recipe's grid, the one with the best val score (the card's selection metric)
kept. Patho-Bench's published config runs C = 0.5 alone (advanced_usage/configs/linprobe/linprobe.yaml; 0.001, 0.01,
0.1, 1.0, 10 and "adaptive" are commented out there) and chooses among several by sweeping (its "adaptive" rule, C = width x classes / 100, is
not offered here).

scikit-learn needs the split whole: the float16 rows are upcast to one float32 [items, D] array per fit. Items are
slides or patients (thousands at most: 10,000 x 1,536 x 4 bytes = 61 MB), never a tile cache.
"""

import numpy as np
import torch

from evalsuite.metrics.classification import METRICS
from evalsuite.probes._validate import check_features_labels
from evalsuite.probes.base import POSITIVE, FittedProbe
from evalsuite.probes.pooled.linear import _as_list


class LogisticRegressionProbe(FittedProbe):
    targets = ("class",)
    PARAM_RULES = {"C": POSITIVE}

    def __init__(self, num_classes: int, C: float | list[float] = (0.5,), max_iter: int = 10000,
                 class_weight: str | None = "balanced", device: torch.device | str = "cpu", seed: int = 0):
        self.num_classes = num_classes
        self.c_grid = _as_list(C)
        self.max_iter = int(max_iter)
        self.class_weight = class_weight
        self.seed = seed  # lbfgs is deterministic; random_state is Patho-Bench's 0 whatever the seed

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "balanced_accuracy"):
        labels = check_features_labels(features, labels, self.num_classes, "logreg probe train split")
        val_labels = check_features_labels(val_features, val_labels, self.num_classes, "logreg probe val split")
        train, val = _float32(features), _float32(val_features)
        fitted = [self._model(c).fit(train, labels) for c in self.c_grid]
        scores = [METRICS[selection_metric](val_labels, self._proba(model, val)) for model in fitted]
        best = int(np.argmax(scores))
        self.model_ = fitted[best]
        self.selected_params_ = {"C": self.c_grid[best], "val_" + selection_metric: float(scores[best])}
        return self

    def predict_proba(self, features) -> np.ndarray:
        return self._proba(self.model_, _float32(features))

    def _model(self, c: float):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=float(c), max_iter=self.max_iter, random_state=0, class_weight=self.class_weight)

    def _proba(self, model, features: np.ndarray) -> np.ndarray:
        """float32 [items, num_classes]; a class absent from train gets probability 0."""
        out = np.zeros((len(features), self.num_classes), dtype=np.float32)
        out[:, model.classes_] = model.predict_proba(features)
        return out


def _float32(features) -> np.ndarray:
    return np.asarray(features, dtype=np.float32)
