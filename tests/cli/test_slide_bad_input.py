"""Bad slide-task input through the CLI: one line naming the problem, exit 2, nothing on the leaderboard."""

import csv
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import assert_one_line_error, cache_manifests, leaderboard_rows, run_cli

from evalsuite.readers.demo.demo_slides import demo_slides_folder, write_pyramid_tiff

MODEL = ["--model", "test_vit", "--random-init", "--num-workers", "0"]
WATCHDOG_S = 300  # these runs take 10-40 s on a loaded 2-core host; a hang is what the timeout catches
SURVIVAL_CARD = """name: tiny_survival
kind: survival
reader: {name: slide_csv, args: {manifest: slides.csv}}
splits: [train, val, test]
tiling: {target_mpp: 0.5, tile_size_px: 224, min_tissue_fraction: 0.5}
selection_metric: c_index
probes: [meanpool]
"""
CLASS_CARD = """name: tiny_slides
kind: slide
reader: {name: slide_csv, args: {manifest: slides.csv}}
classes: [stroma, tumour]
splits: [train, val, test]
tiling: {target_mpp: 0.5, tile_size_px: 224, min_tissue_fraction: 0.5}
selection_metric: balanced_accuracy
probes: [meanpool]
"""


def _cohort(root, extra_rows=(), survival=False, per_split=(3, 2, 2), slides_a_patient=1):
    """A small cohort of demo slides (both classes per split) plus `extra_rows`, and its card; consecutive slides of
    a class and split share a patient, `slides_a_patient` at a time."""
    demo = demo_slides_folder()
    with open(demo / "slides.csv", newline="") as handle:
        demo_rows = list(csv.DictReader(handle))
    rows = []
    for split, count in zip(("train", "val", "test"), per_split):
        for label in ("stroma", "tumour"):
            for index, row in enumerate([r for r in demo_rows if r["split"] == split and r["label"] == label][:count]):
                shutil.copyfile(demo / row["slide_path"], root / row["slide_path"])
                target = {"time": str(10.0 if label == "tumour" else 30.0), "event": "1"} if survival \
                    else {"label": label}
                patient = f"{split}-{label}-{index // slides_a_patient}"
                rows.append({"slide_path": row["slide_path"], "split": split, "patient": patient, **target})
    rows += [dict(r) for r in extra_rows]
    columns = ["slide_path", "split", "patient"] + (["time", "event"] if survival else ["label"])
    with open(root / "slides.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    card = root / "card.yaml"
    card.write_text((SURVIVAL_CARD if survival else CLASS_CARD) + f"data_root: {root}\n")
    return card


def _run(card, out, *extra):
    try:
        return run_cli("run", "--task", card, *MODEL, "--out", out, *extra, timeout=WATCHDOG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"evalsuite run {' '.join(map(str, extra))} did not exit within {WATCHDOG_S} s (hang)")


def _assert_refused(result, out, *fragments):
    assert_one_line_error(result, *fragments)
    assert result.returncode == 2
    assert not leaderboard_rows(out) and not list(out.glob("runs/*.json"))


def test_missing_slide(tmp_path):
    card = _cohort(tmp_path, [{"slide_path": "gone.svs", "split": "test", "label": "tumour"}])
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "gone.svs", "--skip-bad-slides")


def test_corrupt_slide_file(tmp_path):
    (tmp_path / "broken.svs").write_text("not a slide\n")
    card = _cohort(tmp_path, [{"slide_path": "broken.svs", "split": "train", "label": "stroma"}])
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "broken.svs")


def test_slide_without_tissue(tmp_path):
    blank = np.full((1024, 1024, 3), 241, dtype=np.uint8)
    write_pyramid_tiff(tmp_path / "blank.svs", blank, aperio=True)
    card = _cohort(tmp_path, [{"slide_path": "blank.svs", "split": "val", "label": "stroma"}])
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "blank.svs", "tissue")


def test_a_fifo_slide_is_a_one_line_error_not_a_hang(tmp_path):
    """Issue 24 item 2: a slide_path naming a FIFO was opened unchecked and the run waited for a writer forever."""
    os.mkfifo(tmp_path / "pipe.svs")
    card = _cohort(tmp_path, [{"slide_path": "pipe.svs", "split": "test", "label": "tumour"}])
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "pipe.svs is not a regular file but a FIFO",
                    "--skip-bad-slides")


@pytest.mark.slow
def test_a_fifo_slide_is_skipped_with_its_reason(tmp_path):
    """Issue 24 item 2, with --skip-bad-slides: the FIFO is left out, listed with its reason, and the run goes on."""
    os.mkfifo(tmp_path / "pipe.svs")
    card = _cohort(tmp_path, [{"slide_path": "pipe.svs", "split": "val", "label": "tumour"}], per_split=(2, 1, 1))
    out = tmp_path / "out"
    result = _run(card, out, "--skip-bad-slides")
    assert result.returncode == 0, result.stderr
    record = json.loads(next(out.glob("runs/*.json")).read_text())
    assert [s["slide"] for s in record["slides"]["val"]["skipped"]] == ["pipe"]
    assert "is not a regular file but a FIFO" in record["slides"]["val"]["skipped"][0]["reason"]
    assert record["slides"]["val"]["slides"] == 2


def test_one_slide_file_under_two_ids_in_train_and_test_is_refused(tmp_path):
    """Issue 24 item 4a, through the CLI: a train slide copied under another name into test is refused up front."""
    card = _cohort(tmp_path, [{"slide_path": "renamed.svs", "split": "test", "label": "stroma"}])
    with open(tmp_path / "slides.csv", newline="") as handle:
        first = next(csv.DictReader(handle))  # line 2: a train stroma slide
    shutil.copyfile(tmp_path / first["slide_path"], tmp_path / "renamed.svs")
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "slide 'renamed'",
                    f"names the file of slide '{first['slide_path'][:-4]}' on line 2 (a copy")


def test_survival_split_with_every_slide_censored_is_refused_before_extraction(tmp_path):
    """Issue 24 item 7b: an all-censored train split was refused by the probe, after every split was extracted."""
    card = _cohort(tmp_path, survival=True)
    with open(tmp_path / "slides.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["event"] = "0" if row["split"] == "train" else row["event"]
    with open(tmp_path / "slides.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "out"
    _assert_refused(_run(card, out), out, "slides.csv: all 6 train slides are censored")
    assert cache_manifests(out) == {}  # no split was tiled or extracted


def test_label_not_in_the_card_classes(tmp_path):
    card = _cohort(tmp_path, [{"slide_path": "x.svs", "split": "train", "label": "necrosis"}])
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "necrosis", "classes")


def test_negative_survival_time(tmp_path):
    card = _cohort(tmp_path, [{"slide_path": "x.svs", "split": "train", "time": "-3", "event": "1"}], survival=True)
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "-3", "negative")


def test_a_patients_slides_with_different_survival_targets(tmp_path):
    """Survival is scored per patient, so a patient's slides must share its time and event; refused before any
    extraction."""
    card = _cohort(tmp_path, survival=True, slides_a_patient=2)
    rows = (tmp_path / "slides.csv").read_text().splitlines()
    rows[1] = rows[1].replace(",10.0,", ",12.0,").replace(",30.0,", ",32.0,")  # the first slide of a two-slide patient
    (tmp_path / "slides.csv").write_text("\n".join(rows) + "\n")
    _assert_refused(_run(card, tmp_path / "out"), tmp_path / "out", "slides.csv", "patient 'train-stroma-0'",
                    "different survival targets", "give every slide of a patient")


@pytest.mark.slow
def test_skip_bad_slides_records_them_and_goes_on(tmp_path):
    (tmp_path / "broken.svs").write_text("not a slide\n")
    card = _cohort(tmp_path, [{"slide_path": "gone.svs", "split": "test", "label": "tumour"},
                              {"slide_path": "broken.svs", "split": "train", "label": "stroma"}])
    out = tmp_path / "out"
    result = _run(card, out, "--skip-bad-slides")
    assert result.returncode == 0, result.stderr
    record = json.loads(next(out.glob("runs/*.json")).read_text())
    skipped = {split: [s["slide"] for s in info["skipped"]] for split, info in record["slides"].items()}
    assert skipped == {"train": ["broken"], "val": [], "test": ["gone"]}
    assert record["slides"]["test"]["slides"] == 4 and record["config"]["skip_bad_slides"] is True
    assert {int(r["n_samples"]) for r in leaderboard_rows(out) if r["split"] == "test"} == {4}


@pytest.mark.slow
def test_survival_cohort_runs_and_scores_a_concordance_index(tmp_path):
    card = _cohort(tmp_path, survival=True, per_split=(4, 2, 3))
    out = tmp_path / "out"
    result = _run(card, out)
    assert result.returncode == 0, result.stderr
    rows = [r for r in leaderboard_rows(out) if r["split"] == "test"]
    assert {r["metric"] for r in rows} == {"c_index"}
    record = json.loads(next(out.glob("runs/*.json")).read_text())
    low, high = record["probes"][0]["intervals_95"]["test"]["c_index"]
    assert low <= record["probes"][0]["metrics"]["test"]["c_index"] <= high


@pytest.mark.slow
def test_survival_scores_patients_not_slides(tmp_path):
    """6 test slides of 4 patients (two patients with two slides): the Cox head and Harrell's C see 4 rows.
    Reference: n_samples = 4 test patients (per slide it was 6), the run JSON's unit 'patient'."""
    card = _cohort(tmp_path, survival=True, per_split=(4, 2, 3), slides_a_patient=2)
    out = tmp_path / "out"
    result = _run(card, out, "--probes", "meanpool,abmil")
    assert result.returncode == 0, result.stderr
    rows = [r for r in leaderboard_rows(out) if r["split"] == "test"]
    assert {r["probe"] for r in rows} == {"meanpool", "abmil"} and {int(r["n_samples"]) for r in rows} == {4}
    record = json.loads(next(out.glob("runs/*.json")).read_text())
    assert record["slides"]["test"]["slides"] == 6
    assert record["scored"] == {"unit": "patient", "train": 4, "val": 2, "test": 4}
    for probe in record["probes"]:
        assert probe["intervals_95_unit"] == "patient"


def _rewrite(path, change) -> None:
    """Rewrite the manifest at `path`, each row through `change(row)`."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        change(row)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_a_survival_test_split_of_one_patient_is_refused_before_extraction(tmp_path):
    """Issue 40 item 7: a test split of one patient scored c_index nan into the table and the leaderboard, exit 0."""
    card = _cohort(tmp_path, survival=True, per_split=(2, 1, 1))

    def one_test_patient(row):
        if row["split"] == "test":
            row.update(patient="solo", time="10.0", event="1")
    _rewrite(tmp_path / "slides.csv", one_test_patient)
    out = tmp_path / "out"
    _assert_refused(_run(card, out), out, f"slide manifest {tmp_path / 'slides.csv'}: the test split has one "
                    "patient ('solo', 2 slides)", "Harrell's C compares patients", "two patients or more")
    assert cache_manifests(out) == {}  # no split was tiled or extracted


def test_a_single_patient_survival_cohort_says_so(tmp_path):
    """Issue 40: a one-patient cohort (patient folds deal it into test) said "train: no slide could be tiled
    (0 skipped: empty split)", which points at the slides, not at the patients."""
    card = _cohort(tmp_path, survival=True, per_split=(1, 1, 1))
    _rewrite(tmp_path / "slides.csv", lambda row: row.update(patient="solo", time="10.0", event="1", split=""))
    out = tmp_path / "out"
    _assert_refused(_run(card, out), out, "slides.csv lists 6 slides of one patient ('solo')",
                    "survival is scored by comparing patients", "add slides of other patients")
    assert cache_manifests(out) == {}


def test_survival_patients_that_form_no_comparable_pair_are_refused(tmp_path):
    """Two test patients, both with an event at the same time: Harrell's C has no comparable pair (nan)."""
    card = _cohort(tmp_path, survival=True, per_split=(2, 1, 1))
    _rewrite(tmp_path / "slides.csv", lambda row: row.update(time="10.0") if row["split"] == "test" else None)
    out = tmp_path / "out"
    _assert_refused(_run(card, out), out, "the test split has no comparable pair of its 2 patients",
                    "an observed event before the other patient's time")
    assert cache_manifests(out) == {}


@pytest.mark.slow
def test_skip_bad_slides_leaving_one_survival_patient_is_refused_before_extraction(tmp_path):
    """The same rule on what --skip-bad-slides leaves, checked once tiling has found the bad slides."""
    card = _cohort(tmp_path, [{"slide_path": "gone.svs", "split": "test", "patient": "lost", "time": "5",
                               "event": "1"}], survival=True, per_split=(2, 1, 1))
    _rewrite(tmp_path / "slides.csv", lambda row: row.update(patient="kept", time="10.0", event="1")
             if row["split"] == "test" and row["patient"] != "lost" else None)
    out = tmp_path / "out"
    _assert_refused(_run(card, out, "--skip-bad-slides"), out, "refusing to score the test split: --skip-bad-slides "
                    "left out 1 slide(s) (gone) and one patient ('kept', 2 slides) is left")
    assert cache_manifests(out) == {}
