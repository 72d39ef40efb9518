"""The demo segmentation task: nucleus-type masks of the shipped hgsc_nest crop (evalsuite/data/hgsc_nest).

Protocol (also in datasets/demo_seg.yaml and docs/tasks.md):
- the 1500x1500 crop and its type mask (0 background, 1 connective, 2 inflammatory,
  3 neoplastic: `nuc_raster` of hgsc_nest_type_mask.npz) are cut into `tile_size_px` tiles
  with stride `stride_px`, placed inside the `block_size_px` blocks of the demo task (300 px,
  a 5x5 grid) so that no tile crosses a block edge;
- each block goes whole to one split by the demo's Latin square (readers/demo/hgsc_tiles.split_of),
  so the splits are spatially disjoint exactly as in the demo classification task: no pixel is
  in two splits (tiles of one block may overlap each other when stride < tile size);
- every tile is kept (no nucleus-content filter: background is a class here); labels stay at
  the tile's own resolution, the image is resized to the backbone input.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.demo.hgsc_tiles import (
    IMAGE_FILE,
    TYPE_MASK_FILE,
    check_block_tiling,
    read_image,
    read_type_mask,
    split_of,
)
from evalsuite.readers.masks.base import CachedSource, SegmentationReader, check_tiling, grid_tiles

CLASSES = ["background", "connective", "inflammatory", "neoplastic"]


class CropSource(CachedSource):
    def __init__(self, image: np.ndarray, mask: np.ndarray):
        super().__init__()
        self._image, self._mask = image, mask

    def read_image(self, index: int) -> np.ndarray:
        return self._image

    def mask(self, index: int) -> np.ndarray:
        return self._mask


class HgscSegReader(SegmentationReader):
    def __init__(self, card, data_root: Path, tile_size_px: int = 100, stride_px: int = 100,
                 block_size_px: int = 300, check_counts: bool = True):
        # check_counts: no official split sizes exist for this crop; accepted for a uniform interface.
        check_tiling(card, tile_size_px, stride_px)
        if card.classes != CLASSES:
            raise EvalsuiteError(f"task card {card.path}: field 'classes' must be {CLASSES} for the hgsc_nest "
                                 f"type mask (ids 0..3), got {card.classes}")
        check_block_tiling(card, tile_size_px, stride_px, block_size_px)
        super().__init__(card, tile_size_px)
        image = read_image(Path(data_root) / IMAGE_FILE)
        mask = read_type_mask(Path(data_root) / TYPE_MASK_FILE, image.shape[:2], len(CLASSES) - 1)
        self.source = CropSource(image, mask.astype(np.uint8))
        self.source_names = [IMAGE_FILE]
        tiles = {"train": [], "val": [], "test": []}
        height, width = mask.shape
        for _, block_top, block_left in grid_tiles(0, height, width, block_size_px, block_size_px, cover=False):
            split = split_of(block_top, block_left, block_size_px)
            tiles[split] += grid_tiles(0, block_size_px, block_size_px, tile_size_px, stride_px, cover=False,
                                       top_px=block_top, left_px=block_left)
        self.tiles = {split: np.array(rows, dtype=np.int64).reshape(-1, 3) for split, rows in tiles.items()}
