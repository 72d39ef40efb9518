"""STARC-9 colorectal tissue tiles (Stanford), read as distributed on the Hugging Face hub (Path2AI/STARC-9).

Layout under --data-root, once each per-class zip is unpacked into a folder of its own name:
Training_data_normalized/<CLASS>/ (train), Validation_data/STANFORD-CRC-HE-VAL-SMALL/<CLASS>/ (val) and
Validation_data/STANFORD-CRC-HE-VAL-LARGE/<CLASS>/ (test), with the nine classes ADI LYM MUC MUS NCS NOR BLD FCT
TUM. Files are listed recursively inside a class folder, so a zip that unpacks to ADI/ADI/*.png reads as it is.
The split mapping is THUNDER's; Validation_data/CURATED-TCGA-CRC-HE-20K-NORMALIZED is not used (as in THUNDER).

Facts: MICS-Lab/thunder src/thunder/datasets/dataset/starc9.py (3a91041: folders, class order, splits, the
image extensions it accepts) and src/thunder/config/dataset/STARC_9.yaml (805a761: 256x256 px at 0.5 um/px);
630,000 train tiles, 70,000 per class: the STARC-9 paper (arXiv 2511.00383). The val and test sizes were not
found in a primary source (THUNDER's config gives 540,000 / 20,000, which does not fit SMALL = val), so only
train's size is checked.
"""

from pathlib import Path

import numpy as np

from evalsuite.readers.files import check_classes, check_count, check_unknown_class_folders, layout_error, require_dir
from evalsuite.readers.tiles.base import FileListReader

TASK = "starc9"
SPLIT_DIRS = {
    "train": Path("Training_data_normalized"),
    "val": Path("Validation_data") / "STANFORD-CRC-HE-VAL-SMALL",
    "test": Path("Validation_data") / "STANFORD-CRC-HE-VAL-LARGE",
}
LAYOUT = ("Training_data_normalized/<CLASS>/, Validation_data/STANFORD-CRC-HE-VAL-SMALL/<CLASS>/ and "
          "Validation_data/STANFORD-CRC-HE-VAL-LARGE/<CLASS>/ holding the unpacked tiles")
CLASSES = ["ADI", "LYM", "MUC", "MUS", "NCS", "NOR", "BLD", "FCT", "TUM"]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
OFFICIAL_COUNTS = {"train": 630_000, "val": None, "test": None}  # None: not published where we looked


def class_images(folder: Path) -> list[Path]:
    """Image files anywhere under `folder`, sorted; hidden files (`._x.png`) are skipped."""
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))


def split_samples(root: Path, card) -> tuple[list, np.ndarray]:
    require_dir(root, TASK, LAYOUT)
    check_unknown_class_folders(root, card, TASK)  # the tile readers' rule: named and skipped, or closed-card error
    paths, labels = [], []
    for label, name in enumerate(card.classes):
        folder = root / name
        if not folder.is_dir():
            raise layout_error(TASK, f"missing class folder {folder}", LAYOUT)
        files = class_images(folder)
        paths += files
        labels += [label] * len(files)
    if not paths:
        raise layout_error(TASK, f"no {'/'.join(IMAGE_SUFFIXES)} images in the class folders of {root}", LAYOUT)
    return paths, np.array(labels, dtype=np.int64)


class Starc9Reader(FileListReader):
    def __init__(self, card, data_root: Path, check_counts: bool = True, preprocess: str = "resize",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "class folders")
        for split, folder in SPLIT_DIRS.items():
            self.splits[split] = split_samples(Path(data_root) / folder, card)
            if OFFICIAL_COUNTS[split] is not None:
                check_count(TASK, str(folder), len(self.splits[split][0]), OFFICIAL_COUNTS[split], check_counts)
