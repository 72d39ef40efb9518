"""Training and scoring shared by the segmentation heads (seg_linear, seg_masktransformer).

Features are dense float16 token grids [N, h, w, D] (memory-mapped or in RAM) and labels are
integer masks [N, H, W] (uint8/int16, 255 = ignore). Both are read one batch at a time:
features only through `evalsuite.probes.batches.iter_float32_batches` (upcast per batch), masks by
the same row indices. A head maps [B, h, w, D] float32 to logits [B, C, h, w]; the logits are
upsampled (bilinear) to the label resolution before the loss and before the argmax that is
scored, so nothing of size [N, C, H, W] is ever built for a split.

Loss: cross-entropy + `dice_weight` x soft Dice (mean over classes of 1 - Dice of the softmax,
ignored pixels excluded). Optimiser: AdamW (`weight_decay` 0 is plain Adam), constant lr.
After every epoch the val split is scored with the card's selection metric and the best
epoch's weights are kept (the first best on ties; an epoch with an undefined, NaN score is never
preferred to one with a score).
"""

import copy
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.segmentation import IGNORE_INDEX, SEGMENTATION_METRICS, image_confusions, metrics_from_confusion
from evalsuite.probes.base import NON_NEGATIVE, POSITIVE, FittedProbe
from evalsuite.probes.batches import iter_float32_batches
from evalsuite.runtime.progress import Progress
from evalsuite.storage.npy_rows import NpyRows

_CHECK_ROWS = 256  # label rows scanned at once when validating class ids


def releasing_rows(array):
    """Rows of a memory-mapped .npy read with positioned reads (evalsuite.storage.npy_rows), so streaming masks never
    leaves the label file's pages in the process's RSS; other arrays as they are."""
    if isinstance(array, np.memmap) and getattr(array, "filename", None) and Path(array.filename).suffix == ".npy":
        return NpyRows(Path(array.filename))
    return array


def check_dense_split(features, labels, num_classes: int, what: str) -> None:
    shape = getattr(features, "shape", None)
    if shape is None or len(shape) != 4:
        raise EvalsuiteError(f"{what}: features must be dense token grids [samples, h, w, dim], got shape {shape}; "
                             "segmentation probes need a segmentation task card")
    label_shape = getattr(labels, "shape", None)
    if label_shape is None or len(label_shape) != 3:
        raise EvalsuiteError(f"{what}: labels must be masks [samples, H, W], got shape {label_shape}")
    if len(features) != len(labels):
        raise EvalsuiteError(f"{what}: {len(features)} feature rows but {len(labels)} masks")
    if len(labels) == 0:
        raise EvalsuiteError(f"{what}: no samples; check the task card's splits and data")
    if not np.issubdtype(labels.dtype, np.integer):
        raise EvalsuiteError(f"{what}: masks must be integers, got {labels.dtype}")
    for start in range(0, len(labels), _CHECK_ROWS):
        block = np.asarray(labels[start:start + _CHECK_ROWS])
        bad = (block < 0) | ((block >= num_classes) & (block != IGNORE_INDEX))
        if bad.any():
            value = int(block[bad][0])
            raise EvalsuiteError(f"{what}: mask value {value} is outside 0..{num_classes - 1} (and not the ignore "
                                 f"value {IGNORE_INDEX}); check the card's classes")


def soft_dice_loss(logits: torch.Tensor, target: torch.Tensor, num_classes: int, smooth: float = 1.0) -> torch.Tensor:
    """1 - mean over classes of the soft Dice of softmax(logits) [B, C, H, W] against target [B, H, W]."""
    valid = (target != IGNORE_INDEX).unsqueeze(1)
    proba = torch.softmax(logits, dim=1) * valid
    one_hot = torch.zeros_like(proba).scatter_(1, torch.where(valid, target.unsqueeze(1), 0), 1.0) * valid
    dims = (0, 2, 3)
    intersection = (proba * one_hot).sum(dims)
    denominator = proba.sum(dims) + one_hot.sum(dims)
    return 1 - ((2 * intersection + smooth) / (denominator + smooth)).mean()


class SegmentationProbe(FittedProbe):
    """Base of the segmentation heads: subclasses implement `build_head(dim) -> nn.Module`."""

    inputs = "tokens"
    PARAM_RULES = {"lr": POSITIVE, "weight_decay": NON_NEGATIVE, "dice_weight": NON_NEGATIVE}

    def __init__(self, num_classes: int, lr: float = 1e-3, weight_decay: float = 1e-4, epochs: int = 30,
                 batch_size: int = 16, eval_batch_size: int = 32, dice_weight: float = 1.0,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.num_classes = int(num_classes)
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.eval_batch_size = int(eval_batch_size)
        self.dice_weight = float(dice_weight)
        self.device = torch.device(device)
        self.seed = int(seed)
        if self.epochs < 1 or self.batch_size < 1 or self.eval_batch_size < 1:
            raise EvalsuiteError(f"{type(self).__name__}: epochs, batch_size and eval_batch_size must be >= 1")

    def build_head(self, dim: int) -> torch.nn.Module:
        raise NotImplementedError

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "dice_fg_mean"):
        name = type(self).__name__
        if selection_metric not in SEGMENTATION_METRICS:
            raise EvalsuiteError(f"{name}: selection metric '{selection_metric}' is not a segmentation metric; "
                                 f"use one of {', '.join(SEGMENTATION_METRICS)}")
        labels, val_labels = releasing_rows(labels), releasing_rows(val_labels)
        check_dense_split(features, labels, self.num_classes, f"{name} train split")
        check_dense_split(val_features, val_labels, self.num_classes, f"{name} val split")
        generator = torch.Generator().manual_seed(self.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            head = self.build_head(int(features.shape[-1])).to(self.device)
        optimizer = torch.optim.AdamW(head.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        best_score, best_epoch, best_state, history = -np.inf, 0, None, []
        progress = Progress(name, self.epochs)
        for epoch in range(1, self.epochs + 1):
            head.train()
            order = torch.randperm(len(labels), generator=generator).numpy()
            for batch_indices, batch in iter_float32_batches(features, order, self.batch_size, self.device):
                target = self._targets(labels, batch_indices)
                logits = _upsample(head(batch), target.shape[-2:])
                loss = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX)
                if self.dice_weight:
                    loss = loss + self.dice_weight * soft_dice_loss(logits, target, self.num_classes)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            score = metrics_from_confusion(self._confusion(head, val_features, val_labels))[selection_metric]
            history.append(round(float(score), 6))
            # A NaN best (an undefined first score) must not block every later epoch: NaN > x is False.
            improved = np.isfinite(score) and (not np.isfinite(best_score) or score > best_score)
            if best_state is None or improved:
                best_score, best_epoch, best_state = score, epoch, copy.deepcopy(head.state_dict())
            progress.update(epoch, f"val {selection_metric} {score:.4f}, best {best_score:.4f} (epoch {best_epoch})")
        progress.close(f"kept epoch {best_epoch}, val {selection_metric} {best_score:.4f}")
        head.load_state_dict(best_state)
        self.head_ = head.eval()
        self.val_history_ = history  # the selection metric on val after each epoch
        self.selected_params_ = {"epoch": best_epoch, "lr": self.lr, "weight_decay": self.weight_decay,
                                 "val_" + selection_metric: float(best_score)}
        return self

    def confusion_matrix(self, features, labels) -> np.ndarray:
        """[C, C] pixel counts (rows = truth, columns = prediction) of the fitted head over a split."""
        return self.image_confusions(features, labels).sum(axis=0)

    def image_confusions(self, features, labels) -> np.ndarray:
        """int64 [N, C, C]: the pixel counts of every image of the split, which a bootstrap reweights without
        predicting again; their sum is `confusion_matrix`."""
        labels = releasing_rows(labels)
        check_dense_split(features, labels, self.num_classes, f"{type(self).__name__} scoring")
        return self._image_confusions(self.head_, features, labels)

    def _targets(self, labels, batch_indices: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(labels[batch_indices]).astype(np.int64)).to(self.device)

    def _confusion(self, head, features, labels) -> np.ndarray:
        return self._image_confusions(head, features, labels).sum(axis=0)

    @torch.no_grad()
    def _image_confusions(self, head, features, labels) -> np.ndarray:
        was_training = head.training
        head.eval()
        per_image = np.zeros((len(features), self.num_classes, self.num_classes), dtype=np.int64)
        order = np.arange(len(features))
        for batch_indices, batch in iter_float32_batches(features, order, self.eval_batch_size, self.device):
            target = np.asarray(labels[batch_indices])
            prediction = _upsample(head(batch), target.shape[-2:]).argmax(dim=1).cpu().numpy()
            per_image[batch_indices] = image_confusions(target, prediction, self.num_classes)
        head.train(was_training)
        return per_image


def _upsample(logits: torch.Tensor, size) -> torch.Tensor:
    if tuple(logits.shape[-2:]) == tuple(size):
        return logits
    return F.interpolate(logits, size=tuple(size), mode="bilinear", align_corners=False)
