"""BreaKHis v1 at 40X magnification, benign vs malignant, split by patient.

Layout under --data-root:
BreaKHis_v1/histology_slides/breast/{benign,malignant}/SOB/<subtype>/<patient>/40X/*.png, files
named SOB_<B|M>_<TYPE>-<YY>-<PATIENT>-40-<NNN>.png (e.g. SOB_B_A-14-22549AB-40-001.png): class
(B/M), subtype (A F PT TA | DC LC MC PC), patient id and magnification come from the name and are
checked against the folders. 40X holds 1,995 images of 700x460 px from 82 patients.

Labels: `labels: binary` (benign, malignant; the task of the original BreaKHis paper) or
`subtype` (the eight types). The shipped card is binary: four subtypes have only 3 to 6
patients, too few to put patients of every subtype in train, val and test.
Split (no patient in two splits): test = the 25 patients eva holds out (kaiko-ai/eva
`BreaKHis._val_patient_ids`, 524 images at 40X); val = a seeded, class-stratified
`val_fraction` of the other patients; train = the remaining patients.
"""

import re
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers._common import (FileListReader, carve_val, check_classes, check_count, layout_error,
                                       list_files, require_dir)

TASK = "breakhis"
ROOT = Path("BreaKHis_v1") / "histology_slides" / "breast"
LAYOUT = "BreaKHis_v1/histology_slides/breast/{benign,malignant}/SOB/<subtype>/<patient>/40X/*.png"
NAME = re.compile(r"^SOB_(?P<group>[BM])_(?P<type>A|F|PT|TA|DC|LC|MC|PC)-(?P<year>\d+)-(?P<patient>[0-9A-Z]+)"
                  r"-(?P<magnification>\d+)-(?P<number>\d+)\.png$")
GROUPS = {"B": "benign", "M": "malignant"}
LABELS = {"binary": ["benign", "malignant"], "subtype": ["A", "F", "PT", "TA", "DC", "LC", "MC", "PC"]}
TEST_PATIENTS = frozenset({
    "18842D", "16184", "8168", "4372", "16716", "9146", "21978AB", "6241", "17901", "12465", "3411F", "18842",
    "2980", "15570C", "2985", "13413", "3909", "14134E", "2523", "19854C", "19979", "29960CD", "21998AB",
    "29960AB", "14946",
})
OFFICIAL_COUNTS = {"40X": 1995, "test": 524}


def parse_name(path: Path, group: str) -> re.Match:
    match = NAME.match(path.name)
    if not match or GROUPS[match["group"]] != group or match["magnification"] != "40":
        raise layout_error(TASK, f"unexpected file {path}",
                           "SOB_<B|M>_<TYPE>-<YY>-<PATIENT>-40-<NNN>.png, B in benign/ and M in malignant/, in "
                           + LAYOUT)
    return match


class BreakhisReader(FileListReader):
    def __init__(self, card, data_root: Path, check_counts: bool = True, labels: str = "binary",
                 val_fraction: float = 0.2, val_seed: int = 0, preprocess: str = "center_crop",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px)
        if labels not in LABELS:
            raise EvalsuiteError(f"task card {card.path}: reader.args.labels must be one of {', '.join(LABELS)}, "
                                 f"got '{labels}'")
        check_classes(card, LABELS[labels], TASK, f"labels: {labels}")
        paths, targets, patients = [], [], []
        for group in GROUPS.values():
            sob = require_dir(Path(data_root) / ROOT / group / "SOB", TASK, LAYOUT)
            for folder in sorted(sob.glob("*/*/40X")):
                for path in list_files(folder, ".png"):
                    match = parse_name(path, group)
                    paths.append(path)
                    targets.append(LABELS[labels].index(group if labels == "binary" else match["type"]))
                    patients.append(match["patient"])
        targets, patients = np.array(targets, dtype=np.int64), np.array(patients)
        test = np.isin(patients, list(TEST_PATIENTS))
        check_count(TASK, f"{ROOT}/*/SOB/*/*/40X", len(paths), OFFICIAL_COUNTS["40X"], check_counts)
        check_count(TASK, "the 25 test patients", int(test.sum()), OFFICIAL_COUNTS["test"], check_counts)
        val = np.zeros(len(paths), dtype=bool)
        val[~test] = carve_val(targets[~test], val_fraction, val_seed, groups=patients[~test])
        self.split_from_masks(paths, targets, {"train": ~test & ~val, "val": val, "test": test})
