"""Tile-classification readers' base: samples are image files listed as (path, label) without decoding.

A reader (bach, crc, mhist, bracs, breakhis) lists its samples, checks the official split sizes
when asked, and hands out `ImageFileDataset`s; the card's `preprocess` runs before the backbone
transform.
"""

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import LabelledImages, Reader
from evalsuite.readers.files import UNREADABLE_REMEDY, open_rgb
from evalsuite.readers.item_identity import relative_name

PREPROCESS_MODES = ("resize", "center_crop")

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


class ImageFileDataset(LabelledImages):
    """Items `(transform(preprocess(RGB image)), label)` from a list of image files."""

    def __init__(self, paths: list, labels: np.ndarray, transform, preprocess=None,
                 max_pixels=Image.MAX_IMAGE_PIXELS, unreadable_remedy: str = UNREADABLE_REMEDY):
        super().__init__(labels, transform)
        self.paths = list(paths)
        self.preprocess = preprocess
        self.max_pixels = max_pixels
        self.unreadable_remedy = unreadable_remedy

    def image(self, index: int) -> Image.Image:
        return open_rgb(self.paths[index], self.max_pixels, self.preprocess, self.unreadable_remedy)


class FileListReader(Reader):
    """Base of the readers whose samples are image files.

    A subclass fills `self.splits = {split: (paths, labels)}` in its constructor; the card's
    `preprocess` (`resize` | `center_crop`) and optional `crop_px` apply to every split.
    A subclass that knows which samples share a patient or slide also fills
    `self.split_groups = {split: [cluster id per sample]}` and names the unit in
    `interval_unit`: the test bootstrap then resamples those clusters (evalsuite.metrics.bootstrap). A sample is
    named (`item_ids`) by its path relative to `data_root`.
    """

    max_pixels = Image.MAX_IMAGE_PIXELS
    unreadable_remedy = UNREADABLE_REMEDY  # the hint of a corrupt-image error: what fixes it for this reader

    def __init__(self, card, preprocess: str = "resize", crop_px: int | None = None, data_root=None):
        self.card = card
        self.data_root = data_root  # None: the samples' paths cannot be named apart from where the data is
        self.preprocess = build_preprocess(card, preprocess, crop_px)
        self.splits: dict = {}
        self.split_groups: dict = {}

    def groups(self, split: str) -> list | None:
        """The cluster id (patient, slide) of each sample of `split` in dataset order; None: every sample is
        its own unit."""
        return self.split_groups.get(split)

    def item_ids(self, split: str) -> list | None:
        """Each sample's image file relative to the data root, in dataset order."""
        self.check_split(split, self.splits)
        if self.data_root is None:
            return None
        return [relative_name(path, self.data_root) for path in self.splits[split][0]]

    def dataset(self, split: str, transform) -> ImageFileDataset:
        self.check_split(split, self.splits)
        paths, labels = self.splits[split]
        return ImageFileDataset(paths, labels, transform, self.preprocess, self.max_pixels, self.unreadable_remedy)

    def split_from_masks(self, paths: list, labels: np.ndarray, masks: dict, groups=None) -> None:
        """Fill `self.splits` (and `self.split_groups` when `groups` has one cluster id per sample) from boolean
        masks over one list of samples."""
        paths = np.array(paths, dtype=object)
        self.splits = {split: (list(paths[mask]), labels[mask]) for split, mask in masks.items()}
        if groups is not None:
            groups = np.asarray(groups)
            self.split_groups = {split: groups[mask].tolist() for split, mask in masks.items()}
