"""Segmentation metrics: per-class IoU (Jaccard) and Dice from one confusion matrix per split.

Protocol (also in docs/tasks.md, "Segmentation tasks", and every segmentation card):
- class 0 is `background`; the other classes are the foreground (nucleus types);
- predictions are the argmax of the head's logits after bilinear upsampling to the label
  resolution; pixels labelled IGNORE_INDEX (255: MoNuSAC "Ambiguous" regions, padding) count
  nowhere;
- one confusion matrix is accumulated over every pixel of every image of the split, batch by
  batch (never a [N, C, H, W] array for a whole split), so each class's IoU and Dice pool the
  split's pixels (dataset-level, "micro over images");
- IoU_c = TP / (TP + FP + FN), Dice_c = 2 TP / (2 TP + FP + FN); a class with no pixel in
  the labels and none predicted has no defined score (nan) and is left out of the means;
- `dice_fg_mean` / `iou_fg_mean`: mean over the foreground classes (the headline, as eva
  reports Dice without background); `dice_mean` / `iou_mean`: mean over all classes,
  background included (nanopath's Jaccard counts background, but per image).
"""

import numpy as np

from evalsuite.errors import EvalsuiteError

IGNORE_INDEX = 255
BACKGROUND = "background"
MEAN_METRICS = ("dice_fg_mean", "iou_fg_mean", "dice_mean", "iou_mean")
# Names a segmentation card may give as `selection_metric` (validated in evalsuite.tasks.cards).
SEGMENTATION_METRICS = MEAN_METRICS


def generic_class_names(num_classes: int) -> list:
    """Names for the per-class metrics when no card names the classes."""
    return [BACKGROUND] + [f"class{i}" for i in range(1, num_classes)]


def update_confusion(confusion: np.ndarray, target: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Add one batch of integer label and prediction maps (same shape) to a [C, C] matrix (rows = truth)."""
    num_classes = confusion.shape[0]
    target = np.asarray(target).reshape(-1)
    prediction = np.asarray(prediction).reshape(-1)
    valid = target != IGNORE_INDEX
    pairs = target[valid].astype(np.int64) * num_classes + prediction[valid].astype(np.int64)
    confusion += np.bincount(pairs, minlength=num_classes * num_classes).reshape(num_classes, num_classes)
    return confusion


def per_class_scores(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(IoU, Dice) per class; nan where the class is neither in the labels nor predicted."""
    confusion = np.asarray(confusion, dtype=np.float64)
    tp = np.diag(confusion)
    fp = confusion.sum(axis=0) - tp
    fn = confusion.sum(axis=1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = np.where(tp + fp + fn > 0, tp / (tp + fp + fn), np.nan)
        dice = np.where(tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
    return iou, dice


def _mean(values: np.ndarray) -> float:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if len(defined) else float("nan")


def metrics_from_confusion(confusion: np.ndarray, names=None) -> dict:
    """The four means, then `dice_<class>` and `iou_<class>` for every class (background first)."""
    iou, dice = per_class_scores(confusion)
    names = list(names) if names is not None else generic_class_names(len(iou))
    metrics = {"dice_fg_mean": _mean(dice[1:]), "iou_fg_mean": _mean(iou[1:]),
               "dice_mean": _mean(dice), "iou_mean": _mean(iou)}
    for name, d in zip(names, dice):
        metrics[f"dice_{name}"] = float(d)
    for name, j in zip(names, iou):
        metrics[f"iou_{name}"] = float(j)
    return metrics


def segmentation_split_metrics(card, probe, features, labels) -> dict:
    """The runner's scorer for kind `segmentation`: stream the split through the fitted probe; the
    per-class metrics are named after the card's classes."""
    confusion = probe.confusion_matrix(features, labels)
    if len(card.classes) != len(confusion):
        raise EvalsuiteError(f"task card {card.path}: names {len(card.classes)} classes but the probe scored "
                             f"{len(confusion)}; list one name per class id")
    return metrics_from_confusion(confusion, card.classes)
