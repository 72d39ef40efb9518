"""Probe protocol: repeated seeds, bootstrap confidence intervals on test (over tiles or reader clusters)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, library_warnings, noisy_class_split, run_cli

from evalsuite.metrics.bootstrap import _ClassRanks, weighted_metrics
from evalsuite.metrics.calibration import CalibrationItems
from evalsuite.metrics.classification import compute_metrics
from evalsuite.metrics.intervals import bootstrap_intervals


@pytest.mark.parametrize("labels_present", [(0, 1, 2), (0, 1)])
def test_unit_weights_reproduce_the_scikit_learn_metrics(labels_present):
    rng = np.random.default_rng(1)
    y_true = rng.choice(labels_present, size=80)
    proba = rng.dirichlet([1, 1, 1], size=80)
    proba[:10] = proba[0]  # tied scores, as kNN vote shares give
    ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(3)]
    ours = weighted_metrics(y_true, proba.argmax(axis=1), ranks, np.ones(80), 3, CalibrationItems(y_true, proba))
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
        assert low <= point[name] <= high and (name == "nll" or high - low < 0.3)  # nll is not on a 0-1 scale


def _patients_of_items(rng, patients: int, items: int) -> np.ndarray:
    return np.array([f"P{n}" for n in rng.integers(0, patients, size=items)])


def _brute_force_cluster_intervals(y_true, predicted, groups, draws, seed) -> dict:
    """Accuracy and balanced accuracy intervals by concatenating the drawn patients' items, draw by draw."""
    rng = np.random.default_rng(seed)
    ids = np.unique(groups)  # clusters are numbered in sorted id order
    values = {"accuracy": [], "balanced_accuracy": []}
    for _ in range(draws):
        drawn = ids[rng.integers(0, len(ids), size=len(ids))]
        items = np.concatenate([np.flatnonzero(groups == patient) for patient in drawn])
        truth, guess = y_true[items], predicted[items]
        values["accuracy"].append(np.mean(truth == guess))
        values["balanced_accuracy"].append(np.mean([np.mean(guess[truth == c] == c) for c in np.unique(truth)]))
    return {name: (np.percentile(v, 2.5), np.percentile(v, 97.5)) for name, v in values.items()}


def test_cluster_bootstrap_equals_a_brute_force_resampling_of_patients():
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 3, size=60)
    proba = rng.dirichlet([1, 1, 1], size=60)
    groups = _patients_of_items(rng, patients=7, items=60)
    ours = bootstrap_intervals(y_true, proba, draws=200, seed=9, groups=groups)
    expected = _brute_force_cluster_intervals(y_true, proba.argmax(axis=1), groups, draws=200, seed=9)
    for name, interval in expected.items():
        assert ours[name] == pytest.approx(interval, abs=1e-12)
    # The item bootstrap is the cluster bootstrap with one cluster per item, draw for draw.
    assert bootstrap_intervals(y_true, proba, seed=2) == bootstrap_intervals(y_true, proba, seed=2,
                                                                             groups=np.arange(60))
    assert ours != bootstrap_intervals(y_true, proba, draws=200, seed=9)


def test_correlated_items_of_a_patient_widen_the_interval():
    # Each patient is all right or all wrong: 20 tiles of one patient carry one patient's worth of evidence.
    rng = np.random.default_rng(5)
    groups = np.repeat([f"P{n}" for n in range(10)], 20)
    y_true = rng.integers(0, 2, size=200)
    right = np.repeat(rng.random(10) < 0.7, 20)
    proba = np.eye(2)[np.where(right, y_true, 1 - y_true)]
    (tile_low, tile_high) = bootstrap_intervals(y_true, proba, seed=0)["accuracy"]
    (patient_low, patient_high) = bootstrap_intervals(y_true, proba, seed=0, groups=groups)["accuracy"]
    assert patient_high - patient_low > 2 * (tile_high - tile_low)


def test_one_cluster_has_no_interval_and_misaligned_ids_are_refused():
    y_true, proba = np.array([0, 1, 1, 0]), np.eye(2)[[0, 1, 0, 0]]
    single = bootstrap_intervals(y_true, proba, groups=["P1"] * 4)
    assert set(single) == {"balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr", "ece", "mce", "brier", "nll"}
    assert all(np.isnan(low) and np.isnan(high) for low, high in single.values())
    with pytest.raises(ValueError, match="3 cluster ids for 4 test items"):
        bootstrap_intervals(y_true, proba, groups=["P1", "P2", "P3"])


def test_readers_name_their_resampling_unit(tmp_path):
    from conftest import make_bach, make_bracs, make_breakhis, make_crc

    from evalsuite.errors import EvalsuiteError
    from evalsuite.metrics.bootstrap import interval_clusters
    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    def clusters(task, root):
        reader = build_reader(load_card(task), str(root), check_counts=False)
        return reader, interval_clusters(reader, "test", len(reader.splits["test"][1]))

    reader, (unit, groups) = clusters("breakhis", make_breakhis(tmp_path / "breakhis", size=(7, 5)))
    assert unit == "patient" and groups == [p.name.split("-")[2] for p in reader.splits["test"][0]]
    reader, (unit, groups) = clusters("bracs", make_bracs(tmp_path / "bracs", per_class=2))
    assert unit == "slide" and groups == ["_".join(p.name.split("_")[:2]) for p in reader.splits["test"][0]]
    assert len(set(groups)) == 7 and len(groups) == 14  # the two RoIs of a class share their slide
    assert clusters("bach", make_bach(tmp_path / "bach"))[1] == ("image", None)  # a sample is a whole photo
    assert clusters("crc", make_crc(tmp_path / "crc", 1, 1, size=(8, 8)))[1] == ("tile", None)
    with pytest.raises(EvalsuiteError, match="cached test split has 5 samples but the reader lists 4; .*cache rm"):
        interval_clusters(build_reader(load_card("breakhis"), str(tmp_path / "breakhis"), check_counts=False),
                          "test", 5)


def test_bracs_file_without_a_slide_id_is_named(tmp_path):
    from conftest import make_bracs, write_image

    from evalsuite.errors import EvalsuiteError
    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    root = make_bracs(tmp_path)
    stray = write_image(root / "BRACS_RoI" / "latest_version" / "test" / "0_N" / "roi_7.png", (8, 8))
    with pytest.raises(EvalsuiteError, match=f"unexpected file name {stray}; expected BRACS_<slide>_<CLASS>_<k>"):
        build_reader(load_card("bracs"), str(root), check_counts=False)


TINY = ["--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0"]


@pytest.mark.slow
def test_seeds_give_one_row_set_each_with_intervals_and_a_summary_with_spread(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", *TINY, "--out", out, "--seeds", "0,1,2")
    assert result.returncode == 0, result.stderr
    board = pd.read_csv(out / "leaderboard.csv")
    assert sorted(board["seed"].unique()) == [0, 1, 2] and board["run_id"].nunique() == 1
    test = board[board["split"] == "test"]
    # Binned calibration errors are biased upward under resampling: their interval may sit above the point value.
    contained = test[~test["metric"].isin(["ece", "mce"])]
    assert test["ci_low"].notna().all() and (contained["ci_low"] <= contained["value"] + 1e-9).all()
    assert (contained["value"] <= contained["ci_high"] + 1e-9).all()
    assert board[board["split"] != "test"]["ci_low"].isna().all()
    linear = test[(test["probe"] == "linear") & (test["metric"] == "balanced_accuracy")]
    assert linear["value"].nunique() > 1  # different seeds, different heads

    again = run_cli("run", *TINY, "--out", tmp_path / "again", "--seed", "1")
    assert again.returncode == 0, again.stderr
    assert {p["intervals_95_unit"] for p in _record(out)["probes"]} == {"tile"}  # the demo knows no patients
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

    split_data = noisy_class_split(classes=3, per_class=60)
    means, intervals = FewShotProbe(3, shots=[1, 16], support_sets=50, batch_size=32).evaluate(split_data)
    assert means["balanced_accuracy_16shot"] > means["balanced_accuracy_1shot"] + 0.05
    for name, (low, high) in intervals.items():
        assert low <= means[name] <= high


@pytest.mark.slow
def test_fewshot_probe_through_the_cli(tmp_path):
    result = run_cli("run", *TINY, "--out", tmp_path, "--probes", "fewshot")
    assert result.returncode == 0, result.stderr
    assert not library_warnings(result.stderr), result.stderr
    board = pd.read_csv(tmp_path / "leaderboard.csv")
    assert set(board["split"]) == {"test"}
    assert {f"balanced_accuracy_{k}shot" for k in (1, 2, 4, 8, 16)} <= set(board["metric"])
    assert ((board["ci_low"] <= board["value"] + 1e-9) & (board["value"] <= board["ci_high"] + 1e-9)).all()
