"""Segmentation runs through the CLI: test rows carry bootstrap intervals over PanNuke tissue types, the run stores
its per-image confusion counts, and `leaderboard --compare` tests two segmentation runs on them.

The fixture is PanNuke's layout with 8 test tiles of 4 tissue types (Breast, Colon, Lung, Skin, twice each: the
fewest an interval needs, docs/significance.md "Few clusters"); the
backbones are timm's tiny test ViTs with random weights and the linear head runs 2 epochs: this checks the
plumbing, not a model."""

import json

import numpy as np
import pytest
from conftest import leaderboard_rows, make_pannuke, run_cli

from evalsuite.metrics.bootstrap import task_draw_seed
from evalsuite.metrics.segmentation import metrics_from_confusion, segmentation_draw_scores
from evalsuite.metrics.shown_intervals import shown_interval
from evalsuite.tasks.cards import load_card

pytestmark = pytest.mark.slow
MODELS = ("test_vit", "test_vit2")
TISSUES = ("Breast", "Colon", "Lung", "Skin")
TYPES = list(TISSUES) * 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("seg_runs")
    data = make_pannuke(root / "data", counts=(3, 2, 8), tissues=TISSUES)
    recipe = root / "seg_linear_tiny.yaml"
    recipe.write_text("name: seg_linear\nprobe: seg_linear\nparams: {epochs: 2, batch_size: 8}\n")
    for model in MODELS:
        result = run_cli("run", "--task", "pannuke", "--data-root", data, "--out", root / "out", "--probes", recipe,
                         "--model", model, "--random-init", "--num-workers", "0", "--no-count-check",
                         "--batch-size", "16")
        assert result.returncode == 0, result.stderr
    return root / "out"


def _record(out, model: str) -> dict:
    for path in (out / "runs").glob("*.json"):
        record = json.loads(path.read_text())
        if record["model"]["name"] == f"{model}+random-init":
            return record
    raise AssertionError(f"no run of {model}")


def test_test_rows_carry_intervals_and_the_run_json_names_the_tissue_type_unit(runs):
    rows = [row for row in leaderboard_rows(runs) if row["model"] == "test_vit+random-init"]
    test = {row["metric"]: row for row in rows if row["split"] == "test"}
    assert set(test) == set(metrics_from_confusion(np.eye(6), load_card("pannuke").classes))
    for row in test.values():  # every Dice and IoU has an interval (nan where no draw defines the class's score)
        assert row["ci_low"] != "" and row["ci_high"] != ""
        assert row["ci_low"] == "nan" or float(row["ci_low"]) <= float(row["ci_high"])
    assert float(test["dice_fg_mean"]["ci_low"]) < float(test["dice_fg_mean"]["ci_high"])
    assert all(row["ci_low"] == "" for row in rows if row["split"] == "val")
    [probe] = _record(runs, "test_vit")["probes"]
    assert probe["intervals_95_unit"] == "tissue type"
    assert probe["intervals_95"]["test"]["dice_fg_mean"] == pytest.approx(
        [float(test["dice_fg_mean"]["ci_low"]), float(test["dice_fg_mean"]["ci_high"])], abs=1e-6)


def test_the_stored_per_image_counts_reproduce_the_metric_and_its_interval(runs):
    record = _record(runs, "test_vit")
    stored = np.load(runs / "runs" / record["predictions"]["file"])
    assert [str(k) for k in stored["confusion_keys"]] == ["seg_linear/seed0"] == record["predictions"]["keys"]
    counts = stored["confusion_0"]
    assert counts.shape == (8, 6, 6) and list(stored["clusters"]) == TYPES and str(stored["cluster_unit"]) == \
        "tissue type"
    classes = record["task"]["classes"]
    metrics = metrics_from_confusion(counts.sum(axis=0), classes)
    probe = record["probes"][0]
    for name, value in probe["metrics"]["test"].items():
        assert np.isnan(value) and np.isnan(metrics[name]) or value == pytest.approx(metrics[name]), name
    # The interval is the bootstrap over the tissue types of these counts, drawn with the task's seed, read for 4.
    drawn = segmentation_draw_scores(counts, classes, TYPES, seed=task_draw_seed("pannuke"))["dice_fg_mean"]
    assert list(shown_interval(metrics["dice_fg_mean"], drawn, 4, "dice_fg_mean").bounds) == \
        pytest.approx(probe["intervals_95"]["test"]["dice_fg_mean"])


def test_compare_gives_a_paired_bootstrap_p_value_over_tissue_types(runs):
    result = run_cli("leaderboard", "--out", runs, "--compare", "test_vit+random-init", "test_vit2+random-init")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("pannuke"))
    fields = line.split()
    assert fields[1:5] == ["dice_fg_mean", "8", "4", "tissue"] and "bootstrap" in fields
    p_value = float(fields[fields.index("bootstrap") + 1])
    assert 2 / 1001 - 1e-6 <= p_value <= 1
