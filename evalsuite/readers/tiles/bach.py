"""BACH (ICIAR 2018) microscopy photos, read as distributed on Zenodo (record 3632035).

Layout under --data-root: ICIAR2018_BACH_Challenge/Photos/{Benign,InSitu,Invasive,Normal}/*.tif,
100 RGB images of 1536x2048 px per class, named <prefix><NNN>.tif (b001.tif, is001.tif,
iv001.tif, n001.tif ... to 100). The labelled challenge test set is not public, so the split is
eva's patient-aware one (kaiko-ai/eva `Bach`: index ranges over the 400 files sorted by class
folder and name), written here as image numbers per class:
- test = eva's val split (132 images), the split eva reports results on;
- val = the last images of each class that eva puts in train (49 images);
- train = the rest of eva's train split (219 images).
The split follows the number in the file name, so a subset (--no-count-check) keeps every
image in the split it has in the complete dataset.
The test bootstrap resamples images (one sample each): BACH names no patients.
"""

import re
from pathlib import Path

import numpy as np

from evalsuite.readers.files import check_classes, check_count, class_folder_samples, layout_error
from evalsuite.readers.tiles.base import FileListReader

TASK = "bach"
PHOTOS = Path("ICIAR2018_BACH_Challenge") / "Photos"
LAYOUT = "ICIAR2018_BACH_Challenge/Photos/{Benign,InSitu,Invasive,Normal}/*.tif"
IMAGES_PER_CLASS = 100
NAME = re.compile(r"^[a-z]+(\d{3})\.tif$", re.IGNORECASE)
# Inclusive ranges of image numbers; every other number of the class is train.
HELD_OUT = {
    "Benign": {"val": [(91, 100)], "test": [(42, 59), (61, 90)]},
    "InSitu": {"val": [(88, 100)], "test": [(40, 69)]},
    "Invasive": {"val": [(88, 100)], "test": [(41, 58), (61, 73)]},
    "Normal": {"val": [(88, 100)], "test": [(46, 68)]},
}


def split_of(class_name: str, number: int) -> str:
    for split, ranges in HELD_OUT[class_name].items():
        if any(low <= number <= high for low, high in ranges):
            return split
    return "train"


class BachReader(FileListReader):
    # BACH distributes no patient ids: each sample is a whole photo, the smallest unit it names.
    interval_unit = "image"

    def __init__(self, card, data_root: Path, check_counts: bool = True, preprocess: str = "center_crop",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, list(HELD_OUT), TASK, "class folders")
        paths, labels = class_folder_samples(Path(data_root) / PHOTOS, card, ".tif", TASK, LAYOUT)
        splits = []
        for path, label in zip(paths, labels):
            match = NAME.match(path.name)
            if not match or not 1 <= int(match.group(1)) <= IMAGES_PER_CLASS:
                raise layout_error(TASK, f"unexpected file name {path}", "<prefix><001..100>.tif in " + LAYOUT)
            splits.append(split_of(card.classes[label], int(match.group(1))))
        for label, name in enumerate(card.classes):
            check_count(TASK, f"class folder {PHOTOS / name}", int((labels == label).sum()), IMAGES_PER_CLASS,
                        check_counts)
        splits = np.array(splits)
        self.split_from_masks(paths, labels, {split: splits == split for split in ("train", "val", "test")})
