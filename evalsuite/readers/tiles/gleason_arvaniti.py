"""Gleason (Arvaniti et al. 2018) prostate TMA patches, read as eva reads them.

Sources read: kaiko-ai/eva src/eva/vision/data/datasets/classification/gleason_arvaniti.py and
docs/datasets/gleason_arvaniti.md at 73b61a7; eiriniar/gleason_CNN utils/create_patches.py at b18594e
(the script that cuts the patches from the Harvard Dataverse TMA images, doi:10.7910/DVN/OCYCMP).

Layout under --data-root (what create_patches.py writes):
  train_validation_patches_750/<spot>/<spot>_patch_<j>_class_<k>.jpg  (TMAs ZT76, ZT111, ZT199, ZT204)
  test_patches_750/patho_1/<spot>/<spot>_patch_<j>_class_<k>.jpg      (TMA ZT80, pathologist 1's labels)
750x750 px JPEGs at 0.23 um/px; k = 0 benign, 1 Gleason 3, 2 Gleason 4, 3 Gleason 5 (create_patches.py
keeps only patches whose central third carries one grade). test_patches_750/patho_2 is not read.
Splits, as eva's class: the TMA is the file name's first `_` field; ZT76 = val, ZT111/ZT199/ZT204 =
train, everything under test_patches_750/patho_1 = test. eva's sizes: 15,303 / 2,482 / 4,967. eva's
configs train on train and report val (its docs: the test split "leads to unstable evaluation
results"); we report test and select on val. The test bootstrap resamples TMA spots (the <spot> folder:
one tissue core, whose patches overlap by half).
"""

import re
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error, require_dir
from evalsuite.readers.tiles.base import FileListReader

TASK = "gleason_arvaniti"
TRAIN_VAL_DIR = "train_validation_patches_750"
TEST_DIR = "test_patches_750/patho_1"
LAYOUT = (f"{TRAIN_VAL_DIR}/<spot>/<spot>_patch_<j>_class_<k>.jpg and "
          f"{TEST_DIR}/<spot>/<spot>_patch_<j>_class_<k>.jpg")
CLASSES = ["benign", "gleason_3", "gleason_4", "gleason_5"]
VAL_TMAS = {"ZT76"}
TRAIN_TMAS = {"ZT111", "ZT199", "ZT204"}
OFFICIAL_COUNTS = {"train": 15303, "val": 2482, "test": 4967}
PATCH_NAME = re.compile(r"_class_(\d+)$")


def patch_label(path: Path) -> int:
    """The grade k of `<spot>_patch_<j>_class_<k>.jpg`, checked against the four classes."""
    match = PATCH_NAME.search(path.stem)
    if not match or int(match.group(1)) >= len(CLASSES):
        raise EvalsuiteError(f"{TASK}: {path} is not named <spot>_patch_<j>_class_<k>.jpg with k in 0..3 "
                             f"({', '.join(CLASSES)}); remove it or re-run create_patches.py")
    return int(match.group(1))


def list_patches(folder: Path) -> list[Path]:
    """Every .jpg under `folder` (any depth, as eva globs `**/*.jpg`), sorted; hidden files skipped."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".jpg"
                  and not p.name.startswith("."))


def train_val_split(path: Path) -> str:
    tma = path.stem.split("_")[0]
    if tma in VAL_TMAS:
        return "val"
    if tma in TRAIN_TMAS:
        return "train"
    raise EvalsuiteError(f"{TASK}: {path} is from TMA '{tma}', not one of the train ({', '.join(sorted(TRAIN_TMAS))}) "
                         f"or val (ZT76) arrays; remove it, or re-run create_patches.py")


class GleasonArvanitiReader(FileListReader):
    interval_unit = "TMA spot"

    def __init__(self, card, data_root: Path, check_counts: bool = True, preprocess: str = "resize",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "patch labels (class_<k> in the file names)")
        root = Path(data_root)
        found = {"train": [], "val": [], "test": []}
        for path in list_patches(require_dir(root / TRAIN_VAL_DIR, TASK, LAYOUT)):
            found[train_val_split(path)].append(path)
        found["test"] = list_patches(require_dir(root / TEST_DIR, TASK, LAYOUT))
        for split, paths in found.items():
            if not paths:
                raise layout_error(TASK, f"no {split} patches found under {root}", LAYOUT)
            check_count(TASK, f"split '{split}'", len(paths), OFFICIAL_COUNTS[split], check_counts)
            labels = np.array([patch_label(path) for path in paths], dtype=np.int64)
            self.splits[split] = (paths, labels)
            self.split_groups[split] = [path.parent.name for path in paths]  # the TMA spot
