"""File helpers of the readers: layout checks, official counts, class lists, and decoding one RGB image.

Every problem with the data on disk is an EvalsuiteError of one line naming the file or the
expected path pattern.
"""

import contextlib
import csv
import sys
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError


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
    check_unknown_class_folders(root, card, task)
    paths, labels = [], []
    for label, name in enumerate(card.classes):
        folder = root / name
        if not folder.is_dir():
            raise layout_error(task, f"missing class folder {folder}", layout)
        files = list_files(folder, suffix)
        paths += files
        labels += [label] * len(files)
    return paths, np.array(labels, dtype=np.int64)


def check_unknown_class_folders(root: Path, card, task: str) -> None:
    unknown = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                     and p.name not in card.classes)
    if not unknown:
        return
    if card.classes_closed:
        raise EvalsuiteError(f"{task}: {root} has class folders not in task card {card.path}: {', '.join(unknown)}; "
                             "remove them, or add them to the card's classes")
    print(f"evalsuite: note: {task}: skipping folders in {root} that are not among the card's classes: "
          f"{', '.join(unknown)} (set `classes_closed: true` in the card to make this an error)", file=sys.stderr)


def read_csv_rows(path: Path, columns: tuple, task: str, expected: str, remedy: str) -> list[dict]:
    """A distributed CSV's rows as dicts; a missing column, an unreadable file or a broken quote is one line naming
    the file, `expected` (which file it should be) and `remedy` (how to get a good copy)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [column for column in columns if column not in (reader.fieldnames or [])]
            if missing:
                raise EvalsuiteError(f"{task}: {path} has no column {', '.join(repr(c) for c in missing)}; expected "
                                     f"{expected} with the columns {', '.join(repr(c) for c in columns)}")
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"{task}: cannot read {path} ({exc}); {remedy}") from None


def check_count(task: str, what: str, found: int, expected: int, check_counts: bool) -> None:
    if check_counts and found != expected:
        raise EvalsuiteError(
            f"{task}: {what} has {found} images but the official dataset has {expected}; point --data-root at the "
            f"complete dataset, or pass --no-count-check to evaluate a subset")


def check_classes(card, expected: list, task: str, what: str) -> None:
    if list(card.classes) != list(expected):
        raise EvalsuiteError(
            f"task card {card.path}: field 'classes' must be {list(expected)} for {task} {what}, got {card.classes}")


@contextlib.contextmanager
def _pixel_limit(max_pixels):
    """Pillow's decompression-bomb limit for one open; `None` lifts it for trusted large images."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


UNREADABLE_REMEDY = "re-download or replace the file, or remove it and pass --no-count-check"


def open_rgb(path: Path, max_pixels=Image.MAX_IMAGE_PIXELS, preprocess=None,
             remedy: str = UNREADABLE_REMEDY) -> Image.Image:
    """Decode an image file to RGB and apply `preprocess`; an unreadable or corrupt file is an error naming it and
    `remedy` (what the reader's user can do: a listed file is removed from its list, not by a count flag)."""
    # Pillow warns (e.g. "Corrupt EXIF data") on stderr per file; the error below, if any, says it once.
    with warnings.catch_warnings(), _pixel_limit(max_pixels):
        warnings.simplefilter("ignore", UserWarning)
        image = _decode_rgb(path, remedy)
        if preprocess is None:
            return image
        try:
            return preprocess(image)
        except ValueError as exc:
            raise EvalsuiteError(f"cannot preprocess image {path}: {exc}") from None


def _decode_rgb(path: Path, remedy: str) -> Image.Image:
    try:
        with Image.open(path) as image:
            if image.mode == "RGB":  # convert() to its own mode copies the image: 10 of 17 ms for a BACH photo
                image.load()
                return image
            return image.convert("RGB")
    except FileNotFoundError:
        raise EvalsuiteError(f"missing image {path}; the file list changed since the task was read") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        reason = " ".join(str(exc).split())
        raise EvalsuiteError(f"cannot read image {path} ({reason}); {remedy}") from None
