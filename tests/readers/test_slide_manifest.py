"""The slide manifest: every bad row is a one-line error naming the file and line; splits by column or patient folds."""

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slide_manifest import (
    assign_splits,
    check_patients_in_one_split,
    read_manifest_rows,
    records_from_rows,
)

CLASSES = ["neg", "pos"]


def _parse(tmp_path, text: str, survival: bool = False):
    path = tmp_path / "slides.csv"
    path.write_text(text)
    required = ("slide_path", "time", "event") if survival else ("slide_path", "label")
    return records_from_rows(read_manifest_rows(path, required), path, tmp_path, CLASSES, survival)


@pytest.mark.parametrize("text, survival, message", [
    ("slide_path,split\na.svs,train\n", False, "has no column label"),
    ("slide_path,label\na.svs,maybe\n", False, "line 2: label 'maybe' is not one of the card's classes"),
    ("slide_path,label\na.svs,pos\nb/a.svs,neg\n", False, "line 3: slide 'a' is listed twice"),
    ("slide_path,label,split\na.svs,pos,holdout\n", False, "split 'holdout' must be train, val or test"),
    ("slide_path,label,mpp\na.svs,pos,-0.5\n", False, "mpp '-0.5' must be a positive number"),
    ("slide_path,label\n,pos\n", False, "line 2: empty slide_path"),
    ("slide_path,time,event\na.svs,-3,1\n", True, "survival time -3 is negative"),
    ("slide_path,time,event\na.svs,12,2\n", True, "event 2 must be 1"),
    ("slide_path,time,event\na.svs,soon,1\n", True, "must be numbers"),
])
def test_bad_manifest_rows_are_one_line_errors(tmp_path, text, survival, message):
    with pytest.raises(EvalsuiteError, match=message) as caught:
        _parse(tmp_path, text, survival)
    assert "\n" not in str(caught.value) and "slides.csv" in str(caught.value)


def test_missing_manifest_names_the_file(tmp_path):
    with pytest.raises(EvalsuiteError, match="slides.csv not found"):
        read_manifest_rows(tmp_path / "slides.csv", ("slide_path", "label"))


def test_patient_folds_keep_patients_whole_and_val_is_carved_by_patient(tmp_path):
    rows = "slide_path,label,patient\n" + "".join(f"s{i}.svs,{CLASSES[i % 2]},p{i // 2}\n" for i in range(40))
    records = assign_splits(_parse(tmp_path, rows), folds=5, test_fold=0, val_fraction=0.2, seed=0)
    check_patients_in_one_split(records, tmp_path / "slides.csv")  # raises if a patient straddles splits
    counts = {split: sum(r.split == split for r in records) for split in ("train", "val", "test")}
    assert counts["test"] == 8 and counts["val"] > 0 and sum(counts.values()) == 40


def test_a_patient_in_two_splits_is_refused(tmp_path):
    rows = "slide_path,label,patient,split\na.svs,pos,p1,train\nb.svs,neg,p1,test\nc.svs,neg,p2,val\n"
    records = assign_splits(_parse(tmp_path, rows), folds=5, test_fold=0, val_fraction=0.2, seed=0)
    with pytest.raises(EvalsuiteError, match="patient 'p1' has slides in train and test"):
        check_patients_in_one_split(records, tmp_path / "slides.csv")
