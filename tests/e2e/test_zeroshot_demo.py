"""The offline zero-shot demo of issue 42 through the CLI: `evalsuite run --task demo --model clip-vit-b-16
--random-init --probes zeroshot` (random weights, the real tokenizer), its rows and stored predictions, a
paired `--compare` against the demo's own linear probe (EfficientNet-Lite0, on the same 112 test tiles), and
`--probes text_retrieval` on the zero-shot run's cache (recall@k both ways from the card's class texts).

One extraction of the demo's 112 test tiles by a ViT-B/16 is this file's cost: a zero-shot probe reads test alone
(issue 49). That a linear probe of the same vision-language model reuses the zero-shot run's test cache and
extracts only train and val is tested on a 20-tile card (tests/e2e/test_zeroshot_extracts_test_only.py) and with
CONCH's projection (tests/models/test_vlm_conch.py)."""


import pandas as pd
import pytest
from conftest import run_cli, run_record

pytestmark = pytest.mark.slow
pytest.importorskip("open_clip")

MODEL = "clip-vit-b-16+random-init"
LINEAR = "efficientnet-linear"  # a label: the wide table keeps one probe per model row, chosen on val
RETRIEVAL = "clip-vit-b-16-retrieval"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("zeroshot_demo")
    zeroshot = run_cli("run", "--task", "demo", "--model", "clip-vit-b-16", "--random-init", "--probes", "zeroshot",
                       "--out", out)
    assert zeroshot.returncode == 0, zeroshot.stderr
    linear = run_cli("run", "--task", "demo", "--probes", "linear", "--label", LINEAR, "--out", out)
    assert linear.returncode == 0, linear.stderr
    return out, zeroshot, linear


@pytest.fixture(scope="module")
def retrieval(runs):
    """`--probes text_retrieval` on the same caches (image and prompt texts): no forward of its own."""
    out = runs[0]
    result = run_cli("run", "--task", "demo", "--model", "clip-vit-b-16", "--random-init", "--probes",
                     "text_retrieval", "--label", RETRIEVAL, "--out", out)
    assert result.returncode == 0, result.stderr
    return out, result


def test_the_demo_says_its_numbers_are_chance_level_and_stores_test_predictions(runs):
    out, zeroshot, linear = runs
    assert "numbers are chance level" in zeroshot.stdout and "chance level" not in linear.stdout
    record = run_record(out, zeroshot)
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


def test_the_zero_shot_demo_extracts_the_test_split_only(runs):
    """The README's and docs/zeroshot.md's offline command: 112 test tiles embedded, not the demo's 551 (issue 49)."""
    out, zeroshot, _ = runs
    record = run_record(out, zeroshot)
    assert record["samples_extracted"] == {"test": 112} and set(record["cache"]["keys"]) == {"test"}
    assert record["distributed"]["samples_extracted_per_rank"] == {"test": [112]}


def test_compare_of_the_zeroshot_run_against_a_linear_probe(runs):
    out, _, _ = runs
    result = run_cli("leaderboard", "--out", out, "--compare", MODEL, LINEAR)
    assert result.returncode == 0, result.stderr
    (demo_line,) = [line for line in result.stdout.splitlines() if line.startswith("demo ")]
    assert demo_line.endswith(f"{LINEAR} better"), result.stdout


def test_the_report_shows_the_zeroshot_cell_like_any_other(runs):
    out, zeroshot, _ = runs
    result = run_cli("report", "--out", out, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    score = run_record(out, zeroshot)["probes"][0]["metrics"]["test"]["balanced_accuracy"]
    (row,) = [line for line in result.stdout.splitlines() if line.startswith(f"| {MODEL}")]
    assert f"{score:.3f} [" in row, row  # the score and its interval, as in every other cell


def test_text_retrieval_scores_recall_both_ways_from_class_texts_with_intervals(retrieval):
    out, result = retrieval
    record = run_record(out, result)
    assert sum(record["samples_extracted"].values()) == 0  # the zeroshot run's image caches
    (probe,) = record["probes"]
    params = probe["selected_params"]
    assert params["texts"] == "class_texts" and params["prompts"] == 54
    assert params["trained_on"] == "nothing (zero-shot)"
    assert params["image_to_text_ks_left_out"] == [5, 10]  # 3 class texts: recall@5 and @10 would be 1 by construction
    test = probe["metrics"]["test"]
    assert set(test) == {"image_to_text_recall@1", "text_to_image_recall@1", "text_to_image_recall@5",
                         "text_to_image_recall@10"}
    assert 0.1 < test["image_to_text_recall@1"] < 0.6  # random towers: near chance (1/3) top-1 accuracy
    board = pd.read_csv(out / "leaderboard.csv")
    rows = board[(board["probe"] == "text_retrieval") & (board["split"] == "test")]
    assert set(rows["metric"]) == set(test) and rows["ci_low"].notna().all()
    assert ((rows["ci_low"] <= rows["value"] + 1e-9) & (rows["value"] <= rows["ci_high"] + 1e-9)).all()
    assert "chance level" in result.stdout  # random weights say so, as the zeroshot probe's run does
