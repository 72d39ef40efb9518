"""The demo task end to end through the CLI, as the README's first command runs it."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import leaderboard_rows, library_warnings, run_cli

from evalsuite.results.leaderboard import COLUMNS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    """One output folder holding a pretrained run, a random-init run and a repeated pretrained run."""
    out = tmp_path_factory.mktemp("demo_out")
    runs = {}
    for name, extra in [("pretrained", []), ("random", ["--random-init", "--plots"]), ("repeat", [])]:
        result = run_cli("run", "--task", "demo", "--out", out, *extra)
        assert result.returncode == 0, result.stderr
        summary = next(line.split() for line in result.stdout.splitlines() if line.startswith("task "))
        run_id = summary[summary.index("run") + 1]
        runs[name] = json.loads((out / "runs" / f"{run_id}.json").read_text())
        runs[name]["stderr"] = result.stderr
    return out, runs


def test_normal_runs_print_no_library_warnings(demo_out):
    """The kNN probe used to make torch warn about a non-writable NumPy array on every run."""
    _, runs = demo_out
    for name, record in runs.items():
        assert not library_warnings(record["stderr"]), (name, library_warnings(record["stderr"]))


def _test_score(record: dict, probe: str, metric: str = "balanced_accuracy") -> float:
    return next(p["metrics"]["test"][metric] for p in record["probes"] if p["probe"] == probe)


def test_leaderboard_loads_with_pandas_and_has_documented_columns(demo_out):
    out, _ = demo_out
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board.columns) == COLUMNS
    # 3 runs x 2 probes x 3 splits x (4 accuracy + 4 calibration metrics)
    assert len(board) == 3 * 2 * 3 * 8
    assert set(board["metric"]) == {"balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr", "ece", "mce",
                                    "brier", "nll"}
    bounded = board[~board["metric"].isin(["brier", "nll"])]  # Brier is 0..2, NLL unbounded
    assert bounded["value"].between(0, 1).all() and board["value"].ge(0).all()
    assert board[board["metric"] == "brier"]["value"].le(2).all()
    assert set(board["model"]) == {"efficientnet_lite0_imagenet", "efficientnet_lite0_imagenet+random-init"}


def test_pretrained_beats_random_init_on_linear_probe(demo_out):
    _, runs = demo_out
    pretrained = _test_score(runs["pretrained"], "linear")
    random_init = _test_score(runs["random"], "linear")
    # Seen: 0.81 vs 0.64. A real ImageNet representation must clearly beat random conv features.
    assert pretrained - random_init > 0.08, (pretrained, random_init)


def test_second_identical_run_does_no_forward_pass_and_repeats_the_numbers(demo_out):
    _, runs = demo_out
    assert sum(runs["pretrained"]["samples_extracted"].values()) > 500
    assert runs["repeat"]["samples_extracted"] == {"train": 0, "val": 0, "test": 0}
    for first, again in zip(runs["pretrained"]["probes"], runs["repeat"]["probes"]):
        assert first["metrics"] == again["metrics"]


def test_cache_on_disk_is_float16_with_int_labels(demo_out):
    out, _ = demo_out
    caches = [p for p in (out / "cache").iterdir() if not p.name.startswith(".")]
    assert run_cli("cache", "verify", "--out", out).returncode == 0
    # train/val/test for the pretrained and the random-init backbone
    assert len(caches) == 6
    for folder in caches:
        features = np.load(folder / "features.npy", mmap_mode="r")
        labels = np.load(folder / "labels.npy")
        assert features.dtype == np.float16
        assert features.shape == (len(labels), 1280)
        assert labels.dtype == np.int64 and set(np.unique(labels)) <= {0, 1, 2}
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["dtype"] == "float16" and manifest["fields"]["dtype"] == "float16" and manifest["complete"]


def test_leaderboard_command_prints_model_by_task_table(demo_out):
    out, _ = demo_out
    result = run_cli("leaderboard", "--out", out)
    assert result.returncode == 0, result.stderr
    table = result.stdout
    assert "demo" in table and "efficientnet_lite0_imagenet+random-init" in table
    assert f"{_test_score(demo_out[1]['pretrained'], 'linear'):.4f}" in table


def test_results_json_records_what_reproduces_the_run(demo_out):
    _, runs = demo_out
    record = runs["pretrained"]
    assert record["model"]["weights_id"].startswith("sha256:")
    assert len(record["task"]["sha256"]) == 64
    assert {"torch", "timm", "numpy", "scikit-learn"} <= set(record["versions"])
    linear = next(p for p in record["probes"] if p["probe"] == "linear")
    assert {"lr", "weight_decay"} <= set(linear["selected_params"])
    recipe_file = Path(linear["recipe_path"])
    assert recipe_file.name == "linear.yaml"
    assert linear["recipe_sha256"] == hashlib.sha256(recipe_file.read_bytes()).hexdigest()
    assert leaderboard_rows(demo_out[0])[0]["run_id"] == record["run_id"]


def test_throughput_is_recorded_in_the_run_json_and_every_leaderboard_row(demo_out):
    out, runs = demo_out
    measured = runs["pretrained"]["throughput"]
    assert measured["throughput_img_s"] > 0 and measured["forward_img_s"] >= measured["throughput_img_s"]
    assert measured["device_name"] and measured["device_hours_est"] > 0 and measured["host_load_1m"] >= 0
    # Issue 41: one architecture, one cost, whatever the weights (and the rates the host allowed each run).
    assert runs["random"]["cost"] == runs["pretrained"]["cost"] and runs["pretrained"]["cost"]["gflops_per_image"] > 0
    assert {split: r["images"] for split, r in measured["splits"].items()} == \
        {split: n for split, n in zip(("train", "val", "test"), (333, 106, 112))}
    # The cached rerun forwarded nothing: it reports what the extraction of its caches measured.
    assert runs["repeat"]["throughput"] == measured
    board = pd.read_csv(out / "leaderboard.csv")
    assert board["throughput_img_s"].gt(0).all() and board["device_name"].notna().all()
    result = run_cli("leaderboard", "--out", out, "--metric", "throughput_img_s")
    assert result.returncode == 0, result.stderr
    assert f"{measured['throughput_img_s']:.4f}"[:5] in result.stdout


def test_compare_finds_pretrained_significantly_better_on_linear_and_no_difference_with_itself(demo_out):
    out, _ = demo_out
    pretrained, random_init = "efficientnet_lite0_imagenet", "efficientnet_lite0_imagenet+random-init"
    result = run_cli("leaderboard", "--out", out, "--probe", "linear", "--compare", pretrained, random_init)
    assert result.returncode == 0, result.stderr
    (demo_line,) = [line for line in result.stdout.splitlines() if line.startswith("demo ")]
    assert demo_line.endswith(f"{pretrained} better"), result.stdout
    itself = run_cli("leaderboard", "--out", out, "--probe", "linear", "--compare", pretrained, pretrained)
    assert itself.returncode == 0, itself.stderr
    (demo_line,) = [line for line in itself.stdout.splitlines() if line.startswith("demo ")]
    assert demo_line.endswith("no significant difference") and "+0.0000" in demo_line, itself.stdout


def test_calibration_rows_are_ranked_lower_first_and_have_intervals(demo_out):
    out, runs = demo_out
    linear = next(p for p in runs["pretrained"]["probes"] if p["probe"] == "linear")
    assert set(linear["intervals_95"]["test"]) >= {"ece", "mce", "brier", "nll"}
    result = run_cli("leaderboard", "--out", out, "--metric", "ece", "--probe", "linear")
    assert result.returncode == 0, result.stderr
    eces = {model: _test_score(runs[name], "linear", "ece")
            for name, model in [("pretrained", "efficientnet_lite0_imagenet"),
                                ("random", "efficientnet_lite0_imagenet+random-init")]}
    best = min(eces, key=eces.get)
    (best_line,) = [line for line in result.stdout.splitlines() if line.startswith(best + " ")]
    assert ", #1" in best_line, result.stdout


def test_every_run_stores_its_test_predictions_for_paired_comparisons(demo_out):
    out, runs = demo_out
    record = runs["pretrained"]
    stored = np.load(out / "runs" / record["predictions"]["file"])
    assert list(stored["proba_keys"]) == ["knn/seed0", "linear/seed0"]
    assert stored["labels"].shape == (112,) and stored["proba_0"].shape == (112, 3)
    np.testing.assert_allclose(stored["proba_1"].sum(axis=1), 1.0, rtol=1e-5)


def test_plots_flag_saves_a_reliability_diagram_per_probe_and_seed(demo_out):
    out, runs = demo_out
    plots = [Path(p) for p in runs["random"]["plots"]]
    assert sorted(p.name.split(".", 1)[1] for p in plots) == ["knn.seed0.reliability.png",
                                                             "linear.seed0.reliability.png"]
    for plot in plots:
        assert plot.parent == out / "runs" and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plots" not in runs["pretrained"]  # only on request

