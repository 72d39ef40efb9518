"""BreaKHis: 40X images, labels and patients from the file names, split by patient as eva and THUNDER do."""

import json
import shutil

import pytest
import yaml
from conftest import BREAKHIS_PATIENTS, breakhis_file, make_breakhis, run_card, write_image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.breakhis import TEST_PATIENTS, VAL_PATIENTS, BreakhisReader
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.resources import cards_dir

OTHER_SUBTYPES = [("B", "PT", "14", "1000"), ("M", "LC", "14", "2000"), ("M", "PC", "15", "3000")]


def _patient(path) -> str:
    return path.name.split("-")[2]


def _split_patients(reader) -> dict:
    return {split: {_patient(p) for p in paths} for split, (paths, _) in reader.splits.items()}


def _binary_card(tmp_path):
    card = yaml.safe_load((cards_dir() / "breakhis.yaml").read_text())
    card["reader"]["args"]["labels"] = "binary"
    card["classes"] = ["benign", "malignant"]
    (tmp_path / "binary.yaml").write_text(yaml.safe_dump(card))
    return load_card(str(tmp_path / "binary.yaml"))


def test_test_patients_are_evas_current_split_and_val_patients_thunders(tmp_path):
    root = make_breakhis(tmp_path, BREAKHIS_PATIENTS + OTHER_SUBTYPES, size=(7, 5))
    reader = BreakhisReader(load_card("breakhis"), root, check_counts=False)
    # eva's superseded split held out 21978AB and 2980; its current one holds out 2773 and 21998CD.
    assert _split_patients(reader) == {"test": {"2773", "21998CD"}, "val": {"10926", "13200"},
                                       "train": {"9133", "21978AB", "2980"}}
    assert {"2773", "21998CD"} <= TEST_PATIENTS and {"10926", "13200"} <= VAL_PATIENTS
    assert len(TEST_PATIENTS) == 14 and len(VAL_PATIENTS) == 10 and not TEST_PATIENTS & VAL_PATIENTS
    classes = load_card("breakhis").classes
    for split, (paths, labels) in reader.splits.items():
        assert all("-40-" in p.name and p.parent.name == "40X" for p in paths)  # 100X is ignored
        assert [classes[y] for y in labels] == [p.name.split("-")[0].split("_")[2] for p in paths]
        assert reader.groups(split) == [_patient(p) for p in paths]  # the bootstrap's clusters, in dataset order
    assert reader.interval_unit == "patient"
    again = BreakhisReader(load_card("breakhis"), root, check_counts=False)
    assert again.splits["train"][0] == reader.splits["train"][0]


def test_binary_labels_read_all_eight_subtypes_with_the_same_held_out_patients(tmp_path):
    root = make_breakhis(tmp_path / "data", BREAKHIS_PATIENTS + OTHER_SUBTYPES, size=(7, 5))
    reader = BreakhisReader(_binary_card(tmp_path), root, check_counts=False, labels="binary")
    assert _split_patients(reader) == {"test": {"2773", "21998CD"}, "val": {"10926", "13200"},
                                       "train": {"9133", "21978AB", "2980", "22549AB", "1000", "2000", "3000"}}
    for paths, labels in reader.splits.values():
        assert [("benign", "malignant")[y] for y in labels] == [p.parts[-6] for p in paths]


def test_label_sets_and_classes_are_checked(tmp_path):
    root = make_breakhis(tmp_path / "data", size=(7, 5))
    with pytest.raises(EvalsuiteError, match="labels must be one of subtype4, binary, got 'subtype'"):
        BreakhisReader(load_card("breakhis"), root, check_counts=False, labels="subtype")
    with pytest.raises(EvalsuiteError, match=r"field 'classes' must be \['benign', 'malignant'\]"):
        BreakhisReader(load_card("breakhis"), root, check_counts=False, labels="binary")


def _write_counts(root, per_patient: dict) -> None:
    """`count` 40X images for each (class, subtype, year, patient), copies of one tiny PNG."""
    template = write_image(root / "template.png", (2, 2))
    for patient, count in per_patient.items():
        for number in range(1, count + 1):
            path = breakhis_file(root, *patient, number)
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, path)


def test_official_counts_of_eva_and_thunder_are_checked_per_split(tmp_path):
    counts = {BREAKHIS_PATIENTS[1]: 312, BREAKHIS_PATIENTS[2]: 312, BREAKHIS_PATIENTS[7]: 312,  # train: 936
              BREAKHIS_PATIENTS[3]: 98, BREAKHIS_PATIENTS[4]: 98,  # val: 196
              BREAKHIS_PATIENTS[5]: 169, BREAKHIS_PATIENTS[6]: 170,  # test: 339
              BREAKHIS_PATIENTS[0]: 524}  # adenosis: the 1,995 - 1,471 images outside the four subtypes
    _write_counts(tmp_path / "data", counts)
    reader = BreakhisReader(load_card("breakhis"), tmp_path / "data")
    assert {s: len(paths) for s, (paths, _) in reader.splits.items()} == {"train": 936, "val": 196, "test": 339}
    binary = BreakhisReader(_binary_card(tmp_path), tmp_path / "data", labels="binary")
    assert {s: len(paths) for s, (paths, _) in binary.splits.items()} == {"train": 1460, "val": 196, "test": 339}

    # One test image relabelled as a train patient's: the total holds, the test count does not.
    moved = breakhis_file(tmp_path / "data", *BREAKHIS_PATIENTS[6], 170)
    moved.rename(breakhis_file(tmp_path / "data", *BREAKHIS_PATIENTS[1], 313))
    with pytest.raises(EvalsuiteError, match="the test patients .subtype4. has 338 images but the official dataset "
                                             "has 339.*--no-count-check"):
        BreakhisReader(load_card("breakhis"), tmp_path / "data")
    breakhis_file(tmp_path / "data", *BREAKHIS_PATIENTS[1], 313).unlink()
    with pytest.raises(EvalsuiteError, match="has 1994 images but the official dataset has 1995"):
        BreakhisReader(load_card("breakhis"), tmp_path / "data")


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
def test_breakhis_card_end_to_end_with_patient_intervals(tmp_path):
    run_card("breakhis", make_breakhis(tmp_path / "data"), tmp_path / "out", {"train": 6, "val": 4, "test": 4})
    record = json.loads(next((tmp_path / "out" / "runs").glob("*.json")).read_text())
    (knn,) = record["probes"]
    assert knn["intervals_95_unit"] == "patient" and knn["intervals_95"]["test"]
