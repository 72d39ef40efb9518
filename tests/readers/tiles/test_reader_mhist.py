"""MHIST: images/*.png + annotations.csv (Image Name, Majority Vote Label, Partition)."""

import numpy as np
import pytest
from conftest import MHIST_COLUMNS, assert_one_line_error, make_mhist, run_card, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.mhist import MhistReader
from evalsuite.tasks.cards import load_card


def test_partitions_and_seeded_val(tmp_path):
    root = make_mhist(tmp_path, {"train": 10, "test": 3}, size=(8, 8))
    reader = MhistReader(load_card("mhist"), root, check_counts=False)
    train, val, test = (reader.splits[s] for s in ("train", "val", "test"))
    assert np.bincount(val[1]).tolist() == [2, 2] and np.bincount(train[1]).tolist() == [8, 8]
    assert np.bincount(test[1]).tolist() == [3, 3]
    assert val[0] == MhistReader(load_card("mhist"), root, check_counts=False).splits["val"][0]
    assert not set(train[0]) & set(val[0]) and not set(train[0] + val[0]) & set(test[0])


def test_official_partition_sizes_are_checked(tmp_path):
    with pytest.raises(EvalsuiteError, match="partition 'train' of annotations.csv has 6 images.*2175"):
        MhistReader(load_card("mhist"), make_mhist(tmp_path, size=(8, 8)))


def test_csv_missing_a_column_is_one_line_error(tmp_path):
    root = make_mhist(tmp_path / "data", columns=[c for c in MHIST_COLUMNS if c != "Partition"], size=(8, 8))
    result = run_cli("run", "--task", "mhist", "--data-root", root, "--out", tmp_path / "out")
    assert_one_line_error(result, f"{root / 'annotations.csv'} has no column 'Partition'", "'Majority Vote Label'")


def test_listed_image_missing_is_named(tmp_path):
    root = make_mhist(tmp_path, size=(8, 8))
    (root / "images" / "MHIST_aab.png").unlink()
    with pytest.raises(EvalsuiteError, match="missing file .*images/MHIST_aab.png; expected images/\\*.png and "
                                             "annotations.csv .*line 3"):
        MhistReader(load_card("mhist"), root, check_counts=False)


def test_unknown_label_is_named(tmp_path):
    root = make_mhist(tmp_path, size=(8, 8))
    csv_path = root / "annotations.csv"
    csv_path.write_text(csv_path.read_text().replace(",SSA,", ",TA,", 1))
    with pytest.raises(EvalsuiteError, match="line 5: label 'TA'"):
        MhistReader(load_card("mhist"), root, check_counts=False)


@pytest.mark.slow
def test_mhist_card_end_to_end(tmp_path):
    run_card("mhist", make_mhist(tmp_path / "data"), tmp_path / "out", {"train": 4, "val": 2, "test": 4})
