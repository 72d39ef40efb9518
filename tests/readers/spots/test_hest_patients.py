"""HEST's test bootstrap resamples patients where the split files or the card name them (issue 38, part 6).

HEST's split files name sections (samples), and PRAD and READ hold several sections of one patient, so a fold's
interval over sections measured variation within one patient. A sample's patient comes from a `patient` column of
the split files or the card's reader.args.patients; a fold whose test is one patient has no interval (nan), and the
run's note says so. HEST's val is train: the run writes no val rows (the wide table would choose probes on them).
"""

import json

import numpy as np
import pytest
import yaml
from conftest import REPO, assert_one_line_error, leaderboard_rows, run_cli
from hest_layout import write_hest_task, write_split_csv

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

PATIENTS = {"A1": "A", "A2": "A", "B1": "B", "C1": "C"}
# Fold 0 tests patient A's two sections, fold 1 the patients B and C.
FOLDS = [(["B1", "C1"], ["A1", "A2"]), (["A1", "A2"], ["B1", "C1"])]


def _card(tmp_path, patients) -> str:
    """hest_prad's card under another name, its counts unchecked and `patients` its reader.args.patients."""
    raw = yaml.safe_load((REPO / "datasets" / "hest_prad.yaml").read_text())
    raw["name"], raw["reader"]["args"] = "hest_patients_test", {"patients": patients}
    path = tmp_path / "hest_patients_test.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _task(tmp_path, spots=2, **kwargs):
    return write_hest_task(tmp_path / "bench_data", samples={s: spots for s in PATIENTS}, folds=FOLDS, tile_px=4,
                           **kwargs)


def _reader(card, task_dir, check_counts=False):
    return build_reader(card if not isinstance(card, str) else load_card(card), str(task_dir), check_counts)


def test_a_fold_testing_one_patient_has_no_interval_and_the_run_says_so(tmp_path):
    task = write_hest_task(tmp_path / "bench_data", samples={s: 40 for s in PATIENTS}, folds=FOLDS, tile_px=32,
                           rng=np.random.default_rng(5))
    out = tmp_path / "out"
    result = run_cli("run", "--task", _card(tmp_path, PATIENTS), "--data-root", task.task_dir, "--model",
                     "test_vit", "--random-init", "--out", out)
    assert result.returncode == 0, result.stderr
    record = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert record["probes"][0]["intervals_95_unit"] == "patient"
    assert [fold["test_patients"] for fold in record["folds"]] == [["A"], ["B", "C"]]
    rows = {(r["split"], r["metric"]): r for r in leaderboard_rows(out)}
    # Sections A1 and A2 are two clusters to a bootstrap over samples; over patients they are one: nothing to draw.
    # Fold 1's two patients are fewer than an interval needs (docs/significance.md, "Few clusters"): none either.
    for fold in ("test_fold0", "test_fold1"):
        assert rows[(fold, "pearson")]["ci_low"] == rows[(fold, "pearson")]["ci_high"] == "nan"
    note = "2 of 2 folds test fewer than 4 patients (test_fold0: 'A'; test_fold1: 'B', 'C'): one patient has no"
    assert record["intervals_note"].startswith(note) and f"note: {record['intervals_note']}" in result.stdout
    # Val is each fold's train: its scores are train's, so the leaderboard gets none of them.
    assert not [split for split, _ in rows if split.startswith("val")]
    assert ("train_fold0", "pearson") in rows and ("train", "pearson") in rows


def test_a_patient_column_of_the_split_files_names_the_clusters(tmp_path):
    task = _task(tmp_path, patients=PATIENTS)
    reader = _reader("hest_idc", task.task_dir)  # a card without patients: the split files name them
    assert reader.interval_unit == "patient"
    reader.use_fold(1)
    assert reader.groups("test") == ["B", "B", "C", "C"]  # one id per spot, in dataset order
    assert reader.fold_samples(1) == {"train": ["A1", "A2"], "test": ["B1", "C1"], "test_patients": ["B", "C"]}


def test_without_patients_the_sample_is_the_cluster_and_a_one_sample_fold_is_noted(tmp_path):
    task = write_hest_task(tmp_path / "bench_data", samples={"S1": 2, "S2": 2, "S3": 2},
                           folds=[(["S1"], ["S2", "S3"]), (["S2", "S3"], ["S1"])], tile_px=4)
    reader = _reader("hest_idc", task.task_dir)
    assert reader.interval_unit == "sample" and reader.groups("test") == ["S2", "S2", "S3", "S3"]
    assert reader.intervals_note.startswith("2 of 2 folds test fewer than 4 samples (test_fold0: 'S2', 'S3'; "
                                            "test_fold1: 'S1'): one sample has no variation between samples")
    assert "test_patients" not in reader.fold_samples(0)


def test_folds_of_two_patients_are_noted_too(tmp_path):
    """Two patients are more than one but fewer than an interval needs (docs/significance.md, "Few clusters")."""
    task = write_hest_task(tmp_path / "bench_data", samples={s: 2 for s in PATIENTS}, tile_px=4,
                           folds=[(["A1", "A2"], ["B1", "C1"]), (["B1"], ["A1", "C1"])])
    note = _reader(load_card(_card(tmp_path, PATIENTS)), task.task_dir).intervals_note
    assert note.startswith("2 of 2 folds test fewer than 4 patients (test_fold0: 'B', 'C'; test_fold1: 'A', 'C')")


@pytest.mark.parametrize("card, folds, patients", [
    ("hest_prad", [[f"MEND{i}" for i in (154, 156, 157, 158, 159, 160, 161, 162)],
                   [f"MEND{i}" for i in range(139, 154)]], ["patient 1", "patient 2"]),
    ("hest_read", [["ZEN48", "ZEN49"], ["ZEN36", "ZEN40"]], ["Patient 1", "Patient 7"]),
])
def test_the_shipped_cards_name_the_patient_of_every_section_and_each_fold_tests_one(tmp_path, card, folds, patients):
    """HEST's PRAD and READ folds, split by the patients of HEST's metadata: the card's counts check passes and each
    fold's test is one patient (2 sections or more), so no fold has an interval."""
    samples = [sample for fold in folds for sample in fold]
    task = write_hest_task(tmp_path / "bench_data", samples={s: 1 for s in samples}, tile_px=4,
                           folds=[([s for s in samples if s not in test], test) for test in folds])
    reader = _reader(card, task.task_dir, check_counts=True)
    assert [reader.fold_samples(k)["test_patients"] for k in range(2)] == [[p] for p in patients]
    assert reader.intervals_note.startswith("2 of 2 folds test one patient")


def test_the_coad_card_names_four_patients_and_its_counts_hold():
    card = load_card("hest_coad")
    patients = card.reader_args["patients"]
    assert len(patients) == card.reader_args["samples"] == len(set(patients.values())) == 4


def test_a_card_missing_a_sample_is_one_line_and_writes_nothing(tmp_path):
    task, out = _task(tmp_path), tmp_path / "out"
    card = _card(tmp_path, {sample: p for sample, p in PATIENTS.items() if sample != "C1"})
    result = run_cli("run", "--task", card, "--data-root", task.task_dir, "--out", out)
    assert_one_line_error(result, "no patient is named for sample 'C1'", "reader.args.patients of", card)
    assert not out.exists() or not (out / "leaderboard.csv").exists()


@pytest.mark.parametrize("patients, fragment", [
    (["A", "B"], "reader.args.patients must be a mapping"),
    ({"A1": 3}, "reader.args.patients maps 'A1' to 3"),
])
def test_a_malformed_patients_map_names_the_card(tmp_path, patients, fragment):
    task, card = _task(tmp_path), _card(tmp_path, patients)
    with pytest.raises(EvalsuiteError, match=fragment) as raised:
        _reader(card, task.task_dir)
    assert card in str(raised.value) and "\n" not in str(raised.value)


def test_an_empty_or_conflicting_patient_cell_is_one_line(tmp_path):
    task = _task(tmp_path, patients=PATIENTS)
    write_split_csv(task.task_dir / "splits" / "test_1.csv", ["B1", "C1"], {"B1": "B", "C1": ""})
    with pytest.raises(EvalsuiteError, match="test_1.csv line 3 has no patient; fill it in or drop the patient column"):
        _reader("hest_idc", task.task_dir)
    write_split_csv(task.task_dir / "splits" / "test_1.csv", ["B1", "C1"], {"B1": "B", "C1": "A"})
    with pytest.raises(EvalsuiteError, match="sample 'C1' has patient 'C' in one split file and 'A' in another"):
        _reader("hest_idc", task.task_dir)
