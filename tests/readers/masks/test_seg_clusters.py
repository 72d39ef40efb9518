"""The segmentation readers' bootstrap clusters: PanNuke tissue type, CoNSeP source image, MoNuSAC patient, else
tiles."""

import numpy as np
import pytest
from conftest import assert_one_line_error, make_consep, make_monusac, make_pannuke, pannuke_paths, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card


def _reader(task, root):
    return build_reader(load_card(task), str(root), False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("seg_clusters")
    return {"pannuke": make_pannuke(root / "pannuke", counts=(3, 2, 6)), "consep": make_consep(root / "consep"),
            "monusac": make_monusac(root / "monusac")}


def test_pannuke_clusters_are_the_test_folds_tissue_types(data):
    reader = _reader("pannuke", data["pannuke"])
    assert reader.interval_unit == "tissue type"
    assert reader.groups("test") == ["Breast", "Colon", "Lung", "Breast", "Colon", "Lung"]  # fold 3's types.npy
    assert reader.groups("val") == ["Breast", "Colon"]


def test_pannuke_without_types_resamples_images(data, tmp_path):
    root = make_pannuke(tmp_path / "pannuke", counts=(3, 2, 4))
    pannuke_paths(root, 3)["types"].unlink()
    reader = _reader("pannuke", root)
    assert reader.interval_unit == "image" and reader.groups("test") is None


def test_consep_clusters_are_the_source_images(data):
    reader = _reader("consep", data["consep"])
    assert reader.interval_unit == "image"
    assert reader.groups("test") == ["Test/test_1"] * 16 + ["Test/test_2"] * 16  # 16 tiles of 250 px per image


def test_monusac_clusters_are_the_patients(data):
    reader = _reader("monusac", data["monusac"])
    patient = "TCGA-2Z-A9JG-01Z-00-DX1"
    # 280x150 -> two padded 256 px tiles, 113x81 -> one: three tiles of two images of one patient, one cluster.
    assert reader.interval_unit == "patient"
    assert reader.groups("test") == [patient] * 3


def test_demo_seg_knows_no_clusters_and_resamples_tiles():
    reader = build_reader(load_card("demo_seg"))
    assert reader.groups("test") is None and reader.interval_unit == "tile"


def test_a_types_file_of_the_wrong_length_or_of_objects_is_one_line_naming_it(data, tmp_path):
    root = make_pannuke(tmp_path / "pannuke", counts=(3, 2, 2))
    types = pannuke_paths(root, 3)["types"]
    np.save(types, np.array(["Breast"] * 5))
    with pytest.raises(EvalsuiteError, match="has 5 entries but the fold has 2 tiles"):
        _reader("pannuke", root)
    np.save(types, np.array(["Breast", None], dtype=object), allow_pickle=True)
    result = run_cli("run", "--task", "pannuke", "--data-root", root, "--out", tmp_path / "out", "--no-count-check")
    assert_one_line_error(result, str(types), "tissue type names", "re-download the fold")
    assert result.returncode == 2 and not (tmp_path / "out" / "leaderboard.csv").exists()
