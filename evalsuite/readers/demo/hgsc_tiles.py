"""The demo task: tiles of the hgsc_nest H&E crop labelled by their dominant nucleus type.

Protocol (also in datasets/demo.yaml and docs/tasks.md):
- the 1500x1500 crop is cut into non-overlapping `tile_size_px` tiles (60 px: 625 tiles);
- a tile's label is the nucleus type covering most of its nucleus pixels; a tile whose
  nucleus pixels are below `min_nucleus_fraction` of its area has no meaningful label and is
  left out (not relabelled as a "background" class: the task is about nucleus types);
- splits are spatially disjoint: the crop is divided into `block_size_px` blocks (300 px, a
  5x5 grid) and whole blocks go to one split by a Latin-square pattern, so every split
  samples every row and column of the crop and no pixel belongs to two splits.
"""

from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import LabelledImages, Reader
from evalsuite.readers.item_identity import tile_name

IMAGE_FILE = "hgsc_nest.jpg"
TYPE_MASK_FILE = "hgsc_nest_type_mask.npz"
MASK_KEY = "nuc_raster"
# Block (row, col) goes to split SPLIT_OF_RESIDUE[(row + 2 * col) % 5]: a 5x5 Latin square.
SPLIT_OF_RESIDUE = ("train", "train", "train", "val", "test")


def split_of(row_px: int, col_px: int, block_size_px: int) -> str:
    """The split of the pixel (row, col): that of its block_size_px block in the Latin square.

    Shared with the demo segmentation task (readers/demo/hgsc_seg.py), whose tiles lie inside one block.
    """
    residue = (row_px // block_size_px + 2 * (col_px // block_size_px)) % len(SPLIT_OF_RESIDUE)
    return SPLIT_OF_RESIDUE[residue]


def check_block_tiling(card, tile_size_px: int, stride_px: int, block_size_px: int) -> None:
    """Tiles of the demo crop's blocks (demo_seg, demo_counts) must fill a block exactly, so none crosses into
    another block (and split)."""
    if tile_size_px > block_size_px or (block_size_px - tile_size_px) % stride_px:
        raise EvalsuiteError(f"task card {card.path}: reader.args tiles of {tile_size_px} px with stride "
                             f"{stride_px} px must fill a {block_size_px} px block exactly "
                             "((block - tile) must be a multiple of the stride)")


class TileDataset(LabelledImages):
    def __init__(self, image: np.ndarray, origins: np.ndarray, labels: np.ndarray, tile_size_px: int, transform):
        super().__init__(labels, transform)
        self.slide_rgb = image
        self.origins = origins
        self.tile_size_px = tile_size_px

    def image(self, index: int) -> Image.Image:
        row, col = self.origins[index]
        size = self.tile_size_px
        return Image.fromarray(self.slide_rgb[row : row + size, col : col + size])


class HgscTileReader(Reader):
    def __init__(self, card, data_root: Path, tile_size_px: int = 60, block_size_px: int = 300,
                 min_nucleus_fraction: float = 0.02, check_counts: bool = True):
        # check_counts: no official split sizes exist for this crop; accepted for a uniform interface.
        if block_size_px % tile_size_px:
            raise EvalsuiteError(
                f"task card {card.path}: reader.args.block_size_px ({block_size_px}) must be a multiple of "
                f"tile_size_px ({tile_size_px})"
            )
        self.card = card
        self.tile_size_px = tile_size_px
        self.block_size_px = block_size_px
        self.min_nucleus_fraction = min_nucleus_fraction
        self.image = read_image(data_root / IMAGE_FILE)
        type_mask = read_type_mask(data_root / TYPE_MASK_FILE, self.image.shape[:2], card.num_classes)
        self.origins, self.labels, self.splits = self._tile(type_mask)

    def _tile(self, type_mask: np.ndarray):
        size, n_types = self.tile_size_px, self.card.num_classes
        min_pixels = self.min_nucleus_fraction * size * size
        origins, labels, splits = [], [], []
        height, width = type_mask.shape
        for row in range(0, height - size + 1, size):
            for col in range(0, width - size + 1, size):
                counts = np.bincount(type_mask[row : row + size, col : col + size].ravel(), minlength=n_types + 1)[1:]
                if counts.sum() < min_pixels:
                    continue
                origins.append((row, col))
                labels.append(int(counts.argmax()))
                splits.append(split_of(row, col, self.block_size_px))
        return np.array(origins, dtype=np.int64), np.array(labels, dtype=np.int64), np.array(splits)

    def dataset(self, split: str, transform) -> TileDataset:
        self.check_split(split, self.card.splits)
        chosen = self.splits == split
        return TileDataset(self.image, self.origins[chosen], self.labels[chosen], self.tile_size_px, transform)

    def item_ids(self, split: str) -> list:
        """Each tile's origin in the crop, in dataset order."""
        self.check_split(split, self.card.splits)
        return [tile_name(IMAGE_FILE, row, col, self.tile_size_px) for row, col in self.origins[self.splits == split]]


def read_image(path: Path) -> np.ndarray:
    if not path.is_file():
        raise EvalsuiteError(f"missing data file {path}; point --data-root at the folder holding {IMAGE_FILE}")
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))
    except OSError as exc:
        raise EvalsuiteError(f"cannot read image {path} ({exc}); replace it with a valid RGB image") from None


def read_type_mask(path: Path, image_shape: tuple, n_types: int) -> np.ndarray:
    if not path.is_file():
        raise EvalsuiteError(f"missing data file {path}; point --data-root at the folder holding {TYPE_MASK_FILE}")
    try:
        with np.load(path) as archive:
            if MASK_KEY not in archive:
                raise EvalsuiteError(f"type mask {path} has no array '{MASK_KEY}'; found {', '.join(archive.files)}")
            mask = archive[MASK_KEY]
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"cannot read type mask {path} ({exc}); replace it with a valid .npz") from None
    if mask.shape != tuple(image_shape):
        raise EvalsuiteError(f"type mask {path} has shape {mask.shape} but the image is {tuple(image_shape)}")
    if mask.min() < 0 or mask.max() > n_types:
        raise EvalsuiteError(
            f"type mask {path} has type ids {mask.min()}..{mask.max()}; the card allows 0 (background) to {n_types}"
        )
    return mask.astype(np.int64, copy=False)
