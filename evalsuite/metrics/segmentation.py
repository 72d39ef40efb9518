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

Test intervals: the scorer also keeps one [C, C] confusion matrix per test image; their sum is the
split's matrix, so the metric is unchanged. A bootstrap draw takes the reader's clusters (PanNuke
tissue type, CoNSeP source image, MoNuSAC patient; else each image) with replacement, and its split matrix is
the per-image matrices weighted by how often each image was drawn: the same dataset-level metric on
the resampled images, with no re-prediction. `ConfusionScorer` scores such draws for
`leaderboard --compare` and the rank intervals (evalsuite.metrics.significance).
"""

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, cluster_index, draw_weights, percentile_interval
from evalsuite.metrics.draw_scores import macro_mean
from evalsuite.metrics.shown_intervals import with_draws

IGNORE_INDEX = 255
BACKGROUND = "background"
MEAN_METRICS = ("dice_fg_mean", "iou_fg_mean", "dice_mean", "iou_mean")
# Names a segmentation card may give as `selection_metric` (validated in evalsuite.tasks.cards).
SEGMENTATION_METRICS = MEAN_METRICS
# The key under which the scorer with intervals returns the per-image confusion counts (int64 [N, C, C]): the
# runner stores them beside the run JSON for `leaderboard --compare`.
IMAGE_CONFUSIONS = "image_confusions"


def has_confusion_form(metric: str) -> bool:
    """Whether `metric` is one that per-image confusion counts score (a mean or a per-class Dice or IoU)."""
    return metric in MEAN_METRICS or metric.startswith(("dice_", "iou_"))


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


def image_confusions(target: np.ndarray, prediction: np.ndarray, num_classes: int) -> np.ndarray:
    """int64 [B, C, C]: one confusion matrix (rows = truth) per image of a batch of label and prediction maps
    [B, H, W]; their sum is `update_confusion` of the batch."""
    target, prediction = np.asarray(target), np.asarray(prediction)
    images = len(target)
    target, prediction = target.reshape(images, -1), prediction.reshape(images, -1)
    valid = target != IGNORE_INDEX
    image = np.broadcast_to(np.arange(images)[:, None], target.shape)[valid]
    pairs = (image * num_classes + target[valid].astype(np.int64)) * num_classes + prediction[valid].astype(np.int64)
    counts = np.bincount(pairs, minlength=images * num_classes * num_classes)
    return counts.reshape(images, num_classes, num_classes)


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


def weighted_segmentation_metrics(per_image: np.ndarray, weights: np.ndarray, names=None) -> dict:
    """`metrics_from_confusion` of the split in which image i appears `weights[i]` times; `per_image` [N, C, C]
    from `image_confusions`. All weights 1: the split's own metrics."""
    return metrics_from_confusion(np.tensordot(np.asarray(weights, dtype=np.float64), per_image, axes=1), names)


def segmentation_intervals(per_image: np.ndarray, names=None, groups=None, draws: int = BOOTSTRAP_DRAWS,
                           seed: int = 0, confidence: float = CONFIDENCE) -> dict:
    """{metric: (low, high)}: percentile bootstrap interval over resampled clusters of test images (`groups`: one
    cluster id per image, None: each image its own); (nan, nan) with fewer than two clusters or for a class absent
    from the labels and never predicted (no score in any draw)."""
    drawn = segmentation_draw_scores(per_image, names, groups, draws, seed)
    return {name: percentile_interval(values, confidence) for name, values in drawn.items()}


def segmentation_draw_scores(per_image: np.ndarray, names=None, groups=None, draws: int = BOOTSTRAP_DRAWS,
                             seed: int = 0) -> dict:
    """{metric: float64 [draws]} over resampled clusters of test images (no draws with fewer than two clusters)."""
    per_image = np.asarray(per_image)
    metric_names = metrics_from_confusion(per_image.sum(axis=0), names)
    if cluster_index(groups, len(per_image))[1] < 2:
        return {name: np.zeros(0) for name in metric_names}
    values = [weighted_segmentation_metrics(per_image, w, names) for w in draw_weights(groups, len(per_image),
                                                                                        draws, seed)]
    return {name: np.array([v[name] for v in values], dtype=np.float64) for name in metric_names}


class ConfusionScorer:
    """One model's score on a segmentation task for any image-weight vector: `metric` of the weighted per-image
    confusion counts, averaged over its seeds (as significance.ItemScorer does with class probabilities)."""

    def __init__(self, per_image: list, metric: str, names=None):
        self.per_image = [np.asarray(counts) for counts in per_image]
        self.metric, self.names = metric, names
        known = metrics_from_confusion(self.per_image[0].sum(axis=0), names)
        if metric not in known:
            raise EvalsuiteError(f"metric '{metric}' is not a segmentation metric of these runs; pass --metric with "
                                 f"one of {', '.join(known)}")

    def score(self, weights: np.ndarray) -> float:
        return float(np.mean([weighted_segmentation_metrics(counts, weights, self.names)[self.metric]
                              for counts in self.per_image]))

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """float64 [draws]: the score for each row of image weights [draws, images], the mean over seeds."""
        return np.mean([_block_metric(np.tensordot(weights, counts.astype(np.float64), axes=1), self.metric,
                                      self.names) for counts in self.per_image], axis=0)


def _block_metric(confusion: np.ndarray, metric: str, names) -> np.ndarray:
    """`metric` of each confusion matrix of a block [draws, C, C], as metrics_from_confusion defines it."""
    tp = np.diagonal(confusion, axis1=1, axis2=2)
    union = confusion.sum(axis=1) + confusion.sum(axis=2) - tp  # tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = {"iou": np.where(union > 0, tp / union, np.nan), "dice": np.where(union > 0, 2 * tp / (union + tp),
                                                                                      np.nan)}
    kind, _, which = metric.partition("_")
    if which in ("fg_mean", "mean"):
        return macro_mean(scores[kind][:, 1:] if which == "fg_mean" else scores[kind])
    names = list(names) if names is not None else generic_class_names(confusion.shape[1])
    return scores[kind][:, names.index(which)]


def segmentation_split_metrics(card, probe, features, labels, with_intervals: bool = False, groups=None,
                               seed: int = 0, unit: str = "cluster") -> dict:
    """The runner's scorer for kind `segmentation`: stream the split through the fitted probe; the per-class
    metrics are named after the card's classes. With intervals (the test split) also {metric + "_ci": (low, high)}
    from the bootstrap (drawn with `seed`) over the clusters `groups` (one id per image; None: images), and the
    per-image confusion counts under IMAGE_CONFUSIONS."""
    per_image = probe.image_confusions(features, labels) if with_intervals else None
    confusion = per_image.sum(axis=0) if with_intervals else probe.confusion_matrix(features, labels)
    if len(card.classes) != len(confusion):
        raise EvalsuiteError(f"task card {card.path}: names {len(card.classes)} classes but the probe scored "
                             f"{len(confusion)}; list one name per class id")
    metrics = metrics_from_confusion(confusion, card.classes)
    if with_intervals:
        metrics.update(with_draws(segmentation_draw_scores(per_image, card.classes, groups, seed=seed), metrics,
                                  cluster_index(groups, len(per_image))[1], unit))
        metrics[IMAGE_CONFUSIONS] = per_image
    return metrics
