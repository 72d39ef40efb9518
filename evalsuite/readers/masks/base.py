"""Helpers shared by the segmentation readers (pannuke, consep, monusac, hgsc_seg).

A segmentation reader describes its data as *sources* (an image with its class mask: a PanNuke
array row, a CoNSeP or MoNuSAC image file, the demo crop) and *tiles* (source, top, left) of
`tile_px` x `tile_px` pixels cut from them. `SegTileDataset` serves the tiles:

- items are `(transform(PIL tile), tile index)`: the backbone only needs the image, and the
  masks are not decoded per item;
- `labels` is the uint8 array [tiles, tile_px, tile_px] of class ids (0 = background,
  IGNORE_INDEX = 255 = ignored), built on first access, one source mask at a time, so a
  split whose features are already cached never decodes a mask;
- a tile that reaches past the image edge is padded: white (255) image pixels, IGNORE_INDEX
  labels, so padding is neither trained on nor scored.

The source decodes one image at a time and keeps the last one (tiles of an image are
consecutive), so a DataLoader worker holds at most one decoded image.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.segmentation import IGNORE_INDEX
from evalsuite.readers.base import Reader
from evalsuite.readers.batch_decoding import BatchDecoding
from evalsuite.readers.files import check_classes
from evalsuite.readers.item_identity import relative_name, tile_name
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.splits import carve_val_units

PAD_PIXEL = 255


def grid_origins(size_px: int, tile_px: int, stride_px: int, cover: bool) -> list[int]:
    """Tile starts along one axis: `cover` pads the last tile past the edge; otherwise a remainder
    shorter than a tile is left out."""
    if cover:
        return list(range(0, max(size_px, 1), stride_px))
    return list(range(0, size_px - tile_px + 1, stride_px))


def grid_tiles(source_index: int, height_px: int, width_px: int, tile_px: int, stride_px: int, cover: bool,
               top_px: int = 0, left_px: int = 0) -> list[tuple[int, int, int]]:
    """(source index, top, left) of every tile of a height x width region at (top_px, left_px), row by row: the
    one grid tiling of the segmentation readers (CoNSeP, MoNuSAC, the demo's blocks)."""
    return [(source_index, top_px + top, left_px + left) for top in grid_origins(height_px, tile_px, stride_px, cover)
            for left in grid_origins(width_px, tile_px, stride_px, cover)]


def check_tiling(card, tile_px, stride_px, val_fraction: float | None = None) -> None:
    """Card arguments shared by the tiling readers: tile size, stride, and the carved val fraction."""
    for name, value in (("tile_size_px", tile_px), ("stride_px", stride_px)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise EvalsuiteError(f"task card {card.path}: reader.args.{name} must be a positive integer, got {value!r}")
    if val_fraction is not None:
        checked_fraction(card, "val_fraction", val_fraction)


def check_grid_card(card, classes: list, task: str, what: str, tile_px, stride_px, val_fraction) -> None:
    """The card of a reader that tiles whole images on a grid and carves val from train (CoNSeP, MoNuSAC)."""
    check_classes(card, classes, task, what)
    check_tiling(card, tile_px, stride_px, val_fraction)


def check_mask_values(mask: np.ndarray, num_classes: int, what: str, allow_ignore: bool = False) -> None:
    values = np.unique(mask)
    bad = values[(values < 0) | (values >= num_classes)]
    if allow_ignore:
        bad = bad[bad != IGNORE_INDEX]
    if len(bad):
        raise EvalsuiteError(f"{what} has class id {bad[0]} outside 0..{num_classes - 1}; "
                             f"check the file or the card's classes")


class SegmentationReader(Reader):
    """Base: a subclass sets `self.source`, `self.tiles = {split: int64 [n, 3] (source, top, left)}` and
    `self.source_names` (what identifies each source: a file relative to the data root, an array row), and where it
    knows the test bootstrap's clusters `self.source_clusters` (one id per source) and `interval_unit`."""

    def __init__(self, card, tile_px: int):
        self.card = card
        self.tile_px = tile_px
        self.source = None
        self.tiles: dict = {}
        self.source_clusters: list | None = None  # None: every tile is its own unit
        self.source_names: list | None = None  # None: the tiles' items cannot be named

    def dataset(self, split: str, transform) -> "SegTileDataset":
        self.check_split(split, self.tiles)
        return SegTileDataset(self.source, self.tiles[split], self.tile_px, transform)

    def item_ids(self, split: str) -> list | None:
        """Each tile's source and origin in it, in dataset order."""
        self.check_split(split, self.tiles)
        if self.source_names is None:
            return None
        return [tile_name(self.source_names[source], top, left, self.tile_px)
                for source, top, left in self.tiles[split]]

    def groups(self, split: str) -> list | None:
        """The cluster id of each tile of `split` (that of its source), in dataset order; None without clusters."""
        self.check_split(split, self.tiles)
        if self.source_clusters is None:
            return None
        return [self.source_clusters[source] for source in self.tiles[split][:, 0]]


@dataclass(frozen=True)
class GridImage:
    """One image of a grid-tiling reader: in the test folder or not, the unit val is carved by (the image or its
    patient), its size, and its name (the test bootstrap's cluster: tiles of one image are not independent)."""
    test: bool
    unit: str
    height_px: int
    width_px: int
    name: str


class GridTilingReader(SegmentationReader):
    """Base of the readers that tile whole images on a grid and carve val from train by unit (CoNSeP, MoNuSAC).

    A subclass names its CLASSES, TASK, CLASS_MAP (how its label files map to the card's classes), its default
    tiling and whether tiles cover the image edge (padded) or drop a remainder; its `scan` checks the layout,
    sets `self.source` (whose `images` are the image files) and returns one GridImage per image in source order."""

    CLASSES: list = []
    TASK = ""
    CLASS_MAP = ""
    TILE_PX = STRIDE_PX = 256
    COVER = False
    interval_unit = "image"  # the bootstrap resamples source images with all their tiles

    def __init__(self, card, data_root: Path, tile_size_px: int | None = None, stride_px: int | None = None,
                 val_fraction: float = 0.2, val_seed: int = 0, check_counts: bool = True):
        tile_size_px = self.TILE_PX if tile_size_px is None else tile_size_px
        stride_px = self.STRIDE_PX if stride_px is None else stride_px
        check_grid_card(card, self.CLASSES, self.TASK, self.CLASS_MAP, tile_size_px, stride_px, val_fraction)
        checked_seed(card, "val_seed", val_seed)
        super().__init__(card, tile_size_px)
        images = self.scan(Path(data_root), check_counts)
        val_units = carve_val_units([image.unit for image in images if not image.test], val_fraction, val_seed)
        tiles = {"train": [], "val": [], "test": []}
        for index, image in enumerate(images):
            split = "test" if image.test else "val" if image.unit in val_units else "train"
            tiles[split] += grid_tiles(index, image.height_px, image.width_px, tile_size_px, stride_px, self.COVER)
        self.tiles = {split: np.array(rows, dtype=np.int64).reshape(-1, 3) for split, rows in tiles.items()}
        self.source_clusters = [image.name for image in images]
        self.source_names = [relative_name(path, data_root) for path in self.source.images]

    def scan(self, root: Path, check_counts: bool) -> list[GridImage]:
        raise NotImplementedError


class SegTileDataset(BatchDecoding, torch.utils.data.Dataset):
    """Items `(transform(tile), tile index)`; batches are decoded as readers/batch_decoding.py says (uint8 tiles
    from the workers, converted on the batch's device)."""

    def __init__(self, source, tiles: np.ndarray, tile_px: int, transform):
        self.source = source
        self.tiles = np.asarray(tiles, dtype=np.int64).reshape(-1, 3)
        self.tile_px = tile_px
        self.transform = transform
        self._labels = None
        self.init_batch_decoding(transform, tile_px)

    def __len__(self) -> int:
        return len(self.tiles)

    @property
    def label_shape(self) -> tuple[int, int]:
        """One mask's shape (uint8 class ids), known without reading any mask: the budget plans with it."""
        return (self.tile_px, self.tile_px)

    @property
    def labels(self) -> np.ndarray:
        if self._labels is None:
            labels = np.empty((len(self.tiles), self.tile_px, self.tile_px), dtype=np.uint8)
            for src in np.unique(self.tiles[:, 0]):
                mask = self.source.mask(int(src))
                for i in np.flatnonzero(self.tiles[:, 0] == src):
                    labels[i] = crop(mask, self.tiles[i, 1], self.tiles[i, 2], self.tile_px, IGNORE_INDEX)
            self._labels = labels
        return self._labels

    def __getstate__(self) -> dict:
        # Spawned DataLoader workers need tiles, not masks: they return the tile index.
        return {**self.__dict__, "_labels": None}

    def image(self, index: int) -> Image.Image:
        src, top, left = (int(v) for v in self.tiles[index])
        return Image.fromarray(crop(self.source.image(src), top, left, self.tile_px, PAD_PIXEL))

    def label(self, index: int) -> int:
        return index  # the masks stay in the main process (`labels`); an item names its tile


def crop(array: np.ndarray, top: int, left: int, size: int, fill) -> np.ndarray:
    """array[top:top+size, left:left+size], padded with `fill` where it runs past the edge."""
    window = array[top : top + size, left : left + size]
    if window.shape[:2] == (size, size):
        return np.ascontiguousarray(window)
    out = np.full((size, size, *array.shape[2:]), fill, dtype=array.dtype)
    out[: window.shape[0], : window.shape[1]] = window
    return out


class CachedSource:
    """Base of the file-backed sources: decodes one image at a time and keeps the last one."""

    def __init__(self):
        self._last = (None, None)

    def image(self, index: int) -> np.ndarray:
        # One read of `_last`: a batch's tiles are decoded on threads (readers/batch_decoding.py), and another thread
        # may replace it between a check and a second read.
        last = self._last
        if last[0] != index:
            last = self._last = (index, self.read_image(index))
        return last[1]

    def read_image(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def mask(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_last"] = (None, None)
        return state


def image_size(path, task: str) -> tuple[int, int]:
    """(height, width) from the image file's header, without decoding the pixels."""
    try:
        with Image.open(path) as opened:
            width, height = opened.size
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        reason = " ".join(str(exc).split())
        raise EvalsuiteError(f"{task}: cannot read image {path} ({reason}); re-download it") from None
    return height, width
