"""CRC: NCT-CRC-HE-100K (train) and CRC-VAL-HE-7K (test), read as distributed on Zenodo (record 1214456).

Layout under --data-root: NCT-CRC-HE-100K/<CLASS>/*.tif and CRC-VAL-HE-7K/<CLASS>/*.tif with the
nine classes ADI BACK DEB LYM MUC MUS NORM STR TUM; 224x224 px tiles at 0.5 um/px. The official
sizes are 100,000 and 7,180 images. The two sets come from different patients, so the test set
is patient-disjoint from train; val is carved from NCT-CRC-HE-100K (`val_fraction` of each class,
seeded), which has no patient ids: val may share patients with train and only selects probe
hyper-parameters.
"""

from pathlib import Path

from evalsuite.readers.files import check_classes, check_count, class_folder_samples
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.splits import carve_val
from evalsuite.readers.tiles.base import FileListReader

TASK = "crc"
TRAIN_DIR, TEST_DIR = "NCT-CRC-HE-100K", "CRC-VAL-HE-7K"
LAYOUT = f"{TRAIN_DIR}/<CLASS>/*.tif and {TEST_DIR}/<CLASS>/*.tif"
OFFICIAL_COUNTS = {TRAIN_DIR: 100_000, TEST_DIR: 7_180}
CLASSES = ["ADI", "BACK", "DEB", "LYM", "MUC", "MUS", "NORM", "STR", "TUM"]


class CrcReader(FileListReader):
    def __init__(self, card, data_root: Path, check_counts: bool = True, val_fraction: float = 0.1,
                 val_seed: int = 0, preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "class folders")
        val_fraction = checked_fraction(card, "val_fraction", val_fraction)  # before the files are listed
        val_seed = checked_seed(card, "val_seed", val_seed)
        found = {}
        for folder in (TRAIN_DIR, TEST_DIR):
            found[folder] = class_folder_samples(Path(data_root) / folder, card, ".tif", TASK, LAYOUT)
            check_count(TASK, folder, len(found[folder][0]), OFFICIAL_COUNTS[folder], check_counts)
        paths, labels = found[TRAIN_DIR]
        val = carve_val(labels, val_fraction, val_seed)
        self.split_from_masks(paths, labels, {"train": ~val, "val": val})
        self.splits["test"] = found[TEST_DIR]
