"""BreaKHis: 40X images, labels and patients from the file names, split by patient."""

import pytest
import yaml

from evalsuite.cards import load_card
from evalsuite.errors import EvalsuiteError
from evalsuite.readers.breakhis import TEST_PATIENTS, BreakhisReader
from evalsuite.resources import cards_dir
from fixtures_tiles import BREAKHIS_PATIENTS, breakhis_file, make_breakhis, run_card, write_image


def _patients(paths):
    return {p.name.split("-")[2] for p in paths}


def test_split_by_patient_with_evas_held_out_patients_as_test(tmp_path):
    patients = BREAKHIS_PATIENTS + [("B", "PT", "14", "1000"), ("M", "LC", "14", "2000"), ("M", "PC", "15", "3000")]
    reader = BreakhisReader(load_card("breakhis"), make_breakhis(tmp_path, patients, size=(7, 5)), check_counts=False)
    split_patients = {s: _patients(reader.splits[s][0]) for s in ("train", "val", "test")}
    assert split_patients["test"] == {"21978AB", "2980"} <= TEST_PATIENTS
    assert not split_patients["train"] & split_patients["val"]
    assert split_patients["train"] | split_patients["val"] == {"22549AB", "9133", "1000", "10926", "2773", "2000",
                                                              "3000"}
    for split in ("train", "val", "test"):
        paths, labels = reader.splits[split]
        assert all("-40-" in p.name and p.parent.name == "40X" for p in paths)  # 100X is ignored
        assert [("benign", "malignant")[y] for y in labels] == [p.parts[-6] for p in paths]
        assert set(labels) == {0, 1}
    again = BreakhisReader(load_card("breakhis"), tmp_path, check_counts=False)
    assert again.splits["val"][0] == reader.splits["val"][0]


def test_subtype_labels(tmp_path):
    card = yaml.safe_load((cards_dir() / "breakhis.yaml").read_text())
    card["reader"]["args"]["labels"] = "subtype"
    card["classes"] = ["A", "F", "PT", "TA", "DC", "LC", "MC", "PC"]
    (tmp_path / "subtype.yaml").write_text(yaml.safe_dump(card))
    reader = BreakhisReader(load_card(str(tmp_path / "subtype.yaml")), make_breakhis(tmp_path / "data", size=(7, 5)),
                            check_counts=False, labels="subtype")
    for paths, labels in reader.splits.values():
        assert [card["classes"][y] for y in labels] == [p.name.split("-")[0].split("_")[2] for p in paths]
    with pytest.raises(EvalsuiteError, match="field 'classes' must be"):
        BreakhisReader(load_card("breakhis"), tmp_path / "data", check_counts=False, labels="subtype")


def test_official_counts_are_checked(tmp_path):
    with pytest.raises(EvalsuiteError, match="has 12 images but the official dataset has 1995.*--no-count-check"):
        BreakhisReader(load_card("breakhis"), make_breakhis(tmp_path, size=(7, 5)))


def test_file_in_the_wrong_class_folder_is_named(tmp_path):
    root = make_breakhis(tmp_path, size=(7, 5))
    malignant_folder = breakhis_file(root, "M", "DC", "14", "10926", 1).parent
    stray = write_image(malignant_folder / "SOB_B_F-14-9133-40-009.png", (7, 5))
    with pytest.raises(EvalsuiteError, match=f"unexpected file {stray}; expected SOB_<B|M>_<TYPE>"):
        BreakhisReader(load_card("breakhis"), root, check_counts=False)


def test_missing_class_folder(tmp_path):
    root = make_breakhis(tmp_path, [p for p in BREAKHIS_PATIENTS if p[0] == "B"], size=(7, 5))
    with pytest.raises(EvalsuiteError, match="missing folder .*breast/malignant/SOB; expected BreaKHis_v1/"):
        BreakhisReader(load_card("breakhis"), root, check_counts=False)


@pytest.mark.slow
def test_breakhis_card_end_to_end(tmp_path):
    run_card("breakhis", make_breakhis(tmp_path / "data"), tmp_path / "out", {"train": 4, "val": 4, "test": 4})
