"""Segmentation metrics (streamed confusion matrix) and the seg heads' batch contract, learning and checks."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import RecordingFeatures

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.segmentation import (
    IGNORE_INDEX,
    SEGMENTATION_METRICS,
    metrics_from_confusion,
    segmentation_split_metrics,
    update_confusion,
)
from evalsuite.probes import PROBES
from evalsuite.probes.tokens.seg_train import soft_dice_loss
from evalsuite.tasks.cards import load_card


def test_iou_and_dice_per_class_and_means_by_hand():
    target = np.array([[0, 0, 1, 1], [2, 2, 2, IGNORE_INDEX]])
    prediction = np.array([[0, 1, 1, 1], [2, 2, 0, 1]])
    confusion = update_confusion(np.zeros((4, 4), dtype=np.int64), target, prediction)
    assert confusion.sum() == 7  # the ignored pixel counts nowhere
    m = metrics_from_confusion(confusion, ["background", "a", "b", "c"])
    # background: TP 1, FP 1 (a b pixel), FN 1 -> IoU 1/3, Dice 2/4
    assert m["iou_background"] == pytest.approx(1 / 3) and m["dice_background"] == pytest.approx(0.5)
    # a: TP 2, FP 1 -> IoU 2/3, Dice 4/5; b: TP 2, FN 1 -> IoU 2/3, Dice 4/5; c absent everywhere -> nan
    assert m["iou_a"] == pytest.approx(2 / 3) and m["dice_b"] == pytest.approx(0.8)
    assert np.isnan(m["iou_c"]) and np.isnan(m["dice_c"])
    assert m["iou_fg_mean"] == pytest.approx(2 / 3) and m["dice_fg_mean"] == pytest.approx(0.8)
    assert m["iou_mean"] == pytest.approx((1 / 3 + 2 / 3 + 2 / 3) / 3)
    assert list(m)[:4] == list(SEGMENTATION_METRICS)


def test_a_class_predicted_but_absent_scores_zero_not_nan():
    confusion = update_confusion(np.zeros((3, 3), dtype=np.int64), np.array([0, 0, 1]), np.array([0, 2, 1]))
    m = metrics_from_confusion(confusion, ["background", "x", "y"])
    assert m["iou_y"] == 0 and m["dice_y"] == 0


def test_streamed_confusion_equals_the_whole_split_at_once():
    rng = np.random.default_rng(0)
    target = rng.integers(0, 4, (10, 16, 16))
    target[0, :3] = IGNORE_INDEX
    prediction = rng.integers(0, 4, (10, 16, 16))
    whole = update_confusion(np.zeros((4, 4), dtype=np.int64), target, prediction)
    streamed = np.zeros((4, 4), dtype=np.int64)
    for start in range(0, 10, 3):
        update_confusion(streamed, target[start:start + 3], prediction[start:start + 3])
    assert np.array_equal(whole, streamed)


def test_soft_dice_loss_is_zero_for_a_perfect_prediction_and_ignores_255():
    target = torch.tensor([[[0, 1], [2, IGNORE_INDEX]]])
    logits = torch.nn.functional.one_hot(torch.tensor([[[0, 1], [2, 0]]]), 3).permute(0, 3, 1, 2).float() * 50
    assert soft_dice_loss(logits, target, 3).item() == pytest.approx(0, abs=1e-4)


def _token_task(n: int, seed: int, grid: int = 8, dim: int = 16, classes: int = 3, label_px: int = 32):
    """Tokens whose class is their nearest centre; masks are the token classes at 4x the grid resolution."""
    centres = np.random.default_rng(99).normal(0, 3, size=(classes, dim))
    rng = np.random.default_rng(seed)
    token_class = rng.integers(0, classes, (n, grid, grid))
    token_class[:, : grid // 2, : grid // 2] = 0  # plenty of background
    features = centres[token_class] + rng.normal(0, 0.7, (n, grid, grid, dim))
    scale = label_px // grid
    masks = token_class.repeat(scale, axis=1).repeat(scale, axis=2).astype(np.uint8)
    return features.astype(np.float16), masks


SMALL = {
    "seg_linear": {"epochs": 8, "batch_size": 8, "eval_batch_size": 8, "lr": 0.01},
    "seg_masktransformer": {"epochs": 8, "batch_size": 8, "eval_batch_size": 8, "lr": 0.001, "d_model": 32,
                            "n_heads": 4, "d_ff": 64},
}


@pytest.mark.parametrize("probe", sorted(SMALL))
def test_seg_head_reads_one_batch_at_a_time_and_learns_separable_tokens(probe):
    train, train_masks = _token_task(48, seed=0)
    val, val_masks = _token_task(16, seed=1)
    train_store, val_store = RecordingFeatures(train), RecordingFeatures(val)
    fitted = PROBES[probe](num_classes=3, seed=0, **SMALL[probe]).fit(train_store, train_masks, val_store, val_masks,
                                                                       "iou_fg_mean")
    metrics = metrics_from_confusion(fitted.confusion_matrix(val_store, val_masks))
    reads = train_store.rows_per_read + val_store.rows_per_read
    assert reads and max(reads) <= 8 < len(train)
    assert metrics["iou_fg_mean"] > 0.8, metrics
    assert 1 <= fitted.selected_params_["epoch"] <= 8 and "val_iou_fg_mean" in fitted.selected_params_


def test_same_seed_same_head_and_metrics():
    train, train_masks = _token_task(24, seed=0)
    val, val_masks = _token_task(8, seed=1)
    runs = [PROBES["seg_linear"](num_classes=3, seed=3, epochs=3, batch_size=8).fit(train, train_masks, val, val_masks)
            for _ in range(2)]
    assert np.array_equal(runs[0].confusion_matrix(val, val_masks), runs[1].confusion_matrix(val, val_masks))


def test_masks_with_class_ids_beyond_the_card_are_refused():
    train, masks = _token_task(8, seed=0)
    masks[2, 0, 0] = 7
    with pytest.raises(EvalsuiteError, match="mask value 7 is outside 0..2"):
        PROBES["seg_linear"](num_classes=3, epochs=1).fit(train, masks, train, masks)


def test_pooled_features_are_refused_with_a_hint():
    with pytest.raises(EvalsuiteError, match="dense token grids"):
        PROBES["seg_linear"](num_classes=3).fit(np.zeros((4, 8), np.float16), np.zeros((4, 2, 2), np.uint8),
                                                np.zeros((4, 8), np.float16), np.zeros((4, 2, 2), np.uint8))


def test_classification_selection_metric_is_refused():
    train, masks = _token_task(4, seed=0)
    with pytest.raises(EvalsuiteError, match="not a segmentation metric"):
        PROBES["seg_linear"](num_classes=3).fit(train, masks, train, masks, "balanced_accuracy")


def test_segmentation_cards_validate_metric_background_and_layers(tmp_path):
    base = (tmp_path / "base.yaml")
    text = ("name: t\nkind: segmentation\nreader: {name: hgsc_seg}\nclasses: [background, a]\n"
            "splits: [train, val, test]\nprobes: [seg_linear]\n")
    cases = {
        "selection_metric: balanced_accuracy\n": "must be one of dice_fg_mean",
        "selection_metric: dice_fg_mean\nlayers: [-1, -1]\n": "field 'layers'",
        "selection_metric: dice_fg_mean\nlayers: -1\n": "field 'layers'",
    }
    for extra, message in cases.items():
        base.write_text(text + extra)
        with pytest.raises(EvalsuiteError, match=message):
            load_card(str(base))
    base.write_text(text.replace("[background, a]", "[a, background]") + "selection_metric: dice_fg_mean\n")
    with pytest.raises(EvalsuiteError, match="'background' as its first class"):
        load_card(str(base))
    base.write_text(text + "selection_metric: iou_fg_mean\nlayers: [-4, -1]\n")
    assert load_card(str(base)).extra["layers"] == [-4, -1]


class _FixedConfusion:
    def __init__(self, confusion):
        self.confusion = np.asarray(confusion)

    def confusion_matrix(self, features, labels):
        return self.confusion


def test_split_metrics_are_named_after_the_scored_card_and_a_class_count_mismatch_is_refused():
    probe = _FixedConfusion([[3, 1], [0, 2]])
    for names in (["background", "tumour"], ["background", "stroma"]):  # the last card built must not matter
        card = SimpleNamespace(classes=names, path="card.yaml")
        metrics = segmentation_split_metrics(card, probe, None, None)
        assert metrics[f"dice_{names[1]}"] == pytest.approx(0.8) and f"iou_{names[1]}" in metrics
    with pytest.raises(EvalsuiteError, match="card.yaml: names 3 classes but the probe scored 2"):
        segmentation_split_metrics(SimpleNamespace(classes=["background", "a", "b"], path="card.yaml"), probe, None, None)
