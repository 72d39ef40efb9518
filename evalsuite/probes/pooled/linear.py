"""Linear probe: multinomial logistic regression over a grid of learning rate x weight decay.

All heads of the grid are trained together in one pass over the data (each batch is read and
upcast once, then fed to every head, stacked into one matmul: probes/pooled/linear_heads.py), as
THUNDER trains its grid in one pass; the head with the best validation score on the card's
selection metric is kept. Optimiser: Adam with weight decay as an L2 penalty on the weights
(linear_heads.py says why not AdamW's decoupled decay).
"""

import itertools
from typing import Literal

import numpy as np
import torch

from evalsuite.metrics.classification import METRICS
from evalsuite.probes._validate import check_features_labels
from evalsuite.probes.base import NON_NEGATIVE, POSITIVE, FittedProbe
from evalsuite.probes.batches import BatchSource, iter_float32_batches
from evalsuite.probes.pooled.linear_heads import LinearHeads
from evalsuite.runtime.cpus import threads_for_steps
from evalsuite.runtime.progress import Progress


class LinearProbe(FittedProbe):
    targets = ("class",)  # vectors with class ids (a slide encoder's survival vectors go to the cox probe)
    PARAM_RULES = {"lr": POSITIVE, "weight_decay": NON_NEGATIVE}

    def __init__(self, num_classes: int, lr: float | list[float] = (1e-3,), weight_decay: float | list[float] = (0.0,),
                 epochs: int = 100, batch_size: int = 64, eval_batch_size: int = 1024,
                 stream_read_rows: int | None = None, class_weight: Literal["balanced"] | None = "balanced",
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.num_classes = num_classes
        self.grid = list(itertools.product(_as_list(lr), _as_list(weight_decay)))
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.eval_batch_size = int(eval_batch_size)
        self.stream_read_rows = stream_read_rows  # None: sized by bytes (batches.STREAM_BLOCK_BYTES)
        self.class_weight = class_weight
        self.device = torch.device(device)
        self.seed = seed

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "balanced_accuracy"):
        labels = check_features_labels(features, labels, self.num_classes, "linear probe train split")
        val_labels = check_features_labels(val_features, val_labels, self.num_classes, "linear probe val split")
        val = (val_features, val_labels, selection_metric)
        heads = self._train_heads(features, labels, val)
        scores = self._val_scores(heads, *val)
        best = int(np.argmax(scores))
        self.head_ = heads.head(best)
        lr, wd = self.grid[best]
        self.selected_params_ = {"lr": lr, "weight_decay": wd, "val_" + selection_metric: float(scores[best])}
        return self

    def predict_proba(self, features) -> np.ndarray:
        return self._proba(lambda batch: self.head_(batch)[:, None], features, 1)[:, 0]

    def _train_heads(self, features, labels, val: tuple | None = None) -> LinearHeads:
        """The grid's heads trained on (features, labels); `val` = (features, labels, metric) for progress lines."""
        generator = torch.Generator().manual_seed(self.seed)
        heads = LinearHeads(features.shape[1], self.num_classes, self.grid, self.device, generator,
                            class_weights=self._class_weights(labels))
        source = BatchSource(features, labels, self.device, read_rows=self.stream_read_rows)
        batch_size = min(self.batch_size, len(labels))  # drop_last must not drop a whole small split

        def status() -> str:  # a val pass, run only when a progress line is due (at most one per tenth of the epochs)
            if val is None:
                return ""
            return f"best of {heads.num_heads} heads: val {val[2]} {max(self._val_scores(heads, *val)):.4f}"

        progress = Progress("linear", self.epochs)
        with threads_for_steps(4.0 * batch_size * features.shape[1] * heads.num_heads * self.num_classes):
            for epoch in range(self.epochs):
                for batch, target in source.epoch(epoch, batch_size, seed=self.seed):
                    heads.step(batch, target)
                progress.update(epoch + 1, status)
        progress.close()
        return heads

    def _val_scores(self, heads: LinearHeads, val_features, val_labels, selection_metric: str) -> list[float]:
        val_proba = self._proba(heads.logits, val_features, heads.num_heads)
        return [METRICS[selection_metric](val_labels, val_proba[:, h]) for h in range(heads.num_heads)]

    def _class_weights(self, labels: np.ndarray) -> torch.Tensor | None:
        if self.class_weight != "balanced":
            return None
        return balanced_class_weights(labels, self.num_classes).to(self.device)

    @torch.no_grad()
    def _proba(self, logits_of, features, num_heads: int) -> np.ndarray:
        """Softmax probabilities [N, heads, classes]; `logits_of(batch)` gives [b, heads, classes]."""
        out = np.empty((len(features), num_heads, self.num_classes), dtype=np.float32)
        order = np.arange(len(features))
        for batch_indices, batch in iter_float32_batches(features, order, self.eval_batch_size, self.device):
            out[batch_indices] = torch.softmax(logits_of(batch), dim=-1).cpu().numpy()
        return out


def balanced_class_weights(labels: np.ndarray, num_classes: int) -> torch.Tensor:
    """As scikit-learn's class_weight="balanced": n_samples / (n_classes * count); absent classes weigh 0."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, len(labels) / (num_classes * np.maximum(counts, 1)), 0.0)
    return torch.tensor(weights, dtype=torch.float32)


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]
