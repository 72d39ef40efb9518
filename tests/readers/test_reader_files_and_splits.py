"""Shared reader helpers: seeded val carving, centre crop, clear errors for unreadable images."""

import numpy as np
import pytest
from conftest import write_image
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import open_rgb
from evalsuite.readers.splits import carve_val
from evalsuite.readers.tiles.base import CenterCrop


def test_carve_val_is_seeded_stratified_and_keeps_classes_in_train():
    labels = np.repeat([0, 1, 2], [50, 20, 2])
    val = carve_val(labels, 0.2, seed=0)
    assert np.array_equal(val, carve_val(labels, 0.2, seed=0))
    assert not np.array_equal(val, carve_val(labels, 0.2, seed=1))
    assert [int(val[labels == c].sum()) for c in range(3)] == [10, 4, 1]  # at least one, never the whole class
    assert all((~val[labels == c]).any() for c in range(3))


def test_carve_val_moves_whole_groups():
    groups = np.repeat([f"p{i}" for i in range(10)], 3)
    labels = np.repeat([0] * 5 + [1] * 5, 3)
    val = carve_val(labels, 0.4, seed=3, groups=groups)
    for group in np.unique(groups):
        assert len(set(val[groups == group])) == 1  # a patient is never split
    assert len(np.unique(groups[val])) == 4 and set(labels[val]) == {0, 1}


def test_carve_val_single_member_class_stays_in_train():
    assert not carve_val(np.array([0, 1, 1, 1]), 0.5, seed=0)[0]


def test_center_crop_keeps_the_central_square():
    image = Image.fromarray(np.arange(48 * 64 * 3, dtype=np.uint32).reshape(48, 64, 3).astype(np.uint8))
    cropped = CenterCrop()(image)
    assert cropped.size == (48, 48)
    assert np.array_equal(np.asarray(cropped), np.asarray(image)[:, 8:56])
    assert CenterCrop(20)(image).size == (20, 20)
    with pytest.raises(ValueError, match="smaller than"):
        CenterCrop(50)(image)


def test_crop_larger_than_the_image_names_the_file(tmp_path):
    path = write_image(tmp_path / "small.png", (30, 20))
    with pytest.raises(EvalsuiteError, match=f"cannot preprocess image {path}: 30x20 px is smaller than"):
        open_rgb(path, preprocess=CenterCrop(25))


@pytest.mark.parametrize("content", [b"not an image at all", "truncated"])
def test_unreadable_image_names_the_file(tmp_path, content):
    path = tmp_path / "tile.png"
    if content == "truncated":
        write_image(tmp_path / "full.png", (64, 64))
        path.write_bytes((tmp_path / "full.png").read_bytes()[:200])
    else:
        path.write_bytes(content)
    with pytest.raises(EvalsuiteError, match=f"cannot read image {path}"):
        open_rgb(path)


def test_decompression_bomb_limit_is_a_clear_error_unless_lifted(tmp_path):
    path = write_image(tmp_path / "big.png", (64, 64))
    with pytest.raises(EvalsuiteError, match=f"cannot read image {path}"):
        open_rgb(path, max_pixels=100)
    assert open_rgb(path, max_pixels=None).size == (64, 64)
    assert Image.MAX_IMAGE_PIXELS is not None  # the global limit is restored
