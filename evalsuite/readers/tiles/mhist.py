"""MHIST colorectal polyps (HP vs SSA), read as distributed by BMIRDS.

Layout under --data-root: images/*.png (224x224 px) and annotations.csv with the columns
`Image Name`, `Majority Vote Label` (HP | SSA) and `Partition` (train | test). The official
partition has 2,175 train and 977 test images. There are no patient ids, so val is carved from
the train partition (`val_fraction` of each class, seeded) and only selects probe
hyper-parameters; test is the official test partition.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, read_csv_rows, require_file
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.splits import carve_val
from evalsuite.readers.tiles.base import FileListReader

TASK = "mhist"
LAYOUT = "images/*.png and annotations.csv"
CSV_NAME = "annotations.csv"
COLUMNS = ("Image Name", "Majority Vote Label", "Partition")
CLASSES = ["HP", "SSA"]
OFFICIAL_COUNTS = {"train": 2175, "test": 977}


def read_annotations(path: Path) -> list[dict]:
    return read_csv_rows(path, COLUMNS, TASK, "the distributed file", "re-download annotations.csv")


class MhistReader(FileListReader):
    def __init__(self, card, data_root: Path, check_counts: bool = True, val_fraction: float = 0.2,
                 val_seed: int = 0, preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "labels")
        val_fraction = checked_fraction(card, "val_fraction", val_fraction)  # before the files are listed
        val_seed = checked_seed(card, "val_seed", val_seed)
        root = Path(data_root)
        rows = read_annotations(require_file(root / CSV_NAME, TASK, LAYOUT))
        found = {partition: ([], []) for partition in OFFICIAL_COUNTS}
        for line, row in enumerate(rows, start=2):
            label, partition = row["Majority Vote Label"].strip(), row["Partition"].strip()
            if label not in CLASSES or partition not in found:
                raise EvalsuiteError(f"{TASK}: {root / CSV_NAME} line {line}: label '{label}' / partition "
                                     f"'{partition}' is not one of {CLASSES} / {list(found)}")
            path = root / "images" / row["Image Name"].strip()
            require_file(path, TASK, LAYOUT + f" (listed in {CSV_NAME} line {line})")
            found[partition][0].append(path)
            found[partition][1].append(CLASSES.index(label))
        for partition, (paths, _) in found.items():
            check_count(TASK, f"partition '{partition}' of {CSV_NAME}", len(paths), OFFICIAL_COUNTS[partition],
                        check_counts)
        paths, labels = found["train"][0], np.array(found["train"][1], dtype=np.int64)
        val = carve_val(labels, val_fraction, val_seed)
        self.split_from_masks(paths, labels, {"train": ~val, "val": val})
        self.splits["test"] = (found["test"][0], np.array(found["test"][1], dtype=np.int64))
