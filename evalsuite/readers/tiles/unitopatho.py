"""UniToPatho colorectal polyps (the 800 um subset), read as distributed on IEEE DataPort.

Sources read: kaiko-ai/eva src/eva/vision/data/datasets/classification/unitopatho.py and
docs/datasets/unitopatho.md at 73b61a7; EIDOSLAB/UNITOPATHO unitopatho.py, train.py and Example.ipynb
at 418aabf (the CSV columns and the image path 800/<top_label_name>/<image_id>).

Layout under --data-root:
  800/train.csv, 800/test.csv  (columns image_id, top_label_name, top_label, type_name, type,
                                grade_name, grade, wsi, roi, mpp, x, y, w, h; we read image_id,
                                top_label_name, top_label and wsi)
  800/<top_label_name>/<image_id>  (1812x1812 px PNGs at 0.4415 um/px)
Classes (top_label 0..5): HP, NORM, TA.HG, TA.LG, TVA.HG, TVA.LG. The official partition has 6,270
train and 2,399 test images (eva's counts; Example.ipynb shows train.csv's 6,270 by class: HP 443,
NORM 724, TA.HG 333, TA.LG 2,532, TVA.HG 465, TVA.LG 1,773). Each slide (`wsi`) is one patient.
Splits: test = test.csv (eva calls it val, chooses its checkpoint on it and reports it); val =
`val_fraction` (0.2) of train.csv's slides per class, chosen with `val_seed` (0), whole slides;
train = the other slides. The test bootstrap resamples slides.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, read_csv_rows, require_file
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.splits import carve_val
from evalsuite.readers.tiles.base import FileListReader

TASK = "unitopatho"
SUBSET = "800"
LAYOUT = f"{SUBSET}/train.csv, {SUBSET}/test.csv and {SUBSET}/<top_label_name>/<image_id>.png"
COLUMNS = ("image_id", "top_label_name", "top_label", "wsi")
CLASSES = ["HP", "NORM", "TA.HG", "TA.LG", "TVA.HG", "TVA.LG"]
OFFICIAL_COUNTS = {"train.csv": 6270, "test.csv": 2399}


def read_manifest(path: Path) -> list[dict]:
    return read_csv_rows(path, COLUMNS, TASK, "the UniToPatho file", "re-download the 800 subset")


def row_sample(root: Path, csv_path: Path, line: int, row: dict) -> tuple[Path, int, str]:
    """(image path, class id, slide) of one manifest row; the label's id and name must agree."""
    name, label = row["top_label_name"].strip(), row["top_label"].strip()
    if name not in CLASSES or label != str(CLASSES.index(name)):
        raise EvalsuiteError(f"{TASK}: {csv_path} line {line}: top_label {label!r} / top_label_name {name!r} is not "
                             f"one of 0..5 = {', '.join(CLASSES)}")
    path = root / SUBSET / name / row["image_id"].strip()
    require_file(path, TASK, LAYOUT + f" (listed in {csv_path.name} line {line})")
    return path, CLASSES.index(name), row["wsi"].strip()


def manifest_samples(root: Path, csv_name: str) -> tuple[list, np.ndarray, list]:
    csv_path = require_file(root / SUBSET / csv_name, TASK, LAYOUT)
    rows = [row_sample(root, csv_path, line, row) for line, row in enumerate(read_manifest(csv_path), start=2)]
    paths, labels, slides = zip(*rows) if rows else ((), (), ())
    return list(paths), np.array(labels, dtype=np.int64), list(slides)


class UnitopathoReader(FileListReader):
    interval_unit = "slide"

    def __init__(self, card, data_root: Path, check_counts: bool = True, val_fraction: float = 0.2,
                 val_seed: int = 0, preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "top_label classes")
        val_fraction = checked_fraction(card, "val_fraction", val_fraction)  # before the files are listed
        val_seed = checked_seed(card, "val_seed", val_seed)
        root = Path(data_root)
        found = {name: manifest_samples(root, name) for name in OFFICIAL_COUNTS}
        for name, (paths, _, _) in found.items():
            check_count(TASK, f"{SUBSET}/{name}", len(paths), OFFICIAL_COUNTS[name], check_counts)
        paths, labels, slides = found["train.csv"]
        val = carve_val(labels, val_fraction, val_seed, groups=slides)  # whole slides: one patient each
        self.split_from_masks(paths, labels, {"train": ~val, "val": val}, groups=slides)
        test_paths, test_labels, test_slides = found["test.csv"]
        self.splits["test"] = (test_paths, test_labels)
        self.split_groups["test"] = test_slides
