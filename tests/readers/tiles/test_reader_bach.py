"""BACH: ICIAR2018_BACH_Challenge/Photos/<class>/*.tif, eva's patient-aware split by image number."""

import numpy as np
import pytest
from conftest import assert_one_line_error, make_bach, run_card, run_cli, write_image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.bach import BachReader
from evalsuite.tasks.cards import load_card

CLASSES = ["Benign", "InSitu", "Invasive", "Normal"]
# kaiko-ai/eva Bach: index ranges (end exclusive) over the 400 files sorted by class folder and name.
EVA_TRAIN = [(0, 41), (59, 60), (90, 139), (169, 240), (258, 260), (273, 345), (368, 400)]
EVA_VAL = [(41, 59), (60, 90), (139, 169), (240, 258), (260, 273), (345, 368)]


def _indices(ranges):
    return {i for low, high in ranges for i in range(low, high)}


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    """All 400 file names (tiny images): the official layout and counts."""
    return make_bach(tmp_path_factory.mktemp("bach"), {c: range(1, 101) for c in CLASSES}, size=(4, 3))


def test_split_is_evas_with_test_as_evas_val(complete):
    reader = BachReader(load_card("bach"), complete)
    order = [p for c in CLASSES for p in sorted((complete / "ICIAR2018_BACH_Challenge" / "Photos" / c).glob("*.tif"))]
    index = {path: i for i, path in enumerate(order)}
    got = {split: {index[p] for p in reader.splits[split][0]} for split in ("train", "val", "test")}
    assert got["test"] == _indices(EVA_VAL)
    assert got["train"] | got["val"] == _indices(EVA_TRAIN) and not got["train"] & got["val"]
    assert [len(got[s]) for s in ("train", "val", "test")] == [219, 49, 132]
    per_class = {s: np.bincount(reader.splits[s][1], minlength=4).tolist() for s in ("train", "val", "test")}
    assert per_class == {"train": [42, 57, 56, 64], "val": [10, 13, 13, 13], "test": [48, 30, 31, 23]}


def test_center_crop_before_the_backbone_transform(complete):
    reader = BachReader(load_card("bach"), complete)
    image, label = reader.dataset("test", lambda image: image)[0]
    assert image.size == (3, 3) and image.mode == "RGB" and label == 0


def test_subset_needs_no_count_check(tmp_path):
    root = make_bach(tmp_path)
    with pytest.raises(EvalsuiteError, match="has 3 images but the official dataset has 100.*--no-count-check"):
        BachReader(load_card("bach"), root)
    reader = BachReader(load_card("bach"), root, check_counts=False)
    assert [len(reader.splits[s][0]) for s in ("train", "val", "test")] == [4, 4, 4]


def test_unexpected_file_name_is_named(tmp_path):
    root = make_bach(tmp_path)
    bad = write_image(root / "ICIAR2018_BACH_Challenge" / "Photos" / "Normal" / "n1.tif")
    with pytest.raises(EvalsuiteError, match=f"unexpected file name {bad}"):
        BachReader(load_card("bach"), root, check_counts=False)


def test_missing_class_folder_is_one_line_error(tmp_path):
    root = make_bach(tmp_path, {c: [1] for c in CLASSES if c != "InSitu"})
    result = run_cli("run", "--task", "bach", "--data-root", root, "--out", tmp_path / "out")
    assert_one_line_error(result, "missing class folder", "Photos/InSitu",
                          "ICIAR2018_BACH_Challenge/Photos/{Benign,InSitu,Invasive,Normal}/*.tif", "--data-root")


def test_wrong_data_root_names_the_layout(tmp_path):
    result = run_cli("run", "--task", "bach", "--data-root", tmp_path, "--out", tmp_path / "out")
    assert_one_line_error(result, f"missing folder {tmp_path}/ICIAR2018_BACH_Challenge/Photos", "--data-root")


@pytest.mark.slow
def test_bach_card_end_to_end(tmp_path):
    run_card("bach", make_bach(tmp_path / "data"), tmp_path / "out", {"train": 4, "val": 4, "test": 4})
