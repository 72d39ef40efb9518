"""Base of the segmentation readers whose dataset fixes each image's split and ships one label PNG per image
(OCELOT's tissue masks, SegPath's immunofluorescence masks), tiled on a grid as THUNDER tiles them.

THUNDER (MICS-Lab/thunder src/thunder/datasets/data_splits.py `compute_patches`, at 6fe47e0) cuts every image into
the non-overlapping 256 x 256 tiles that fit whole: origins 0, 256, ... up to size // 256 - 1 tiles a side, the
remainder dropped (16 tiles of a 1024 px OCELOT image, 9 of a 984 px SegPath image). `grid_tiles(..., cover=False)`
with tile = stride = 256 gives the same tiles (in row order; THUNDER lists them column by column).

A subclass names TASK, its LAYOUT, OFFICIAL_IMAGES {split: images} and `label_lut` (label PNG value -> class id,
IGNORE_INDEX, or INVALID for a value the dataset does not use), and its `scan` returns the images in split order.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_count, open_rgb
from evalsuite.readers.item_identity import relative_name
from evalsuite.readers.masks.base import CachedSource, SegmentationReader, check_tiling, grid_tiles, image_size

SPLITS = ("train", "val", "test")
INVALID = -1  # a label value the dataset does not define
THUNDER_TILE_PX = 256


@dataclass(frozen=True)
class LabelledImage:
    split: str
    image: Path
    mask: Path


def label_lut(values: dict) -> np.ndarray:
    """int16 [256]: label PNG value -> class id (or IGNORE_INDEX); INVALID for every value not in `values`."""
    lut = np.full(256, INVALID, dtype=np.int16)
    for value, class_id in values.items():
        lut[value] = class_id
    return lut


class LabelPngPairs(CachedSource):
    """Image files with their label PNGs; a label's values are mapped through `lut` and checked."""

    def __init__(self, task: str, images: list, masks: list, lut: np.ndarray, expected: str):
        super().__init__()
        self.task, self.images, self.masks, self.lut, self.expected = task, images, masks, lut, expected

    def read_image(self, index: int) -> np.ndarray:
        return np.asarray(open_rgb(self.images[index]))

    def mask(self, index: int) -> np.ndarray:
        path = self.masks[index]
        values = _label_values(path, self.task)
        height, width = image_size(self.images[index], self.task)
        if values.shape != (height, width):
            raise EvalsuiteError(f"{self.task}: label {path} is {values.shape[0]}x{values.shape[1]} but its image "
                                 f"{self.images[index]} is {height}x{width} (height x width); re-download the pair")
        if values.min() < 0 or values.max() > 255:
            raise EvalsuiteError(f"{self.task}: label {path} has value {int(values.max())} outside 0..255; "
                                 f"expected {self.expected}")
        classes = self.lut[values]
        if (classes == INVALID).any():
            bad = int(values[classes == INVALID][0])
            raise EvalsuiteError(f"{self.task}: label {path} has value {bad}, out of range: expected {self.expected}; "
                                 f"re-download the file")
        return classes.astype(np.uint8)


def _label_values(path: Path, task: str) -> np.ndarray:
    """The label PNG's values as an int array [H, W]; an RGB label's first channel, as THUNDER reads it."""
    try:
        with Image.open(path) as opened:
            values = np.asarray(opened)
    except FileNotFoundError:
        raise EvalsuiteError(f"{task}: missing label {path}; the files changed since the task was read") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise EvalsuiteError(f"{task}: cannot read label {path} ({' '.join(str(exc).split())}); "
                             f"re-download it") from None
    if values.ndim == 3:
        values = values[..., 0]
    return values.astype(np.int64)


class SplitGridReader(SegmentationReader):
    TASK = ""
    LAYOUT = ""
    OFFICIAL_IMAGES: dict = {}
    interval_unit = "image"  # the bootstrap resamples source images with all their tiles

    def __init__(self, card, data_root: Path, tile_size_px: int = THUNDER_TILE_PX,
                 stride_px: int = THUNDER_TILE_PX, check_counts: bool = True):
        check_tiling(card, tile_size_px, stride_px)
        super().__init__(card, tile_size_px)
        root = Path(data_root)
        labelled = self.scan(root)
        for split in SPLITS:
            found = sum(item.split == split for item in labelled)
            check_count(self.TASK, f"split {split}", found, self.OFFICIAL_IMAGES[split], check_counts)
        tiles = {split: [] for split in SPLITS}
        for index, item in enumerate(labelled):
            height, width = image_size(item.image, self.TASK)
            tiles[item.split] += grid_tiles(index, height, width, tile_size_px, stride_px, cover=False)
        for split, rows in tiles.items():
            if not rows:
                raise EvalsuiteError(f"{self.TASK}: split {split} has no image of at least {tile_size_px}x"
                                     f"{tile_size_px} px under {root}; expected {self.LAYOUT}")
        self.tiles = {split: np.array(rows, dtype=np.int64).reshape(-1, 3) for split, rows in tiles.items()}
        self.source = self.make_source(labelled)
        self.source_names = [relative_name(item.image, root) for item in labelled]
        self.source_clusters = list(self.source_names)  # tiles of one image are not independent

    def scan(self, root: Path) -> list[LabelledImage]:
        raise NotImplementedError

    def make_source(self, labelled: list[LabelledImage]) -> LabelPngPairs:
        raise NotImplementedError
