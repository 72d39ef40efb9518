"""PatchCamelyon (PCam), read from the HDF5 files as distributed on Zenodo (record 2546921).

Layout under --data-root: camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5, decompressed
(Zenodo ships them as .h5.gz). `x` is (N, 96, 96, 3) uint8 RGB, `y` is (N, 1, 1, 1) with 1 =
tumour in the central 32x32 px. Official sizes: 262,144 / 32,768 / 32,768; the card's val split
is the `valid` file.

Labels are read once from the y files; images are read row by row from the x file through a
handle opened lazily once per process (`LazyH5`): the reader's process keeps the handle it
opened to validate the file, and a DataLoader worker, seeing a new process id after the fork,
opens its own instead of touching its parent's. Persistent workers keep their handle across
epochs. Handles are not pickled, so spawned workers open their own too.

PCam's tiles come from few Camelyon16 slides (the splits never share one), and tiles of one slide
are correlated. The optional camelyonpatch_level_2_split_{train,valid,test}_meta.csv (header
`,coord_y,coord_x,tumor_patch,center_tumor_patch,wsi`, one row per h5 tile in the same order)
names each tile's slide in `wsi`: when present, `groups(split)` returns it and the test bootstrap
resamples slides; without it every tile is its own unit and the run says so.
"""

import csv
import os
import threading
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import LabelledImages, Reader
from evalsuite.readers.files import check_classes, check_count, layout_error

TASK = "pcam"
LAYOUT = "camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5"
META = "camelyonpatch_level_2_split_{split}_meta.csv"
SLIDE_COLUMN = "wsi"
FILE_SPLITS = {"train": "train", "val": "valid", "test": "test"}
OFFICIAL_COUNTS = {"train": 262_144, "val": 32_768, "test": 32_768}
CLASSES = ["no_tumor", "tumor"]
TILE_SHAPE = (96, 96, 3)


_OPENING = threading.Lock()


class LazyH5:
    """One HDF5 dataset, opened at most once per process and reused by every read in it."""

    def __init__(self, path: Path, key: str):
        self.path, self.key = Path(path), key
        self._pid, self._file, self._dataset = None, None, None

    def file(self) -> h5py.File:
        with _OPENING:  # a batch's tiles are read on several threads: the first reads must open the file once
            return self._opened()

    def get(self) -> h5py.Dataset:
        with _OPENING:
            file = self._opened()
            if self._dataset is None:
                self._dataset = file[self.key]
            return self._dataset

    def _opened(self) -> h5py.File:
        if self._pid != os.getpid():
            # A forked child inherits the parent's handle: never read through it, open our own.
            self._file, self._dataset = _open_h5(self.path), None
            self._pid = os.getpid()
        return self._file

    def __getstate__(self) -> dict:
        return {"path": self.path, "key": self.key, "_pid": None, "_file": None, "_dataset": None}


def _open_h5(path: Path) -> h5py.File:
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise EvalsuiteError(f"{TASK}: cannot open {path} as HDF5 ({exc}); re-download it") from None


def _h5_path(root: Path, split: str, kind: str) -> Path:
    path = root / f"camelyonpatch_level_2_split_{FILE_SPLITS[split]}_{kind}.h5"
    if path.is_file():
        return path
    packed = path.with_name(path.name + ".gz")
    if packed.is_file():
        raise EvalsuiteError(f"{TASK}: found {packed} but the reader needs it decompressed: run `gunzip -k {packed}`")
    raise layout_error(TASK, f"missing file {path}", LAYOUT)


def _dataset(file: h5py.File, path: Path, key: str) -> h5py.Dataset:
    if key not in file:
        raise EvalsuiteError(f"{TASK}: {path} has no dataset '{key}' (found {', '.join(file.keys()) or 'none'}); "
                             f"expected the distributed file {LAYOUT}")
    return file[key]


def _read_slides(path: Path, tiles: int, x_path: Path) -> list[str]:
    """The `wsi` value of each row of a meta CSV that must describe the `tiles` tiles of `x_path`, in order."""
    fix = "re-download it from the PCam release or remove it (it is optional: tiles are then the units)"
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = csv.DictReader(handle)
            if SLIDE_COLUMN not in (rows.fieldnames or []):
                raise EvalsuiteError(f"{TASK}: {path} has no '{SLIDE_COLUMN}' column (the source slide); {fix}")
            slides = [(row[SLIDE_COLUMN] or "").strip() for row in rows]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} ({exc}); {fix}") from None
    if len(slides) != tiles:
        raise EvalsuiteError(f"{TASK}: {path} lists {len(slides)} tiles but {x_path.name} has {tiles}; "
                             f"the meta file belongs to another split or download: {fix}")
    if "" in slides:
        raise EvalsuiteError(f"{TASK}: {path} line {slides.index('') + 2} has no '{SLIDE_COLUMN}' value; {fix}")
    return slides


class PcamDataset(LabelledImages):
    def __init__(self, images: LazyH5, labels: np.ndarray, transform):
        super().__init__(labels, transform)
        self.images = images

    def image(self, index: int) -> Image.Image:
        return Image.fromarray(self.images.get()[index])


class PcamReader(Reader):
    clusters_fix = f"put {META.format(split='test')} (PCam's tile-to-slide table) beside the h5 files"

    def __init__(self, card, data_root: Path, check_counts: bool = True):
        check_classes(card, CLASSES, TASK, "y values 0 and 1")
        self.card = card
        self.images, self.labels, self.slides = {}, {}, {}
        for split in FILE_SPLITS:
            self.labels[split] = self._read_labels(_h5_path(Path(data_root), split, "y"))
            x_path = _h5_path(Path(data_root), split, "x")
            self.images[split] = self._checked_images(x_path, len(self.labels[split]))
            check_count(TASK, f"split '{FILE_SPLITS[split]}'", len(self.labels[split]), OFFICIAL_COUNTS[split],
                        check_counts)
            meta = Path(data_root) / META.format(split=FILE_SPLITS[split])
            if meta.is_file():  # optional: the benchmark's own files are the h5 pairs
                self.slides[split] = _read_slides(meta, len(self.labels[split]), x_path)
        # What the test bootstrap resamples: the source slides when the test meta CSV names them.
        self.interval_unit = "slide" if "test" in self.slides else "tile"

    def item_ids(self, split: str) -> list:
        """Each tile's row in its split's x file (the file name is the same under any data root)."""
        self.check_split(split, self.labels)
        name = self.images[split].path.name
        return [f"{name} row {row}" for row in range(len(self.labels[split]))]

    def groups(self, split: str) -> list | None:
        """The source slide (`wsi`) of each tile of `split`, or None without that split's meta CSV."""
        self.check_split(split, self.labels)
        return self.slides.get(split)

    @staticmethod
    def _read_labels(path: Path) -> np.ndarray:
        with _open_h5(path) as file:
            y = _dataset(file, path, "y")
            if y.ndim != 4 or y.shape[1:] != (1, 1, 1):
                raise EvalsuiteError(f"{TASK}: {path} 'y' has shape {y.shape}; expected (N, 1, 1, 1)")
            labels = y[:].reshape(-1).astype(np.int64)
        if len(labels) and not np.isin(labels, (0, 1)).all():
            raise EvalsuiteError(f"{TASK}: {path} 'y' holds values other than 0 and 1")
        return labels

    @staticmethod
    def _checked_images(path: Path, n_labels: int) -> LazyH5:
        images = LazyH5(path, "x")
        x = _dataset(images.file(), path, "x")
        if x.ndim != 4 or x.shape[1:] != TILE_SHAPE or x.dtype != np.uint8:
            raise EvalsuiteError(f"{TASK}: {path} 'x' is {x.dtype} {x.shape}; expected uint8 (N, 96, 96, 3)")
        if len(x) != n_labels:
            raise EvalsuiteError(f"{TASK}: {path} 'x' has {len(x)} tiles but its y file has {n_labels} labels; "
                                 f"re-download the pair")
        return images

    def dataset(self, split: str, transform) -> PcamDataset:
        self.check_split(split, self.labels)
        return PcamDataset(self.images[split], self.labels[split], transform)
