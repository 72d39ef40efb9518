"""Helpers shared by the tile-classification readers (bach, crc, mhist, bracs, breakhis, pcam).

A reader lists its samples as (file path, label) without decoding any image, checks the
official split sizes when asked, and hands out `ImageFileDataset`s. Every problem with the
data on disk is an EvalsuiteError of one line naming the file or the expected path pattern.
"""

import contextlib
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import Reader

PREPROCESS_MODES = ("resize", "center_crop")


def layout_error(task: str, problem: str, layout: str) -> EvalsuiteError:
    return EvalsuiteError(f"{task}: {problem}; expected {layout} under --data-root (point --data-root at the "
                          f"folder that holds it)")


def require_dir(path: Path, task: str, layout: str) -> Path:
    if not path.is_dir():
        raise layout_error(task, f"missing folder {path}", layout)
    return path


def require_file(path: Path, task: str, layout: str) -> Path:
    if not path.is_file():
        raise layout_error(task, f"missing file {path}", layout)
    return path


def list_files(folder: Path, suffix: str) -> list[Path]:
    """Files in `folder` ending in `suffix` (case-insensitive), sorted by name; hidden files (`._x.tif`) are skipped."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.name.lower().endswith(suffix) and not p.name.startswith("."))


def class_folder_samples(root: Path, card, suffix: str, task: str, layout: str):
    """(paths, int64 labels) from `root/<class>/*<suffix>`, one folder per card class, in card order.

    A folder that is not one of the card's classes is named on stderr and skipped, or is an
    error when the card sets `classes_closed: true`."""
    require_dir(root, task, layout)
    _check_unknown_class_folders(root, card, task)
    paths, labels = [], []
    for label, name in enumerate(card.classes):
        folder = root / name
        if not folder.is_dir():
            raise layout_error(task, f"missing class folder {folder}", layout)
        files = list_files(folder, suffix)
        paths += files
        labels += [label] * len(files)
    return paths, np.array(labels, dtype=np.int64)


def _check_unknown_class_folders(root: Path, card, task: str) -> None:
    unknown = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                     and p.name not in card.classes)
    if not unknown:
        return
    if card.classes_closed:
        raise EvalsuiteError(f"{task}: {root} has class folders not in task card {card.path}: {', '.join(unknown)}; "
                             "remove them, or add them to the card's classes")
    print(f"evalsuite: note: {task}: skipping folders in {root} that are not among the card's classes: "
          f"{', '.join(unknown)} (set `classes_closed: true` in the card to make this an error)", file=sys.stderr)


def check_count(task: str, what: str, found: int, expected: int, check_counts: bool) -> None:
    if check_counts and found != expected:
        raise EvalsuiteError(
            f"{task}: {what} has {found} images but the official dataset has {expected}; point --data-root at the "
            f"complete dataset, or pass --no-count-check to evaluate a subset")


def check_classes(card, expected: list, task: str, what: str) -> None:
    if list(card.classes) != list(expected):
        raise EvalsuiteError(
            f"task card {card.path}: field 'classes' must be {list(expected)} for {task} {what}, got {card.classes}")


def carve_val(labels: np.ndarray, fraction: float, seed: int, groups=None) -> np.ndarray:
    """Boolean mask of the samples moved to val: a seeded, class-stratified share of units.

    A unit is one sample, or one group (e.g. a patient) when `groups` is given, so a group
    never straddles train and val. In each class (a group's class is that of its first sample)
    round(fraction * units) units go to val, at least one and never all of them when the
    class has two or more units. The choice depends only on the sorted unit ids and the seed.
    """
    labels = np.asarray(labels)
    units = np.arange(len(labels)) if groups is None else np.asarray(groups)
    unit_ids, first = np.unique(units, return_index=True)
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = unit_ids[labels[first] == label]
        n_val = min(max(int(round(fraction * len(members))), 1), len(members) - 1)
        if n_val > 0:
            chosen += list(rng.permutation(members)[:n_val])
    return np.isin(units, np.array(chosen, dtype=units.dtype))


@contextlib.contextmanager
def _pixel_limit(max_pixels):
    """Pillow's decompression-bomb limit for one open; `None` lifts it for trusted large images."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def open_rgb(path: Path, max_pixels=Image.MAX_IMAGE_PIXELS, preprocess=None) -> Image.Image:
    """Decode an image file to RGB and apply `preprocess`; an unreadable or corrupt file is an error naming it."""
    # Pillow warns (e.g. "Corrupt EXIF data") on stderr per file; the error below, if any, says it once.
    with warnings.catch_warnings(), _pixel_limit(max_pixels):
        warnings.simplefilter("ignore", UserWarning)
        image = _decode_rgb(path)
        if preprocess is None:
            return image
        try:
            return preprocess(image)
        except ValueError as exc:
            raise EvalsuiteError(f"cannot preprocess image {path}: {exc}") from None


def _decode_rgb(path: Path) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except FileNotFoundError:
        raise EvalsuiteError(f"missing image {path}; the file list changed since the task was read") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        reason = " ".join(str(exc).split())
        raise EvalsuiteError(f"cannot read image {path} ({reason}); re-download or replace the file, "
                             f"or remove it and pass --no-count-check") from None


class CenterCrop:
    """Crop the central `size` square (default: the largest square, side = the shorter image side)."""

    def __init__(self, size: int | None = None):
        self.size = size

    def __call__(self, image: Image.Image) -> Image.Image:
        width, height = image.size
        side = self.size or min(width, height)
        if side > min(width, height):
            raise ValueError(f"{width}x{height} px is smaller than reader.args.crop_px ({side}); lower crop_px")
        left, top = (width - side) // 2, (height - side) // 2
        return image.crop((left, top, left + side, top + side))


def build_preprocess(card, preprocess: str, crop_px):
    """The card's step before the backbone transform: `resize` (none) or `center_crop`."""
    if preprocess not in PREPROCESS_MODES:
        raise EvalsuiteError(f"task card {card.path}: reader.args.preprocess must be one of "
                             f"{', '.join(PREPROCESS_MODES)}, got '{preprocess}'")
    if crop_px is not None and (preprocess != "center_crop" or not isinstance(crop_px, int) or crop_px < 1):
        raise EvalsuiteError(f"task card {card.path}: reader.args.crop_px must be a positive integer and needs "
                             f"preprocess: center_crop")
    return CenterCrop(crop_px) if preprocess == "center_crop" else None


class ImageFileDataset(torch.utils.data.Dataset):
    """Items `(transform(preprocess(RGB image)), label)` from a list of image files."""

    def __init__(self, paths: list, labels: np.ndarray, transform, preprocess=None,
                 max_pixels=Image.MAX_IMAGE_PIXELS):
        self.paths = list(paths)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.transform = transform
        self.preprocess = preprocess
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        image = open_rgb(self.paths[index], self.max_pixels, self.preprocess)
        return self.transform(image), int(self.labels[index])


class FileListReader(Reader):
    """Base of the readers whose samples are image files.

    A subclass fills `self.splits = {split: (paths, labels)}` in its constructor; the card's
    `preprocess` (`resize` | `center_crop`) and optional `crop_px` apply to every split.
    A subclass that knows which samples share a patient or slide also fills
    `self.split_groups = {split: [cluster id per sample]}` and names the unit in
    `interval_unit`: the test bootstrap then resamples those clusters (evalsuite.metrics.bootstrap).
    """

    max_pixels = Image.MAX_IMAGE_PIXELS

    def __init__(self, card, preprocess: str = "resize", crop_px: int | None = None):
        self.card = card
        self.preprocess = build_preprocess(card, preprocess, crop_px)
        self.splits: dict = {}
        self.split_groups: dict = {}

    def groups(self, split: str) -> list | None:
        """The cluster id (patient, slide) of each sample of `split` in dataset order; None: every sample is
        its own unit."""
        return self.split_groups.get(split)

    def dataset(self, split: str, transform) -> ImageFileDataset:
        self.check_split(split, self.splits)
        paths, labels = self.splits[split]
        return ImageFileDataset(paths, labels, transform, self.preprocess, self.max_pixels)

    def split_from_masks(self, paths: list, labels: np.ndarray, masks: dict, groups=None) -> None:
        """Fill `self.splits` (and `self.split_groups` when `groups` has one cluster id per sample) from boolean
        masks over one list of samples."""
        paths = np.array(paths, dtype=object)
        self.splits = {split: (list(paths[mask]), labels[mask]) for split, mask in masks.items()}
        if groups is not None:
            groups = np.asarray(groups)
            self.split_groups = {split: groups[mask].tolist() for split, mask in masks.items()}
