"""The slide manifest: every bad row is a one-line error naming the file and line; splits by column or patient folds."""

import os
import re

import numpy as np
import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.slide_manifest import (
    assign_splits,
    check_events,
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
    ("slide_path,label\na.svs,pos\na.svs,neg\n", False, "line 3: slide file .*a.svs is already listed on line 2"),
    ("slide_path,label,slide_id\na.svs,pos,s1\nb.svs,neg,s1\n", False, "line 3: slide_id 's1' is already line 2's"),
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


@pytest.mark.parametrize("text, message", [
    ("slide_path,label\n", "lists no slides (a header and no rows)"),
    ("", "is empty; write a header row (slide_path, label)"),
], ids=["header-only", "empty-file"])
def test_a_manifest_without_rows_says_so_not_that_columns_are_missing(tmp_path, text, message):
    """Issue 24 item 8: a header-only manifest was refused as 'has no column slide_path, label'."""
    with pytest.raises(EvalsuiteError, match=re.escape(message)) as caught:
        _parse(tmp_path, text)
    assert "has no column" not in str(caught.value)


def test_two_sites_reusing_a_file_name_are_told_to_add_a_slide_id_column(tmp_path):
    """Issue 24 item 8: siteA/001.svs and siteB/001.svs were refused as 'listed twice' with no hint."""
    text = "slide_path,label\nsiteA/001.svs,pos\nsiteB/001.svs,neg\n"
    with pytest.raises(EvalsuiteError, match=r"line 3: slide id '001' \(the file name of 001.svs\) is also line 2's "
                                             r".*add a slide_id column") as caught:
        _parse(tmp_path, text)
    assert "listed twice" not in str(caught.value)
    with_ids = _parse(tmp_path, "slide_path,label,slide_id\nsiteA/001.svs,pos,A-001\nsiteB/001.svs,neg,B-001\n")
    assert [r["slide_id"] for r in with_ids] == ["A-001", "B-001"]


def test_a_split_column_filled_for_some_rows_only_names_the_first_empty_row(tmp_path):
    """Issue 23 item 6: rows without a split were silently re-dealt into patient folds, overriding the others."""
    text = "slide_path,label,split\na.svs,pos,train\nb.svs,neg,test\nc.svs,pos,\nd.svs,neg,\n"
    with pytest.raises(EvalsuiteError, match="slides.csv line 4: empty split while other rows have one"):
        _parse(tmp_path, text)


def test_an_empty_split_column_deals_patient_folds_as_no_column_does(tmp_path):
    with_column = "slide_path,label,patient,split\n" + "".join(
        f"s{i}.svs,{CLASSES[i % 2]},p{i // 2},\n" for i in range(20))
    without = "slide_path,label,patient\n" + "".join(f"s{i}.svs,{CLASSES[i % 2]},p{i // 2}\n" for i in range(20))
    splits = [[r.split for r in assign_splits(_parse(tmp_path, text), 5, 0, 0.2, 0)] for text in (with_column, without)]
    assert splits[0] == splits[1] and splits[0].count("test") == 4


def _same_file_cases(tmp_path):
    """(second slide_path, how) pairs naming a.svs's file under another id; a.svs holds 200 kB of distinct bytes."""
    data = os.urandom(200_000)
    (tmp_path / "a.svs").write_bytes(data)
    os.symlink(tmp_path / "a.svs", tmp_path / "link.svs")
    os.link(tmp_path / "a.svs", tmp_path / "hard.svs")
    (tmp_path / "copy.svs").write_bytes(data)
    return [("./sub/../a.svs", "the same path once resolved"), ("link.svs", "the same path once resolved"),
            ("hard.svs", "a hard link"), ("copy.svs", "a copy: same size, same first and last 64 KiB")]


def test_one_slide_file_under_two_ids_in_train_and_test_is_refused(tmp_path):
    """Issue 24 item 4a: the same file under two slide ids, in train and in test, was accepted (leakage)."""
    (tmp_path / "sub").mkdir()
    for second, how in _same_file_cases(tmp_path):
        text = (f"slide_path,label,split,slide_id\na.svs,pos,train,first\nother.svs,neg,train,x\n"
                f"{second},pos,test,second\n")
        with pytest.raises(EvalsuiteError, match=rf"line 4: slide 'second' .* names the file of slide 'first' on "
                                                 rf"line 2 \({how}\)"):
            _parse(tmp_path, text)


def test_different_files_of_one_size_are_two_slides(tmp_path):
    """The content check compares bytes, not only sizes: two 200 kB files differing in their last byte are kept."""
    data = bytearray(os.urandom(200_000))
    (tmp_path / "a.svs").write_bytes(bytes(data))
    data[-1] ^= 0xFF
    (tmp_path / "b.svs").write_bytes(bytes(data))
    parsed = _parse(tmp_path, "slide_path,label\na.svs,pos\nb.svs,neg\n")
    assert [r["slide_id"] for r in parsed] == ["a", "b"]


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_a_survival_split_without_an_event_is_refused_from_the_manifest(tmp_path, split):
    """Issue 24 item 7b: every slide of a split censored; found from the manifest, before any slide is read."""
    rows = [("train", 10, 1), ("train", 20, 0), ("val", 30, 1), ("val", 5, 0), ("test", 7, 1), ("test", 9, 0)]
    text = "slide_path,time,event,split\n" + "".join(
        f"s{i}.svs,{time},{0 if where == split else event},{where}\n" for i, (where, time, event) in enumerate(rows))
    records = assign_splits(_parse(tmp_path, text, survival=True), 5, 0, 0.2, 0)
    with pytest.raises(EvalsuiteError, match=f"slides.csv: all 2 {split} slides are censored"):
        check_events(records, tmp_path / "slides.csv")


def test_a_comparable_pair_exists_exactly_when_the_concordance_index_is_defined():
    """The manifest check (readers/slides/scorable.py) agrees with Harrell's C itself on small random cohorts, ties
    and censoring included: refused exactly where the c-index would be nan."""
    from evalsuite.metrics.survival import concordance_index
    from evalsuite.readers.slides.scorable import has_comparable_pair

    rng = np.random.default_rng(0)
    for _ in range(300):
        patients = int(rng.integers(1, 5))
        targets = np.stack([rng.integers(0, 3, patients), rng.integers(0, 2, patients)], axis=1).astype(np.float64)
        defined = not np.isnan(concordance_index(targets[:, 0], targets[:, 1], rng.random(patients)))
        assert has_comparable_pair(targets) == defined, targets
