"""Every reader names its items (`item_ids(split)`, issue 47 point 7): one identity per item of the split, in dataset
order, unique within the split, and the same whatever folder the data is under, on the tiny layouts of
tests/conftest.py (HEST's: tests/readers/spots/test_hest_item_ids.py)."""

import csv
import shutil

import numpy as np
import pytest
from conftest import (
    make_bach,
    make_bracs,
    make_breakhis,
    make_consep,
    make_crc,
    make_mhist,
    make_monusac,
    make_pannuke,
    make_pcam,
    write_image,
)

from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.kinds import KINDS

SPLITS = ("train", "val", "test")
TILE_CARD = """name: tiny_tiles
kind: classification
reader: {name: tile_csv, args: {manifest: tiles.csv}}
classes: [left, right]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [knn]
"""


def _tile_csv(root):
    """Two tiles per class and split under root/tiles, listed in root/tiles.csv; the card beside them."""
    rows = []
    for split in SPLITS:
        for label in ("left", "right"):
            for k in range(2):
                name = f"tiles/{split}_{label}_{k}.png"
                write_image(root / name, (8, 8), seed=len(rows))
                rows.append({"image_path": name, "label": label, "split": split})
    with open(root / "tiles.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["image_path", "label", "split"])
        writer.writeheader()
        writer.writerows(rows)
    (root / "card.yaml").write_text(TILE_CARD)
    return root


def _camelyon16(root):
    """Empty slide files (the records are read from names only) and the test reference CSV."""
    for folder, stems in (("training/normal", ["normal_001", "normal_010", "normal_002"]),
                          ("training/tumor", ["tumor_001", "tumor_002", "tumor_003"]),
                          ("testing/images", ["test_001", "test_002", "test_003"])):
        (root / folder).mkdir(parents=True)
        for stem in stems:
            (root / folder / f"{stem}.tif").write_bytes(b"")
    (root / "testing" / "reference.csv").write_text("test_001,Normal\ntest_002,Tumor,Macro\ntest_003,Tumor\n")
    return root


def _panda(root):
    (root / "train_images").mkdir(parents=True)
    with open(root / "train.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "data_provider", "isup_grade", "gleason_score"])
        writer.writerows([f"slide{i:02d}", "radboud", i % 2, "0+0"] for i in range(20))
    return root


def _slide_manifest(root, survival: bool):
    """Slides of 12 patients, 4 per split; patients p0, p4 and p8 have two slides (per patient: one item each)."""
    header = ["slide_path", "split", "patient"] + (["time", "event"] if survival else ["label"])
    rows = []
    for patient in range(12):
        for slide in range(2 if patient % 4 == 0 else 1):
            path = root / "slides" / f"p{patient}_{slide}.svs"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f"slide {patient} {slide}".encode())  # distinct contents: not copies of one slide
            target = [10 + patient, patient % 2] if survival else [["negative", "positive"][patient % 2]]
            rows.append([path.relative_to(root).as_posix(), SPLITS[patient // 4], f"p{patient}", *target])
    with open(root / "slides.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return root


# (card, layout builder or None for the shipped data)
READERS = [
    ("bach", make_bach), ("crc", lambda root: make_crc(root, 2, 1, size=(8, 8))),
    ("mhist", lambda root: make_mhist(root, size=(8, 8))), ("bracs", make_bracs), ("breakhis", make_breakhis),
    ("pcam", make_pcam), ("pannuke", lambda root: make_pannuke(root, size=64)),
    ("consep", lambda root: make_consep(root, 3, 2, size=500)), ("monusac", make_monusac),
    ("demo", None), ("demo_seg", None), ("demo_counts", None),
    ("camelyon16", _camelyon16), ("panda", _panda), ("slide_csv", lambda root: _slide_manifest(root, False)),
    ("slide_survival_csv", lambda root: _slide_manifest(root, True)), ("tile_csv", _tile_csv),
]


def _reader(card: str, root=None):
    name = str(root / "card.yaml") if card == "tile_csv" else card
    return build_reader(load_card(name), None if root is None else str(root), check_counts=False)


def _items(reader, split: str) -> int:
    """The split's number of scored items: slides or patients for slide readers, else the dataset's samples."""
    if KINDS[reader.card.kind].bags:
        return len(reader.targets(split))
    return len(reader.dataset(split, None))


@pytest.mark.parametrize("card, build", READERS, ids=[card for card, _ in READERS])
def test_every_reader_names_each_item_of_a_split_once(tmp_path, card, build):
    reader = _reader(card, build(tmp_path / "data") if build else None)
    for split in SPLITS:
        ids = reader.item_ids(split)
        assert len(ids) == _items(reader, split) and len(set(ids)) == len(ids), (split, ids)
        assert all(isinstance(i, str) and str(tmp_path) not in i for i in ids)  # never where the data root is
        groups = reader.groups(split)
        assert groups is None or len(groups) == len(ids)


@pytest.mark.parametrize("card, build", [("bach", make_bach), ("tile_csv", _tile_csv), ("pannuke", make_pannuke),
                                         ("slide_csv", lambda root: _slide_manifest(root, False))])
def test_the_same_data_under_another_root_has_the_same_ids(tmp_path, card, build):
    build(tmp_path / "here")
    shutil.copytree(tmp_path / "here", tmp_path / "elsewhere" / "deeper")
    here, elsewhere = _reader(card, tmp_path / "here"), _reader(card, tmp_path / "elsewhere" / "deeper")
    assert all(here.item_ids(split) == elsewhere.item_ids(split) for split in SPLITS)


def test_slide_items_are_slides_and_survival_items_are_patients_in_target_order(tmp_path):
    slides = _reader("slide_csv", _slide_manifest(tmp_path / "slides", False))
    assert slides.item_ids("test") == ["slide p8_0", "slide p8_1", "slide p9_0", "slide p10_0", "slide p11_0"]
    patients = _reader("slide_survival_csv", _slide_manifest(tmp_path / "patients", True))
    assert patients.item_ids("test") == ["patient p8", "patient p9", "patient p10", "patient p11"]
    assert patients.targets("test")[:, 0].tolist() == [18, 19, 20, 21]
    patients.keep("test", ["p9_0", "p8_1", "p10_0", "p11_0"])  # the cache's order, slide p8_0 skipped as bad
    assert patients.item_ids("test") == ["patient p9", "patient p8", "patient p10", "patient p11"]
    assert patients.targets("test")[:, 0].tolist() == [19, 18, 20, 21]


def test_tile_ids_are_the_source_and_the_origin_in_it(tmp_path):
    pcam = _reader("pcam", make_pcam(tmp_path / "pcam"))
    assert pcam.item_ids("test")[:2] == ["camelyonpatch_level_2_split_test_x.h5 row 0",
                                         "camelyonpatch_level_2_split_test_x.h5 row 1"]
    pannuke = _reader("pannuke", make_pannuke(tmp_path / "pannuke", size=64))
    assert pannuke.item_ids("test") == [f"Fold 3/images/fold3/images.npy row {row} tile 0,0 64px" for row in (0, 1)]
    demo = _reader("demo")
    origins = [tuple(int(v) for v in o) for o in demo.origins[demo.splits == "test"][:1]]
    assert demo.item_ids("test")[0] == f"hgsc_nest.jpg tile {origins[0][0]},{origins[0][1]} 60px"
    assert np.array_equal(demo.dataset("test", None).labels, demo.labels[demo.splits == "test"])
