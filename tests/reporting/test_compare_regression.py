"""Regression runs store their test predictions, so `leaderboard --compare`, the best-set marks and the rank intervals
work on regression columns (demo_counts, through the CLI); `--compare` on mixed kinds skips what it cannot test."""

import io
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli
from scipy.stats import pearsonr

from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, task_draw_seed
from evalsuite.metrics.few_clusters import widened
from evalsuite.results.folds import merge_folds
from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows
from evalsuite.results.predictions import NoPredictions, load_predictions

TINY = ["--task", "demo_counts", "--model", "test_vit", "--random-init", "--num-workers", "0", "--precision", "fp32"]
CLS, MEAN = "test_vit+random-init", "vit_mean"  # the same random ViT, its class token or its mean patch token


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Two models on demo_counts (125 test tiles in 5 blocks): CLS with seeds 0 and 1 (ridge: equal), MEAN one."""
    out = tmp_path_factory.mktemp("regression") / "out"
    runs = {}
    for model, extra in ((CLS, ["--seeds", "0,1"]), (MEAN, ["--pooling", "mean_patch", "--label", MEAN])):
        result = run_cli("run", *TINY, *extra, "--out", out)
        assert result.returncode == 0, result.stderr
        written = next(line.split("results: ", 1)[1] for line in result.stdout.splitlines()
                       if line.startswith("results: "))
        runs[model] = json.loads(Path(written).read_text())  # --out is absolute: so is the path printed
    return out, runs


def _wide(out) -> pd.DataFrame:
    result = run_cli("leaderboard", "--out", out, "--format", "csv")
    assert result.returncode == 0, result.stderr
    return pd.read_csv(io.StringIO(result.stdout)).set_index("model")


def _independent_pearson_draws(targets, predicted, clusters) -> np.ndarray:
    """Mean Pearson r over targets (scipy) of the items each of demo_counts' draws takes (its task_draw_seed): its
    clusters with replacement."""
    _, cluster_of_item = np.unique(clusters, return_inverse=True)
    count, rng, found = cluster_of_item.max() + 1, np.random.default_rng(task_draw_seed("demo_counts")), []
    for _ in range(BOOTSTRAP_DRAWS):
        taken = np.bincount(rng.integers(0, count, size=count), minlength=count)[cluster_of_item]
        rows = np.repeat(np.arange(len(targets)), taken)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a target constant on a draw: NaN, left out of its mean
            per_target = [pearsonr(targets[rows, j], predicted[rows, j])[0] for j in range(targets.shape[1])]
        found.append(np.nanmean(per_target) if not np.isnan(per_target).all() else np.nan)
    return np.array(found)


def test_a_regression_run_stores_each_test_items_predicted_targets(board):
    out, runs = board
    record = runs[CLS]
    stored = load_predictions(out, record["run_id"])
    assert record["predictions"]["keys"] == ["ridge/seed0", "ridge/seed1"] and stored.probas == {}
    assert stored.labels.dtype == np.float32 and stored.labels.shape == (125, 3) and stored.cluster_unit == "block"
    predicted = stored.predictions["ridge/seed0"]
    assert predicted.dtype == np.float32 and predicted.shape == (125, 3)
    observed = np.mean([pearsonr(stored.labels[:, j], predicted[:, j])[0] for j in range(3)])
    assert observed == pytest.approx(record["probes"][0]["metrics"]["test"]["pearson"], abs=1e-5)


def test_the_column_interval_is_the_runs_own_and_an_independent_recomputations(board):
    out, runs = board
    wide = _wide(out)
    stored = load_predictions(out, runs[MEAN]["run_id"])
    drawn = _independent_pearson_draws(stored.labels.astype(np.float64), stored.predictions["ridge/seed0"],
                                       stored.clusters)
    predicted = stored.predictions["ridge/seed0"].astype(np.float64)
    observed = np.mean([pearsonr(stored.labels[:, j], predicted[:, j])[0] for j in range(3)])
    expected = np.nanpercentile(widened(drawn, observed, 5), [2.5, 97.5])  # 5 blocks: read with t(4)
    found = (wide.loc[MEAN, "demo_counts_ci_low"], wide.loc[MEAN, "demo_counts_ci_high"])
    assert found == pytest.approx(tuple(expected), abs=2e-6)  # the CSV's 6 decimals
    assert found == pytest.approx(tuple(runs[MEAN]["probes"][0]["intervals_95"]["test"]["pearson"]), abs=2e-6)
    # Every model of the column has its rank interval and best-set membership (both were "?" before).
    assert wide["demo_counts_rank_low"].notna().all() and wide["demo_counts_in_best_set"].notna().all()


def test_leaderboard_compare_tests_the_regression_column(board):
    out, _ = board
    result = run_cli("leaderboard", "--out", out, "--compare", MEAN, CLS)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("demo_counts "))
    assert line.split()[1:4] == ["pearson", "125", "5"] and " block " in line and " bootstrap " in line
    wide = _wide(out)
    assert float(line.split()[7]) == pytest.approx(wide.loc[MEAN, "demo_counts"] - wide.loc[CLS, "demo_counts"],
                                                   abs=1e-4)
    assert "not compared" not in result.stdout


def test_the_report_marks_the_regression_column_with_no_untested_note(board):
    out, _ = board
    result = run_cli("report", "--out", out)
    assert result.returncode == 0, result.stderr
    page = (out / "report.html").read_text()
    assert 'class="untested" title=' not in page  # no cell marked "?" (the legend explains the mark)
    assert "demo_counts not tested" not in page
    assert 'title="in the 95 % best set' in page and "#1 (" in page


def test_compare_on_mixed_kinds_compares_what_it_can_and_says_what_it_skipped(board, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(board[0], out, ignore=shutil.ignore_patterns("cache"))
    # A survival task (c_index: no per-item form) and a classification task whose runs predate stored predictions.
    for task, metric, probe in (("surv", "c_index", "cox"), ("old", "balanced_accuracy", "linear")):
        for model, value in ((CLS, 0.61), (MEAN, 0.64)):
            append_rows(out / LEADERBOARD_FILE, [
                {"run_id": f"{model}-{task}", "timestamp_utc": "2026-01-02T00:00:00+00:00", "task": task,
                 "model": model, "probe": probe, "split": split, "metric": metric, "value": value, "seed": 0,
                 "headline_metric": metric} for split in ("val", "test")])
    result = run_cli("leaderboard", "--out", out, "--compare", MEAN, CLS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("demo_counts ") for line in lines) and "over the 1 task(s)" in result.stdout
    skipped = {line.split(": ")[1]: line for line in lines if line.startswith("not compared: ")}
    assert "c_index on task 'surv' is not computed from per-item predictions" in skipped["surv"]
    assert "has no test predictions" in skipped["old"] and "rerun it" in skipped["old"]


def test_a_cross_validated_run_keeps_no_folds_predictions_and_says_a_rerun_will_not_help(tmp_path):
    from evalsuite.results.beside_run import PER_ITEM_OUTPUTS  # in the test: the module is collected on any tree

    splits = ("train", "val", "test")
    per_fold = [[{"probe": "ridge", "seed": 0, "metrics": {s: {"pearson": 0.5 + fold} for s in splits},
                  "selected_params": {}, "test_predictions": np.zeros((3, 2), np.float32)}] for fold in range(2)]
    assert not set(PER_ITEM_OUTPUTS) & set(merge_folds(per_fold)[0])
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "hest.json").write_text(json.dumps({"run_id": "hest", "folds": [{"fold": 0}]}))
    with pytest.raises(NoPredictions) as missing:
        load_predictions(tmp_path, "hest")
    assert "mean over folds" in missing.value.why and "rerun it" not in missing.value.why


def test_integer_cluster_ids_are_stored_as_integers_and_still_match_an_older_files_strings(tmp_path):
    from evalsuite.reporting.statistics.cell_draws import same_items
    from evalsuite.results.predictions import save_predictions

    targets, blocks = np.arange(12, dtype=np.float64).reshape(6, 2), [10, 10, 2, 2, 104, 104]
    save_predictions(tmp_path, "new", targets, blocks, {}, "block", predictions={"ridge/seed0": targets})
    save_predictions(tmp_path, "old", targets, [str(b) for b in blocks], {}, "block",
                     predictions={"ridge/seed0": targets})
    new, old = load_predictions(tmp_path, "new"), load_predictions(tmp_path, "old")
    # As integers they sort 2 < 10 < 104, as the run's own draws numbered them; as strings "10" < "104" < "2".
    assert new.clusters.dtype == np.int64 and old.clusters.dtype.kind == "U" and same_items(new, old)
