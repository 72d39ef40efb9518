"""BRACS: BRACS_RoI/latest_version/{train,val,test}/<k_CLASS>/*.png, official splits."""

import pytest
from conftest import BRACS_CLASSES, make_bracs, run_card
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.bracs import BracsReader
from evalsuite.tasks.cards import load_card


def test_official_splits_and_class_folders(tmp_path):
    reader = BracsReader(load_card("bracs"), make_bracs(tmp_path, per_class=2), check_counts=False)
    for split in ("train", "val", "test"):
        paths, labels = reader.splits[split]
        assert len(paths) == 14
        assert all(p.parent.parent.name == split and p.parent.name == BRACS_CLASSES[y] for p, y in zip(paths, labels))


def test_rois_are_centre_cropped_and_large_ones_allowed(tmp_path, monkeypatch):
    reader = BracsReader(load_card("bracs"), make_bracs(tmp_path), check_counts=False)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # every fixture RoI is "too large" for Pillow now
    image, label = reader.dataset("test", lambda image: image)[6]
    assert label == 6 and image.size == (48, 48)  # the 88x48 RoI's central square


def test_counts_and_missing_class_folder(tmp_path):
    root = make_bracs(tmp_path)
    with pytest.raises(EvalsuiteError, match="latest_version/train has 7 images but the official dataset has 3657"):
        BracsReader(load_card("bracs"), root)
    (root / "BRACS_RoI" / "latest_version" / "val" / "4_ADH" / "BRACS_1041_ADH_1.png").unlink()
    (root / "BRACS_RoI" / "latest_version" / "val" / "4_ADH").rmdir()
    with pytest.raises(EvalsuiteError, match="missing class folder .*val/4_ADH; expected BRACS_RoI/latest_version"):
        BracsReader(load_card("bracs"), root, check_counts=False)


@pytest.mark.slow
def test_bracs_card_end_to_end(tmp_path):
    run_card("bracs", make_bracs(tmp_path / "data"), tmp_path / "out", {"train": 7, "val": 7, "test": 7})
