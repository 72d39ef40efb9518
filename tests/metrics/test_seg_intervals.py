"""Segmentation bootstrap intervals from per-image confusion counts: the same dataset-level metric, resampled images.

Reference values: the hand-worked example of test_seg_metrics_probes (dice_fg_mean 0.8, iou_fg_mean 2/3), and a
brute-force bootstrap that re-scores the drawn images' pixels (update_confusion on the concatenated masks) for
every draw."""

from types import SimpleNamespace

import numpy as np
import pytest

from evalsuite.metrics.bootstrap import NOTE_SUFFIX
from evalsuite.metrics.segmentation import (
    IGNORE_INDEX,
    IMAGE_CONFUSIONS,
    ConfusionScorer,
    image_confusions,
    metrics_from_confusion,
    segmentation_intervals,
    segmentation_split_metrics,
    update_confusion,
    weighted_segmentation_metrics,
)
from evalsuite.metrics.shown_intervals import shown_interval
from evalsuite.metrics.significance import paired_scores
from evalsuite.probes import PROBES

NAMES = ["background", "a", "b", "c"]


def _same(one: dict, other: dict) -> None:
    assert list(one) == list(other)
    for name in one:
        both_nan = np.isnan(one[name]) and np.isnan(other[name])
        assert both_nan or one[name] == pytest.approx(other[name], abs=1e-12), name


def _maps(images: int, seed: int, classes: int = 4, size: int = 12):
    """Label and prediction maps [images, size, size]: predictions right on about 70 % of pixels, some ignored."""
    rng = np.random.default_rng(seed)
    target = rng.integers(0, classes, (images, size, size))
    prediction = np.where(rng.random(target.shape) < 0.7, target, rng.integers(0, classes, target.shape))
    target[rng.random(target.shape) < 0.05] = IGNORE_INDEX
    return target, prediction


def test_per_image_counts_of_the_hand_example_sum_to_its_split_metrics():
    # The two rows of the hand example as two images: dice_fg_mean 0.8 and iou_fg_mean 2/3 by hand.
    target = np.array([[[0, 0, 1, 1]], [[2, 2, 2, IGNORE_INDEX]]])
    prediction = np.array([[[0, 1, 1, 1]], [[2, 2, 0, 1]]])
    per_image = image_confusions(target, prediction, 4)
    assert per_image.shape == (2, 4, 4) and per_image.dtype == np.int64
    assert per_image[0].sum() == 4 and per_image[1].sum() == 3  # the ignored pixel counts nowhere
    metrics = metrics_from_confusion(per_image.sum(axis=0), NAMES)
    assert metrics["dice_fg_mean"] == pytest.approx(0.8) and metrics["iou_fg_mean"] == pytest.approx(2 / 3)
    _same(metrics, metrics_from_confusion(update_confusion(np.zeros((4, 4), np.int64), target, prediction), NAMES))


def test_all_weights_one_reproduce_the_split_metrics():
    target, prediction = _maps(9, seed=1)
    per_image = image_confusions(target, prediction, 4)
    pooled = update_confusion(np.zeros((4, 4), np.int64), target, prediction)
    assert np.array_equal(per_image.sum(axis=0), pooled)
    _same(weighted_segmentation_metrics(per_image, np.ones(9), NAMES), metrics_from_confusion(pooled, NAMES))
    # Weight 2 on image 0 is the split with image 0 twice.
    twice = update_confusion(pooled.copy(), target[:1], prediction[:1])
    _same(weighted_segmentation_metrics(per_image, np.r_[2.0, np.ones(8)], NAMES), metrics_from_confusion(twice, NAMES))


def _brute_force(target, prediction, groups, draws: int, seed: int) -> dict:
    """Percentile interval from re-scoring the pixels of the drawn images, cluster by cluster, draw by draw."""
    clusters = sorted(set(groups)) if groups is not None else list(range(len(target)))
    members = [[i for i in range(len(target)) if (groups[i] if groups is not None else i) == c] for c in clusters]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        drawn = [i for k in rng.integers(0, len(clusters), size=len(clusters)) for i in members[k]]
        confusion = update_confusion(np.zeros((4, 4), np.int64), target[drawn], prediction[drawn])
        values.append(metrics_from_confusion(confusion, NAMES))
    return {name: (np.nanpercentile([v[name] for v in values], 2.5), np.nanpercentile([v[name] for v in values], 97.5))
            for name in values[0]}


@pytest.mark.parametrize("groups", [None, ["p", "q", "p", "r", "q", "q", "r"]])
def test_the_interval_equals_a_brute_force_resample_of_the_images(groups):
    target, prediction = _maps(7, seed=2)
    target[3][target[3] == 3] = 0  # class c is rare: some draws leave it out of the labels
    intervals = segmentation_intervals(image_confusions(target, prediction, 4), NAMES, groups, draws=200, seed=5)
    expected = _brute_force(target, prediction, groups, draws=200, seed=5)
    assert list(intervals) == list(expected)
    for name, (low, high) in expected.items():
        assert intervals[name] == pytest.approx((low, high), abs=1e-12), name
    assert intervals["dice_fg_mean"][0] < intervals["dice_fg_mean"][1]


def test_one_cluster_gives_no_interval():
    target, prediction = _maps(4, seed=3)
    intervals = segmentation_intervals(image_confusions(target, prediction, 4), NAMES, ["x"] * 4)
    assert all(np.isnan(low) and np.isnan(high) for low, high in intervals.values())


def _tokens(n: int, seed: int, grid: int = 4, dim: int = 8, classes: int = 3):
    centres = np.random.default_rng(99).normal(0, 2, size=(classes, dim))
    rng = np.random.default_rng(seed)
    token_class = rng.integers(0, classes, (n, grid, grid))
    features = centres[token_class] + rng.normal(0, 1.5, (n, grid, grid, dim))
    return features.astype(np.float16), token_class.repeat(4, axis=1).repeat(4, axis=2).astype(np.uint8)


def test_the_scorer_with_intervals_keeps_the_metric_and_returns_the_per_image_counts():
    train, val, test = _tokens(16, 0), _tokens(8, 1), _tokens(10, 2)
    probe = PROBES["seg_linear"](num_classes=3, seed=0, epochs=2, batch_size=8, eval_batch_size=3).fit(*train, *val)
    card = SimpleNamespace(classes=["background", "x", "y"], path="card.yaml")
    plain = segmentation_split_metrics(card, probe, *test)  # the pooled confusion matrix, as before
    groups = [f"image{i // 2}" for i in range(10)]
    scored = segmentation_split_metrics(card, probe, *test, with_intervals=True, groups=groups, seed=0)
    per_image = scored.pop(IMAGE_CONFUSIONS)
    assert per_image.shape == (10, 3, 3) and np.array_equal(per_image.sum(axis=0), probe.confusion_matrix(*test))
    _same({k: v for k, v in scored.items() if not k.endswith(("_ci", "_draws", NOTE_SUFFIX))}, plain)
    assert {k[:-3] for k in scored if k.endswith("_ci")} == set(plain) == {k[:-6] for k in scored if k.endswith("_draws")}
    # The percentile interval of segmentation_intervals' draws, read for the 5 images (shown_intervals.py).
    raw = segmentation_intervals(per_image, card.classes, groups, seed=0)["dice_fg_mean"]
    assert raw == pytest.approx(np.percentile(scored["dice_fg_mean_draws"], [2.5, 97.5]))
    assert scored["dice_fg_mean_ci"] == shown_interval(plain["dice_fg_mean"], scored["dice_fg_mean_draws"], 5,
                                                       "dice_fg_mean").bounds
    low, high = scored["dice_fg_mean_ci"]
    assert low <= plain["dice_fg_mean"] <= high and low < high


def test_paired_scores_of_confusion_counts():
    target, right = _maps(12, seed=4)
    worse = np.where(np.random.default_rng(6).random(right.shape) < 0.5, right, (right + 1) % 4)
    good, bad = image_confusions(target, right, 4), image_confusions(target, worse, 4)
    scorers = [ConfusionScorer([counts], "dice_fg_mean", NAMES) for counts in (good, bad)]
    result = paired_scores(*scorers, 12, draws=300)
    assert result.a == pytest.approx(metrics_from_confusion(good.sum(axis=0))["dice_fg_mean"])
    assert result.difference > 0 and result.low > 0 and result.p_value == pytest.approx(2 / 301)
    same = paired_scores(ConfusionScorer([good], "iou_a", NAMES), ConfusionScorer([good], "iou_a", NAMES), 12, draws=50)
    assert (same.difference, same.p_value) == (0.0, 1.0)
