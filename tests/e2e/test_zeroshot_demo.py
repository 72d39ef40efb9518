"""The offline zero-shot demo of issue 42 through the CLI: `evalsuite run --task demo --model clip-vit-b-16
--random-init --probes zeroshot` (random weights, the real tokenizer), its rows and stored predictions, and a
paired `--compare` against a linear probe of the same model, which reuses the same image caches.

One extraction of the demo's 551 tiles by a ViT-B/16 is this file's cost (the linear run reads the cache)."""

import json

import pandas as pd
import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow
pytest.importorskip("open_clip")

MODEL = "clip-vit-b-16+random-init"
LINEAR = "clip-vit-b-16-linear"  # a label: the wide table keeps one probe per model row, chosen on val


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("zeroshot_demo")
    zeroshot = run_cli("run", "--task", "demo", "--model", "clip-vit-b-16", "--random-init", "--probes", "zeroshot",
                       "--out", out)
    assert zeroshot.returncode == 0, zeroshot.stderr
    linear = run_cli("run", "--task", "demo", "--model", "clip-vit-b-16", "--random-init", "--probes", "linear",
                     "--label", LINEAR, "--out", out)
    assert linear.returncode == 0, linear.stderr
    return out, zeroshot, linear


def _record(out, result) -> dict:
    summary = next(line.split() for line in result.stdout.splitlines() if line.startswith("task "))
    return json.loads((out / "runs" / f"{summary[summary.index('run') + 1]}.json").read_text())


def test_the_demo_says_its_numbers_are_chance_level_and_stores_test_predictions(runs):
    out, zeroshot, linear = runs
    assert "numbers are chance level" in zeroshot.stdout and "chance level" not in linear.stdout
    record = _record(out, zeroshot)
    (probe,) = record["probes"]
    assert probe["selected_params"]["trained_on"] == "nothing (zero-shot)"
    assert probe["selected_params"]["prompts"] == 54
    assert record["predictions"], record.keys()  # the test probabilities a paired comparison reads
    # Random towers: balanced accuracy within chance's reach for 3 classes.
    assert 0.15 < probe["metrics"]["test"]["balanced_accuracy"] < 0.55


def test_leaderboard_rows_of_the_zeroshot_run_carry_intervals(runs):
    out, _, _ = runs
    board = pd.read_csv(out / "leaderboard.csv")
    test = board[(board["probe"] == "zeroshot") & (board["split"] == "test")]
    assert set(test["metric"]) >= {"balanced_accuracy", "f1_macro", "auroc_macro_ovr", "ece", "brier", "nll"}
    assert test["ci_low"].notna().all() and test["ci_high"].notna().all()
    assert (test["ci_low"] <= test["value"] + 1e-9).all() and (test["value"] <= test["ci_high"] + 1e-9).all()


def test_the_linear_run_of_the_same_model_reuses_the_image_caches(runs):
    out, zeroshot, linear = runs
    assert _record(out, zeroshot)["cache"]["keys"] == _record(out, linear)["cache"]["keys"]
    assert sum(_record(out, linear)["samples_extracted"].values()) == 0


def test_compare_of_the_zeroshot_run_against_a_linear_probe_of_the_same_model(runs):
    out, _, _ = runs
    result = run_cli("leaderboard", "--out", out, "--compare", MODEL, LINEAR)
    assert result.returncode == 0, result.stderr
    (demo_line,) = [line for line in result.stdout.splitlines() if line.startswith("demo ")]
    assert demo_line.endswith(f"{LINEAR} better"), result.stdout


def test_the_report_shows_the_zeroshot_cell_like_any_other(runs):
    out, zeroshot, _ = runs
    result = run_cli("report", "--out", out, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    score = _record(out, zeroshot)["probes"][0]["metrics"]["test"]["balanced_accuracy"]
    (row,) = [line for line in result.stdout.splitlines() if line.startswith(f"| {MODEL}")]
    assert f"{score:.3f} [" in row, row  # the score and its interval, as in every other cell
