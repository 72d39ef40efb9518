"""Slide-level zero-shot (MI-Zero, issue 42) through the CLI: `evalsuite run --task demo_slide --model
quiltnet-b-32 --random-init --probes mizero` (random weights, the real tokenizer), its rows with intervals over
slides, its stored test predictions, the chance-level note, and a paired `--compare` against a mean-pool probe of
the same model, which reads the same tile caches.

Cost: one extraction of the demo slides' 608 tiles by a ViT-B/32 (QuiltNet's: a quarter of a ViT-B/16's FLOPs per
tile; the probe's path is the same for every vision-language model). The meanpool run reads the caches and fits a
linear model on 24 slide vectors."""


import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, run_record

pytestmark = pytest.mark.slow
pytest.importorskip("open_clip")

MODEL = "quiltnet-b-32+random-init"
MEANPOOL = "quiltnet-b-32-meanpool"  # a label: the wide table keeps one probe per model row
TEST_SLIDES = 16


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mizero_demo_slide")
    common = ["--task", "demo_slide", "--model", "quiltnet-b-32", "--random-init", "--out", out]
    mizero = run_cli("run", *common, "--probes", "mizero", timeout=1800)
    assert mizero.returncode == 0, mizero.stderr
    meanpool = run_cli("run", *common, "--probes", "meanpool", "--label", MEANPOOL)
    assert meanpool.returncode == 0, meanpool.stderr
    return out, mizero, meanpool


def test_the_run_says_its_numbers_are_chance_level_and_records_k_chosen_on_val(runs):
    out, mizero, meanpool = runs
    assert "numbers are chance level" in mizero.stdout and "chance level" not in meanpool.stdout
    (probe,) = run_record(out, mizero)["probes"]
    params = probe["selected_params"]
    assert params["trained_on"] == "nothing (zero-shot)" and params["prompts"] == 36
    assert params["topj"] in (1, 5, 10, 50, 100)
    by_k = params["val_by_prompt_set_and_topj"]["templates"]
    assert set(by_k) == {"1", "5", "10", "50", "100"}
    assert params["val_balanced_accuracy"] == max(by_k.values()) == by_k[str(params["topj"])]
    # Every demo slide has 10-14 tiles: K = 50 and 100 are both the mean of all tiles, so they score alike.
    assert by_k["50"] == by_k["100"]


def test_test_predictions_are_stored_one_row_per_slide(runs):
    out, mizero, _ = runs
    record = run_record(out, mizero)
    stored = np.load(out / "runs" / record["predictions"]["file"])
    assert list(stored["proba_keys"]) == ["mizero/seed0"]
    assert stored["labels"].shape == (TEST_SLIDES,) and stored["proba_0"].shape == (TEST_SLIDES, 2)
    np.testing.assert_allclose(stored["proba_0"].sum(axis=1), 1.0, rtol=1e-5)


def test_leaderboard_rows_carry_intervals_over_slides(runs):
    out, mizero, _ = runs
    board = pd.read_csv(out / "leaderboard.csv")
    test = board[(board["probe"] == "mizero") & (board["split"] == "test")]
    assert set(test["metric"]) >= {"balanced_accuracy", "f1_macro", "auroc_macro_ovr", "ece", "brier", "nll"}
    assert (test["n_samples"] == TEST_SLIDES).all()
    assert test["ci_low"].notna().all() and test["ci_high"].notna().all()
    assert (test["ci_low"] <= test["value"] + 1e-9).all() and (test["value"] <= test["ci_high"] + 1e-9).all()
    assert run_record(out, mizero)["probes"][0]["intervals_95_unit"] == "patient"


def test_the_meanpool_run_reuses_the_tile_caches_and_compare_works(runs):
    out, mizero, meanpool = runs
    # mizero read val (its five Ks are chosen there) and test, and extracted those; meanpool read their caches under
    # the same keys and extracted train, for its fit (issue 49: a run extracts the splits its probes read).
    first, second = run_record(out, mizero), run_record(out, meanpool)
    assert set(first["cache"]["keys"]) == {"val", "test"}
    assert all(second["cache"]["keys"][split] == key for split, key in first["cache"]["keys"].items())
    assert second["samples_extracted"]["val"] == 0 and second["samples_extracted"]["test"] == 0
    assert second["samples_extracted"]["train"] > 0
    result = run_cli("leaderboard", "--out", out, "--compare", MODEL, MEANPOOL)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("demo_slide ")], result.stdout
