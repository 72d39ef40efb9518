"""The demo regression task: nuclei of each type per tile of the shipped hgsc_nest crop, counted from its masks.

Protocol (also in datasets/demo_counts.yaml and docs/tasks.md):
- every nucleus of the instance mask (`nuc_raster` of hgsc_nest_inst_mask.npz, one id per nucleus) takes the
  type covering most of its pixels in the type mask (1 connective, 2 inflammatory, 3 neoplastic) and is placed
  at its centroid;
- the crop is cut into `tile_size_px` tiles with stride `stride_px` inside the `block_size_px` blocks of the
  demo task (300 px, a 5x5 grid), so no tile crosses a block edge; a tile's targets are log1p of the number of
  nuclei of each type whose centroid lies in it (real counts from the real annotation);
- whole blocks go to one split by the demo's Latin square (readers/demo/hgsc_tiles.split_of): no pixel is in
  two splits. Tiles of one block overlap when stride < tile, so a block is the bootstrap's cluster.
"""

from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import Reader, TargetImages
from evalsuite.readers.demo.hgsc_tiles import (
    IMAGE_FILE,
    MASK_KEY,
    TYPE_MASK_FILE,
    check_block_tiling,
    read_image,
    read_type_mask,
    split_of,
)
from evalsuite.readers.item_identity import tile_name
from evalsuite.readers.masks.base import check_tiling, grid_tiles

INSTANCE_MASK_FILE = "hgsc_nest_inst_mask.npz"
TYPES = ["connective", "inflammatory", "neoplastic"]  # type ids 1..3 of the type mask


class CountTiles(TargetImages):
    def __init__(self, image: np.ndarray, origins: np.ndarray, targets: np.ndarray, tile_size_px: int, transform):
        super().__init__(targets, transform)
        self.slide_rgb, self.origins, self.tile_size_px = image, origins, tile_size_px

    def image(self, index: int) -> Image.Image:
        top, left = self.origins[index]
        return Image.fromarray(self.slide_rgb[top : top + self.tile_size_px, left : left + self.tile_size_px])


class HgscCountReader(Reader):
    interval_unit = "block"  # tiles of one 300 px block overlap: the block is the independent unit

    def __init__(self, card, data_root: Path, tile_size_px: int = 100, stride_px: int = 50, block_size_px: int = 300,
                 check_counts: bool = True):
        # check_counts: no official split sizes exist for this crop; accepted for a uniform interface.
        check_tiling(card, tile_size_px, stride_px)
        if card.targets != TYPES:
            raise EvalsuiteError(f"task card {card.path}: field 'targets' must be {TYPES} (the type ids 1..3 of the "
                                 f"hgsc_nest type mask), got {card.targets}")
        check_block_tiling(card, tile_size_px, stride_px, block_size_px)
        self.card, self.tile_size_px = card, tile_size_px
        self.image = read_image(Path(data_root) / IMAGE_FILE)
        types = read_type_mask(Path(data_root) / TYPE_MASK_FILE, self.image.shape[:2], len(TYPES))
        instances = read_instance_mask(Path(data_root) / INSTANCE_MASK_FILE, self.image.shape[:2])
        centroids, nucleus_types = nuclei(instances, types)
        rows = []
        for _, block_top, block_left in grid_tiles(0, *types.shape, block_size_px, block_size_px, cover=False):
            for _, top, left in grid_tiles(0, block_size_px, block_size_px, tile_size_px, stride_px, cover=False,
                                           top_px=block_top, left_px=block_left):
                counts = _counts_in(centroids, nucleus_types, top, left, tile_size_px)
                rows.append((top, left, block_top // block_size_px * 100 + block_left // block_size_px,
                             split_of(block_top, block_left, block_size_px), counts))
        self.origins = np.array([(r[0], r[1]) for r in rows], dtype=np.int64)
        self.blocks = np.array([r[2] for r in rows], dtype=np.int64)
        self.splits = np.array([r[3] for r in rows])
        self.targets = np.log1p(np.array([r[4] for r in rows], dtype=np.float64))

    def dataset(self, split: str, transform) -> CountTiles:
        self.check_split(split, self.card.splits)
        chosen = self.splits == split
        return CountTiles(self.image, self.origins[chosen], self.targets[chosen], self.tile_size_px, transform)

    def groups(self, split: str) -> list:
        self.check_split(split, self.card.splits)
        return self.blocks[self.splits == split].tolist()

    def item_ids(self, split: str) -> list:
        """Each tile's origin in the crop, in dataset order."""
        self.check_split(split, self.card.splits)
        return [tile_name(IMAGE_FILE, top, left, self.tile_size_px) for top, left in self.origins[self.splits == split]]


def read_instance_mask(path: Path, image_shape: tuple) -> np.ndarray:
    if not path.is_file():
        raise EvalsuiteError(f"missing data file {path}; point --data-root at the folder holding {INSTANCE_MASK_FILE}")
    try:
        with np.load(path) as archive:
            if MASK_KEY not in archive:
                raise EvalsuiteError(f"instance mask {path} has no array '{MASK_KEY}'; found "
                                     f"{', '.join(archive.files)}")
            mask = archive[MASK_KEY]
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"cannot read instance mask {path} ({exc}); replace it with a valid .npz") from None
    if mask.shape != tuple(image_shape) or mask.min() < 0:
        raise EvalsuiteError(f"instance mask {path} has shape {mask.shape} and ids from {mask.min()}; it must be "
                             f"{tuple(image_shape)} (the image's) with ids >= 0 (0 = no nucleus)")
    return mask.astype(np.int64, copy=False)


def nuclei(instances: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(centroid (row, col) float [K, 2], type id 1..3 [K]) of every nucleus; a nucleus's type is the type covering
    most of its pixels (an instance with no typed pixel is left out: it has no type to count under)."""
    ids = instances.ravel()
    inside = ids > 0
    ids, typed = ids[inside], types.ravel()[inside]
    rows, cols = np.nonzero(instances > 0)
    labels, index = np.unique(ids, return_inverse=True)
    pixels = np.bincount(index).astype(np.float64)
    centroids = np.stack([np.bincount(index, rows) / pixels, np.bincount(index, cols) / pixels], axis=1)
    votes = np.zeros((len(labels), len(TYPES) + 1))
    np.add.at(votes, (index, typed), 1)
    votes[:, 0] = 0  # background pixels under an instance do not vote
    has_type = votes.max(axis=1) > 0
    return centroids[has_type], votes[has_type].argmax(axis=1)


def _counts_in(centroids: np.ndarray, nucleus_types: np.ndarray, top: int, left: int, size: int) -> np.ndarray:
    inside = ((centroids[:, 0] >= top) & (centroids[:, 0] < top + size) & (centroids[:, 1] >= left)
              & (centroids[:, 1] < left + size))
    return np.bincount(nucleus_types[inside], minlength=len(TYPES) + 1)[1:]
