"""`leaderboard --compare` and rank intervals on segmentation runs, from their stored per-image confusion counts."""

import io

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli

from evalsuite.metrics.segmentation import IGNORE_INDEX, image_confusions, metrics_from_confusion
from evalsuite.reporting.statistics.compare import compare_models
from evalsuite.reporting.table.wide import Filters, build_wide_table
from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows, read_rows
from evalsuite.results.predictions import load_predictions, save_predictions

T1 = "2026-01-02T00:00:00+00:00"
NAMES = ["background", "a", "b"]
IMAGES = 24
RNG = np.random.default_rng(0)
MASKS = RNG.integers(0, 3, (IMAGES, 10, 10))
MASKS[:, 0, 0] = IGNORE_INDEX
CLUSTERS = [f"slide{i // 3}" for i in range(IMAGES)]  # 8 source images of 3 tiles each


def _counts(right: float, seed: int) -> np.ndarray:
    """Per-image confusion counts of a prediction right on about `right` of the pixels."""
    rng = np.random.default_rng(seed)
    prediction = np.where(rng.random(MASKS.shape) < right, MASKS, rng.integers(0, 3, MASKS.shape))
    return image_confusions(MASKS, prediction, 3)


def add_seg_model(out, model: str, per_seed: list, masks_changed: bool = False) -> None:
    """One run per seed: leaderboard rows scored from the summed counts (val = test) and its predictions file."""
    for seed, counts in enumerate(per_seed):
        run_id = f"{model}-seg-{seed}"
        metrics = metrics_from_confusion(counts.sum(axis=0), NAMES)
        append_rows(out / LEADERBOARD_FILE, [
            {"run_id": run_id, "timestamp_utc": T1, "task": "seg", "model": model, "weights_id": "w",
             "probe": "seg_linear", "selected_params": "{}", "split": split, "metric": metric, "value": f"{value:.6f}",
             "seed": seed, "n_samples": IMAGES, "headline_metric": "dice_fg_mean"}
            for split in ("val", "test") for metric, value in metrics.items()])
        if masks_changed:  # another data root: the same number of images, other masks
            counts = counts[::-1]
        save_predictions(out, run_id, None, CLUSTERS, {}, "image", confusions={f"seg_linear/seed{seed}": counts},
                         class_names=NAMES)


@pytest.fixture
def board(tmp_path):
    add_seg_model(tmp_path, "good", [_counts(0.9, 1), _counts(0.9, 2)])
    add_seg_model(tmp_path, "weak", [_counts(0.5, 3)])
    return tmp_path


def _compare(out, a, b, metric=None):
    source = out / LEADERBOARD_FILE
    table = build_wide_table(read_rows(source), "test", metric, Filters(models=(a, b)), str(source))
    return table, compare_models(table, out, a, b, source=str(source), draws=300)


def test_predictions_keep_the_per_image_counts_the_class_names_and_the_masks_pixel_counts(board):
    stored = load_predictions(board, "good-seg-0")
    counts = stored.confusions["seg_linear/seed0"]
    assert counts.dtype == np.int64 and np.array_equal(counts, _counts(0.9, 1)) and stored.probas == {}
    assert stored.class_names == NAMES and stored.cluster_unit == "image" and stored.clusters[3] == "slide1"
    # labels: each image's labelled pixels per class (99 per image: one ignored pixel).
    assert stored.labels.shape == (IMAGES, 3) and np.array_equal(stored.labels, counts.sum(axis=2))
    assert set(stored.labels.sum(axis=1)) == {99}


def test_a_clearly_better_segmenter_is_significant_over_resampled_images(board):
    table, comparison = _compare(board, "good", "weak")
    [task] = comparison.tasks
    cells = {row.model: row.cells["seg"] for row in table.rows}
    # The compared scores are the wide table's cells: good's dice_fg_mean averaged over its two seeds.
    assert task.result.a == pytest.approx(cells["good"].mean, abs=1e-6)
    assert task.result.b == pytest.approx(cells["weak"].mean, abs=1e-6)
    assert (task.metric, task.clusters, task.result.method) == ("dice_fg_mean", "8 image", "bootstrap")
    # Every one of the 300 draws favours good: p = 2 (1 + 0) / (300 + 1).
    assert task.result.low > 0 and task.result.p_value == pytest.approx(2 / 301) and task.verdict == "good better"
    _, itself = _compare(board, "good", "good", metric="iou_a")  # a per-class metric, by the card's class names
    assert (itself.tasks[0].result.difference, itself.tasks[0].result.p_value) == (0.0, 1.0)


def test_the_cli_prints_the_segmentation_comparison_and_rank_intervals(board):
    result = run_cli("leaderboard", "--out", board, "--compare", "good", "weak")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("seg "))
    # 1000 draws, all favouring good: the task's own p = 2 / 1001 (two-sided), the step-down p = 1 / 1001.
    assert "dice_fg_mean" in line and "8 image" in line and "0.001998  0.000999  good better" in line
    table = run_cli("leaderboard", "--out", board, "--format", "csv")
    wide = pd.read_csv(io.StringIO(table.stdout)).set_index("model")
    assert (wide.loc["good", "seg_rank_low"], wide.loc["good", "seg_rank_high"]) == (1, 1)
    assert (wide.loc["weak", "seg_rank_low"], wide.loc["weak", "seg_rank_high"]) == (2, 2)


def test_segmentation_runs_on_other_masks_are_not_compared(tmp_path):
    add_seg_model(tmp_path, "good", [_counts(0.9, 1)])
    add_seg_model(tmp_path, "moved", [_counts(0.9, 2)], masks_changed=True)
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path, "--compare", "good", "moved"),
                          "share no test items on task 'seg'")
