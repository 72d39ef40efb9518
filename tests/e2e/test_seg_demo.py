"""demo_seg end to end: ImageNet EfficientNet-Lite0 beats its random init; float16 tokens are metric-neutral."""

import json

import numpy as np
import pytest
import torch
from conftest import leaderboard_rows, run_cli

from evalsuite.metrics.segmentation import metrics_from_confusion
from evalsuite.models.backbones import build_backbone
from evalsuite.models.transforms import build_transform
from evalsuite.probes import PROBES
from evalsuite.probes.recipes import load_recipe
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

pytestmark = pytest.mark.slow


def _test_metrics(out, model: str) -> dict:
    return {row["metric"]: float(row["value"]) for row in leaderboard_rows(out)
            if row["model"] == model and row["split"] == "test" and row["probe"] == "seg_linear"}


def test_pretrained_beats_random_init_on_foreground_mean_iou(tmp_path):
    out = tmp_path / "out"
    for extra in ([], ["--random-init"]):
        result = run_cli("run", "--task", "demo_seg", "--probes", "seg_linear", "--out", out, "--num-workers", "0",
                         *extra)
        assert result.returncode == 0, result.stderr
    pretrained = _test_metrics(out, "efficientnet_lite0_imagenet")
    random_init = _test_metrics(out, "efficientnet_lite0_imagenet+random-init")
    print(json.dumps({"pretrained": pretrained, "random_init": random_init}, indent=1))
    # Seen: iou_fg_mean 0.156 vs 0.029, dice_fg_mean 0.25 vs 0.06 (7x7 feature maps of 100 px tiles).
    assert pretrained["iou_fg_mean"] - random_init["iou_fg_mean"] > 0.05, (pretrained, random_init)
    assert pretrained["dice_fg_mean"] > random_init["dice_fg_mean"]
    caches = [p for p in (out / "cache").iterdir() if not p.name.startswith(".")]
    assert len(caches) == 6
    for folder in caches:
        assert np.load(folder / "features.npy", mmap_mode="r").shape[1:] == (7, 7, 1280)


def _float32_tokens(card, backbone) -> dict:
    """Dense features of every split straight from the backbone, float32, no autocast (never cached)."""
    reader, transform = build_reader(card), build_transform(backbone.data_config)
    splits = {}
    for split in ("train", "val", "test"):
        dataset = reader.dataset(split, transform)
        rows = []
        with torch.inference_mode():
            for start in range(0, len(dataset), 32):
                images = torch.stack([dataset[i][0] for i in range(start, min(start + 32, len(dataset)))])
                rows.append(backbone.dense_features(images).float().numpy())
        splits[split] = (np.concatenate(rows), dataset.labels)
    return splits


def test_seg_head_metrics_agree_on_float32_and_float16_copies_of_the_same_tokens():
    card = load_card("demo_seg")
    tokens = _float32_tokens(card, build_backbone("efficientnet_lite0_imagenet"))
    recipe = load_recipe("seg_linear")
    metrics, epochs = {}, {}
    for dtype in (np.float32, np.float16):
        copy = {split: (features.astype(dtype), labels) for split, (features, labels) in tokens.items()}
        probe = PROBES["seg_linear"](num_classes=card.num_classes, seed=0, **recipe.params)
        probe.fit(*copy["train"], *copy["val"], card.selection_metric)
        metrics[dtype] = metrics_from_confusion(probe.confusion_matrix(*copy["test"]), card.classes)
        epochs[dtype] = probe.selected_params_["epoch"]
    deltas = {name: metrics[np.float16][name] - metrics[np.float32][name] for name in metrics[np.float32]}
    print(json.dumps({"float32": metrics[np.float32], "delta_fp16_minus_fp32": deltas, "epochs": list(epochs.values())},
                     indent=1))
    # Seen: every |delta| below 2e-5, the same best epoch.
    assert max(abs(d) for d in deltas.values()) <= 0.005, deltas
    assert metrics[np.float32]["iou_fg_mean"] > 0.1
