"""PanNuke nuclei segmentation, read from the fold arrays as distributed (Warwick TIA).

Layout under --data-root, one folder per fold N (1, 2, 3):
  Fold N/images/foldN/images.npy  (tiles, 256, 256, 3) float64, RGB values 0..255
  Fold N/images/foldN/types.npy   (tiles,) tissue type names (optional; when the test fold has one, the
                                  test bootstrap resamples tissue types, else images)
  Fold N/masks/foldN/masks.npy    (tiles, 256, 256, 6) float64: channels 0..4 hold instance ids of
                                  neoplastic, inflammatory, connective, dead, epithelial nuclei;
                                  channel 5 is background
Class map: 0 background, 1 neoplastic, 2 inflammatory, 3 connective, 4 dead, 5 epithelial. A pixel
takes the type of the channel 0..4 that holds an instance id there (the first one if several do);
a pixel with none is background (channel 5 is not read). Splits: fold 1 train, fold 2 val, fold 3
test (the common PanNuke split; the card can name other folds). The whole 256 px tile is resized
to the backbone input; labels stay at 256x256.

The arrays are never loaded whole: the 6-channel float64 masks of one fold are about 8 GB.
Rows are read one at a time through `NpyRows` (positioned reads, nothing mapped), and every
process (DataLoader workers included) opens the files itself.
"""

import os
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error
from evalsuite.readers.item_identity import relative_name
from evalsuite.readers.masks.base import CachedSource, SegmentationReader
from evalsuite.storage.npy_rows import NpyRows

TASK = "pannuke"
LAYOUT = "'Fold N/images/foldN/images.npy' and 'Fold N/masks/foldN/masks.npy' (N = 1, 2, 3)"
CLASSES = ["background", "neoplastic", "inflammatory", "connective", "dead", "epithelial"]
TYPE_CHANNELS = 5
MASK_CHANNELS = 6
# Tiles per fold in the Warwick release (2,656 / 2,523 / 2,722; 7,901 in all).
OFFICIAL_COUNTS = {1: 2656, 2: 2523, 3: 2722}


def fold_paths(root: Path, fold: int) -> dict:
    base = Path(root) / f"Fold {fold}"
    return {"images": base / "images" / f"fold{fold}" / "images.npy",
            "types": base / "images" / f"fold{fold}" / "types.npy",
            "masks": base / "masks" / f"fold{fold}" / "masks.npy"}


def _open(path: Path) -> np.ndarray:
    if not path.is_file():
        raise layout_error(TASK, f"missing file {path}", LAYOUT)
    try:
        return np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} as a .npy array ({' '.join(str(exc).split())}); "
                             f"re-download the fold") from None


def _tissue_types(path: Path, tiles: int) -> np.ndarray:
    """The fold's tissue type name of each tile (str [tiles]); the released file is a string array."""
    try:
        types = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} as an array of tissue type names "
                             f"({' '.join(str(exc).split())}); re-download the fold or remove the file") from None
    if types.ndim != 1 or len(types) != tiles:
        raise EvalsuiteError(f"{TASK}: {path} has {len(types) if types.ndim else 0} entries but the fold has {tiles} "
                             f"tiles; re-download the fold or remove the file")
    return types.astype(str)


class PannukeFolds(CachedSource):
    """Sources = (fold, row) pairs numbered consecutively over the folds the card uses."""

    def __init__(self, root: Path, folds: list[int]):
        super().__init__()
        self.paths, self.rows, self.types = {}, [], {}
        for fold in folds:
            paths = fold_paths(root, fold)
            images, masks = _open(paths["images"]), _open(paths["masks"])
            if images.ndim != 4 or images.shape[-1] != 3:
                raise EvalsuiteError(f"{TASK}: {paths['images']} has shape {images.shape}; expected "
                                     f"(tiles, height, width, 3) RGB")
            if masks.ndim != 4 or masks.shape[-1] != MASK_CHANNELS:
                raise EvalsuiteError(f"{TASK}: {paths['masks']} has shape {masks.shape}; expected "
                                     f"(tiles, height, width, {MASK_CHANNELS})")
            if masks.shape[:3] != images.shape[:3]:
                raise EvalsuiteError(f"{TASK}: {paths['masks']} has shape {masks.shape} but {paths['images']} has "
                                     f"{images.shape}; tiles, height and width must agree")
            if images.shape[1] != images.shape[2]:
                raise EvalsuiteError(f"{TASK}: {paths['images']} tiles are {images.shape[1]}x{images.shape[2]}; "
                                     f"expected square tiles")
            if paths["types"].is_file():
                self.types[fold] = _tissue_types(paths["types"], len(images))
            self.paths[fold] = paths
            self.rows += [(fold, row) for row in range(len(images))]
            self.tile_px = int(images.shape[1])
        self._arrays, self._pid = {}, None

    def _array(self, fold: int, kind: str) -> NpyRows:
        if self._pid != os.getpid():  # a forked worker opens the files itself
            self._arrays, self._pid = {}, os.getpid()
        if (fold, kind) not in self._arrays:
            self._arrays[fold, kind] = NpyRows(self.paths[fold][kind])
        return self._arrays[fold, kind]

    def read_image(self, index: int) -> np.ndarray:
        fold, row = self.rows[index]
        pixels = self._array(fold, "images")[row]
        if pixels.dtype == np.uint8:
            return pixels
        return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)

    def mask(self, index: int) -> np.ndarray:
        fold, row = self.rows[index]
        instances = self._array(fold, "masks")[row][..., :TYPE_CHANNELS]
        if not np.isfinite(instances).all() or (instances < 0).any():
            raise EvalsuiteError(f"{TASK}: {self.paths[fold]['masks']} tile {row} has negative or non-finite "
                                 f"instance ids (class ids out of range); re-download the fold")
        present = instances > 0
        return np.where(present.any(axis=-1), present.argmax(axis=-1) + 1, 0).astype(np.uint8)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.update(_arrays={}, _pid=None)
        return state


class PannukeReader(SegmentationReader):
    def __init__(self, card, data_root: Path, train_fold: int = 1, val_fold: int = 2, test_fold: int = 3,
                 check_counts: bool = True):
        check_classes(card, CLASSES, TASK, "class map (background + the 5 nucleus types of masks.npy)")
        folds = {"train": train_fold, "val": val_fold, "test": test_fold}
        if sorted(folds.values()) != [1, 2, 3]:
            raise EvalsuiteError(f"task card {card.path}: reader.args train_fold, val_fold and test_fold must be "
                                 f"1, 2 and 3 in some order, got {folds}")
        source = PannukeFolds(Path(data_root), list(folds.values()))
        super().__init__(card, source.tile_px)
        self.source = source
        self.source_names = [f"{relative_name(source.paths[fold]['images'], data_root)} row {row}"
                             for fold, row in source.rows]
        rows = np.array([fold for fold, _ in source.rows])
        for split, fold in folds.items():
            indices = np.flatnonzero(rows == fold)
            check_count(TASK, f"fold {fold}", len(indices), OFFICIAL_COUNTS[fold], check_counts)
            self.tiles[split] = np.stack([indices, np.zeros_like(indices), np.zeros_like(indices)], axis=1)
        if folds["test"] in source.types:  # images of one tissue type are not independent: resample types
            self.interval_unit = "tissue type"
            self.source_clusters = [str(source.types[fold][row]) if fold in source.types else f"fold {fold} tile {row}"
                                    for fold, row in source.rows]
        else:
            self.interval_unit = "image"
