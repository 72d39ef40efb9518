"""Probe protocol: repeated seeds, bootstrap confidence intervals on test."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import assert_one_line_error, run_cli
from evalsuite.bootstrap import _ClassRanks, bootstrap_intervals, weighted_metrics
from evalsuite.metrics import compute_metrics


@pytest.mark.parametrize("labels_present", [(0, 1, 2), (0, 1)])
def test_unit_weights_reproduce_the_scikit_learn_metrics(labels_present):
    rng = np.random.default_rng(1)
    y_true = rng.choice(labels_present, size=80)
    proba = rng.dirichlet([1, 1, 1], size=80)
    proba[:10] = proba[0]  # tied scores, as kNN vote shares give
    ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(3)]
    ours = weighted_metrics(y_true, proba.argmax(axis=1), ranks, np.ones(80), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns when a predicted class is absent from y_true
        reference = compute_metrics(y_true, proba)
    assert ours == pytest.approx(reference, abs=1e-12)


def test_intervals_are_seeded_and_bracket_the_point_estimate():
    rng = np.random.default_rng(2)
    y_true = rng.integers(0, 3, size=150)
    proba = np.eye(3)[np.where(rng.random(150) < 0.7, y_true, rng.integers(0, 3, 150))] * 0.8 + 0.2 / 3
    first, again = bootstrap_intervals(y_true, proba, seed=4), bootstrap_intervals(y_true, proba, seed=4)
    assert first == again and first != bootstrap_intervals(y_true, proba, seed=5)
    point = compute_metrics(y_true, proba)
    for name, (low, high) in first.items():
        assert low <= point[name] <= high and high - low < 0.3


TINY = ["--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0"]


@pytest.mark.slow
def test_seeds_give_one_row_set_each_with_intervals_and_a_summary_with_spread(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", *TINY, "--out", out, "--seeds", "0,1,2")
    assert result.returncode == 0, result.stderr
    board = pd.read_csv(out / "leaderboard.csv")
    assert sorted(board["seed"].unique()) == [0, 1, 2] and board["run_id"].nunique() == 1
    test = board[board["split"] == "test"]
    assert test["ci_low"].notna().all() and (test["ci_low"] <= test["value"] + 1e-9).all()
    assert (test["value"] <= test["ci_high"] + 1e-9).all()
    assert board[board["split"] != "test"]["ci_low"].isna().all()
    linear = test[(test["probe"] == "linear") & (test["metric"] == "balanced_accuracy")]
    assert linear["value"].nunique() > 1  # different seeds, different heads

    again = run_cli("run", *TINY, "--out", tmp_path / "again", "--seed", "1")
    assert again.returncode == 0, again.stderr
    first = {p["probe"]: p["metrics"] for p in _record(out)["probes"] if p["seed"] == 1}
    second = {p["probe"]: p["metrics"] for p in _record(tmp_path / "again")["probes"]}
    assert first == second  # same seed, same numbers

    summary = run_cli("leaderboard", "--out", out)
    assert summary.returncode == 0 and "±" in summary.stdout and ", 3, #1]" in summary.stdout


def _record(out):
    return json.loads(next((out / "runs").glob("*.json")).read_text())


def test_bad_seeds_are_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("run", *TINY, "--out", tmp_path, "--seeds", "0,x"), "--seeds", "'0,x'")
    assert_one_line_error(run_cli("run", *TINY, "--out", tmp_path, "--seeds", "1,1"), "distinct")


def test_simpleshot_improves_with_shots_and_reports_an_interval():
    from evalsuite.probes import FewShotProbe

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1, size=(3, 16))
    labels = np.repeat(np.arange(3), 60)
    features = (centres[labels] + rng.normal(0, 1.5, size=(180, 16))).astype(np.float16)
    split_data = {"train": (features[::2], labels[::2]), "test": (features[1::2], labels[1::2])}
    means, intervals = FewShotProbe(3, shots=[1, 16], support_sets=50, batch_size=32).evaluate(split_data)
    assert means["balanced_accuracy_16shot"] > means["balanced_accuracy_1shot"] + 0.05
    for name, (low, high) in intervals.items():
        assert low <= means[name] <= high


@pytest.mark.slow
def test_fewshot_probe_through_the_cli(tmp_path):
    result = run_cli("run", *TINY, "--out", tmp_path, "--probes", "fewshot")
    assert result.returncode == 0, result.stderr
    board = pd.read_csv(tmp_path / "leaderboard.csv")
    assert set(board["split"]) == {"test"}
    assert {f"balanced_accuracy_{k}shot" for k in (1, 2, 4, 8, 16)} <= set(board["metric"])
    assert ((board["ci_low"] <= board["value"] + 1e-9) & (board["value"] <= board["ci_high"] + 1e-9)).all()
