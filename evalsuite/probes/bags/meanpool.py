"""Mean-pool probe: each slide is the mean of its tile features, then a linear model on the slide vectors.

The slide vector is accumulated in float32 one bag at a time and stored as float16 [slides, D], so
the slide vectors are one more float16 cache and reach the heads through probes/batches.py's one
upcast path, like any pooled tile cache. Classification: the linear probe (probes/pooled/linear.py) on
the slide vectors, with its lr x weight-decay grid. Survival ((time, event) targets): a linear
Cox model, risk = w . x (no intercept: it cancels from the partial likelihood), one head per
(lr, weight decay) of its grid, all trained together with Adam on the summed Cox losses
(full batch by default: the partial likelihood's risk sets are then the whole split's); the head
with the best val c-index is kept. Weight decay is an L2 penalty (gradient + wd * w, as
torch.optim.Adam), so each head minimises the mean Cox loss + wd/2 ||w||^2.
The Cox heads see the vectors standardised on train (each dimension's train mean and standard
deviation, ddof 1, as lifelines' CoxPHFitter does before its penalty): a fixed wd grid on raw
vectors would penalise a backbone with small features more than one with large features, so the
grid would bias the ranking of backbones. Weights are kept in raw units (w / sd) with the train
mean as centre, so a risk is (x - mean) . w, the same number lifelines' log partial hazard gives.
Which items the bags are (slides, or patients for a per-patient kind) is the caller's: every bag
is one row of the Cox model and one risk.
"""

import itertools
from typing import Literal

import numpy as np
import torch

from evalsuite.metrics.survival import SURVIVAL_METRICS
from evalsuite.probes.bags.cox import check_train_val, cox_loss
from evalsuite.probes.base import NON_NEGATIVE, POSITIVE, FittedProbe
from evalsuite.probes.batches import BatchSource, iter_float32_batches
from evalsuite.probes.pooled.linear import LinearProbe, _as_list
from evalsuite.runtime.progress import Progress

MOMENT_CHUNK_ROWS = 4096  # vectors upcast at a time for the train mean and standard deviation


def train_moments(pooled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 (mean [D], sd [D]) of float16 vectors, ddof 1 (lifelines' CoxPHFitter's rule), summed chunk by
    chunk; a constant dimension (or a single vector) gets sd 1: centred, it is 0 and carries no signal."""
    rows = len(pooled)
    mean = np.zeros(pooled.shape[1])
    for start in range(0, rows, MOMENT_CHUNK_ROWS):
        mean += pooled[start : start + MOMENT_CHUNK_ROWS].sum(axis=0, dtype=np.float64)
    mean /= rows
    squares = np.zeros(pooled.shape[1])
    for start in range(0, rows, MOMENT_CHUNK_ROWS):
        squares += ((pooled[start : start + MOMENT_CHUNK_ROWS].astype(np.float64) - mean) ** 2).sum(axis=0)
    sd = np.sqrt(squares / max(rows - 1, 1))
    return mean, np.where(sd > 0, sd, 1.0)


def mean_pool(bags) -> np.ndarray:
    """float16 [slides, D]: each bag's tile mean, summed in float32 (numpy casts in small buffers, so a bag is
    never copied whole to float32)."""
    pooled = np.empty((len(bags), bags.dim), dtype=np.float16)
    for index in range(len(bags)):
        pooled[index] = bags.bag(index).mean(axis=0, dtype=np.float32)
    return pooled


class MeanPoolProbe(FittedProbe):
    inputs = "bags"  # features.bags.SlideBags: a slide task's cache, one bag of tiles per slide

    PARAM_RULES = {"lr": POSITIVE, "weight_decay": NON_NEGATIVE, "cox_lr": POSITIVE, "cox_weight_decay": NON_NEGATIVE}

    def __init__(self, num_classes: int, lr: float | list[float] = (1e-3,), weight_decay: float | list[float] = (0.0,),
                 epochs: int = 100, batch_size: int = 64, class_weight: Literal["balanced"] | None = "balanced",
                 cox_lr: float | list[float] = (1e-2,), cox_weight_decay: float | list[float] = (0.0,),
                 cox_epochs: int = 500, cox_batch_size: int | None = None, eval_batch_size: int = 1024,
                 device: torch.device | str = "cpu", seed: int = 0):
        self.num_classes = num_classes
        self.linear_params = {"lr": lr, "weight_decay": weight_decay, "epochs": epochs, "batch_size": batch_size,
                              "class_weight": class_weight, "eval_batch_size": eval_batch_size}
        self.cox_grid = list(itertools.product(_as_list(cox_lr), _as_list(cox_weight_decay)))
        self.cox_epochs = int(cox_epochs)
        self.cox_batch_size = cox_batch_size  # None: the whole train split in one batch
        self.eval_batch_size = int(eval_batch_size)
        self.device = torch.device(device)
        self.seed = seed

    def fit(self, bags, targets, val_bags, val_targets, selection_metric: str = "balanced_accuracy"):
        self.survival_, targets, val_targets = check_train_val("meanpool", bags, targets, val_bags, val_targets,
                                                                self.num_classes)
        pooled, val_pooled = mean_pool(bags), mean_pool(val_bags)
        if self.survival_:
            self._fit_cox(pooled, targets, val_pooled, val_targets, selection_metric)
        else:
            self.linear_ = LinearProbe(self.num_classes, device=self.device, seed=self.seed, **self.linear_params)
            self.linear_.fit(pooled, targets, val_pooled, val_targets, selection_metric)
            self.selected_params_ = dict(self.linear_.selected_params_)
        return self

    def predict_proba(self, bags) -> np.ndarray:
        """float32 [slides, classes]."""
        self._require(survival=False)
        return self.linear_.predict_proba(mean_pool(bags))

    def predict_risk(self, bags) -> np.ndarray:
        """float32 [bags]: higher = shorter expected survival."""
        self._require(survival=True)
        return self._risks(mean_pool(bags), self.cox_weight_[:, None])[:, 0]

    def _require(self, survival: bool) -> None:
        if getattr(self, "survival_", None) is None:
            raise RuntimeError("fit the meanpool probe before predicting")
        if self.survival_ != survival:
            raise RuntimeError(f"this meanpool probe was fit on {'survival' if self.survival_ else 'class'} targets; "
                               f"call {'predict_risk' if self.survival_ else 'predict_proba'}")

    def _fit_cox(self, pooled, targets, val_pooled, val_targets, selection_metric: str) -> None:
        mean, sd = (torch.as_tensor(v, dtype=torch.float32, device=self.device) for v in train_moments(pooled))
        self.cox_center_ = mean
        weights = self._train_cox_heads(pooled, targets, mean, sd) / sd[:, None]  # raw units
        val_risks = self._risks(val_pooled, weights)
        scores = np.array([SURVIVAL_METRICS[selection_metric](val_targets, val_risks[:, h])
                           for h in range(len(self.cox_grid))])
        best = int(np.argmax(np.nan_to_num(scores, nan=-np.inf)))  # nan: val has no comparable pair
        self.cox_weight_ = weights[:, best].clone()
        lr, wd = self.cox_grid[best]
        self.selected_params_ = {"cox_lr": lr, "cox_weight_decay": wd, "val_" + selection_metric: float(scores[best])}

    def _train_cox_heads(self, pooled: np.ndarray, targets: np.ndarray, mean: torch.Tensor,
                         sd: torch.Tensor) -> torch.Tensor:
        """[D, heads] weights of the standardised vectors (x - mean) / sd. Zero start: the Cox loss is convex, and
        lifelines starts there too."""
        heads = [torch.zeros(pooled.shape[1], device=self.device, requires_grad=True) for _ in self.cox_grid]
        # One parameter group per head gives each its own lr and L2 in one torch.optim.Adam.
        optimizer = torch.optim.Adam([{"params": [w], "lr": lr, "weight_decay": wd}
                                      for w, (lr, wd) in zip(heads, self.cox_grid)])
        source = BatchSource(pooled, targets, self.device)
        batch_size = min(self.cox_batch_size or len(targets), len(targets))
        progress = Progress("meanpool cox", self.cox_epochs)
        for epoch in range(self.cox_epochs):
            for batch, target in source.epoch(epoch, batch_size, seed=self.seed):
                if not target[:, 1].any():
                    continue  # no event, no partial likelihood: skip rather than let Adam's momentum move alone
                risks = ((batch - mean) / sd) @ torch.stack(heads, dim=1)
                optimizer.zero_grad(set_to_none=True)
                cox_loss(risks, target[:, 0], target[:, 1]).sum().backward()
                optimizer.step()
            progress.update(epoch + 1)
        progress.close()
        return torch.stack(heads, dim=1).detach()

    @torch.no_grad()
    def _risks(self, pooled: np.ndarray, weights: torch.Tensor) -> np.ndarray:
        """float32 [bags, heads] risks (x - train mean) . w of float16 vectors, one upcast batch at a time."""
        out = np.empty((len(pooled), weights.shape[1]), dtype=np.float32)
        for batch_indices, batch in iter_float32_batches(pooled, np.arange(len(pooled)), self.eval_batch_size,
                                                         self.device):
            out[batch_indices] = ((batch - self.cox_center_) @ weights).cpu().numpy()
        return out
