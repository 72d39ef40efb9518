"""BreaKHis v1 at 40X magnification, split by patient as eva and THUNDER split it.

Layout under --data-root:
BreaKHis_v1/histology_slides/breast/{benign,malignant}/SOB/<subtype>/<patient>/40X/*.png, files
named SOB_<B|M>_<TYPE>-<YY>-<PATIENT>-40-<NNN>.png (e.g. SOB_B_A-14-22549AB-40-001.png): class
(B/M), subtype (A F PT TA | DC LC MC PC), patient id and magnification come from the name and are
checked against the folders. 40X holds 1,995 images of 700x460 px from 82 patients.

Labels (`reader.args.labels`):
- `subtype4` (the shipped card): the four subtypes with at least 7 patients, F TA DC MC, as
  eva (kaiko-ai/eva src/eva/vision/data/datasets/classification/breakhis.py, `classes`) and
  THUNDER (MICS-Lab/thunder src/thunder/config/dataset/break_his.yaml) classify them; images
  of the other four subtypes are not read.
- `binary`: benign vs malignant over all eight subtypes (the task of the BreaKHis paper); the
  patients of A, PT, LC and PC are in no held-out list, so they all train.
Split (fixed patient lists, no patient in two splits):
- test = eva's `BreaKHis._val_patient_ids` (14 patients; eva has no test split and reports
  its val), which THUNDER (src/thunder/datasets/dataset/break_his.py) uses as its test;
- val = THUNDER's 10 val patients, carved by THUNDER from eva's train patients;
- train = every other patient.
Image counts of the complete dataset, as the two suites assert them: eva train 1,132 / val 339
(`_expected_dataset_lengths`), THUNDER train 936 / val 196 / test 339 (`nb_*_samples`).
"""

import re
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error, list_files, require_dir
from evalsuite.readers.tiles.base import FileListReader

TASK = "breakhis"
ROOT = Path("BreaKHis_v1") / "histology_slides" / "breast"
LAYOUT = "BreaKHis_v1/histology_slides/breast/{benign,malignant}/SOB/<subtype>/<patient>/40X/*.png"
NAME = re.compile(r"^SOB_(?P<group>[BM])_(?P<type>A|F|PT|TA|DC|LC|MC|PC)-(?P<year>\d+)-(?P<patient>[0-9A-Z]+)"
                  r"-(?P<magnification>\d+)-(?P<number>\d+)\.png$")
GROUPS = {"B": "benign", "M": "malignant"}
# Class order: benign subtypes first, as THUNDER's class_to_id.
LABELS = {"subtype4": ["F", "TA", "DC", "MC"], "binary": ["benign", "malignant"]}
TEST_PATIENTS = frozenset({
    "18842D", "19979", "15275", "15792", "16875", "3909", "5287", "16716", "2773", "5695", "16184CD", "23060CD",
    "21998CD", "21998EF",
})
VAL_PATIENTS = frozenset({"23222AB", "13418DE", "11520", "19854C", "10926", "12312", "18842", "13412", "13200",
                          "29960AB"})
ALL_40X = 1995
# The held-out patients are all of the four subtypes, so their counts hold for both label sets.
SUBTYPE4_COUNTS = {"train": 936, "val": 196, "test": 339}
OFFICIAL_COUNTS = {
    "subtype4": SUBTYPE4_COUNTS,
    "binary": {**SUBTYPE4_COUNTS, "train": ALL_40X - SUBTYPE4_COUNTS["val"] - SUBTYPE4_COUNTS["test"]},
}


def parse_name(path: Path, group: str) -> re.Match:
    match = NAME.match(path.name)
    if not match or GROUPS[match["group"]] != group or match["magnification"] != "40":
        raise layout_error(TASK, f"unexpected file {path}",
                           "SOB_<B|M>_<TYPE>-<YY>-<PATIENT>-40-<NNN>.png, B in benign/ and M in malignant/, in "
                           + LAYOUT)
    return match


def label_name(match: re.Match, labels: str) -> str:
    return GROUPS[match["group"]] if labels == "binary" else match["type"]


def list_40x(data_root: Path) -> list[tuple[Path, re.Match]]:
    """(path, parsed name) of every 40X image, benign then malignant, in folder order."""
    matches = []
    for group in GROUPS.values():
        sob = require_dir(Path(data_root) / ROOT / group / "SOB", TASK, LAYOUT)
        for folder in sorted(sob.glob("*/*/40X")):
            matches += [(path, parse_name(path, group)) for path in list_files(folder, ".png")]
    return matches


class BreakhisReader(FileListReader):
    interval_unit = "patient"

    def __init__(self, card, data_root: Path, check_counts: bool = True, labels: str = "subtype4",
                 preprocess: str = "center_crop", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        if labels not in LABELS:
            raise EvalsuiteError(f"task card {card.path}: reader.args.labels must be one of {', '.join(LABELS)}, "
                                 f"got '{labels}'")
        check_classes(card, LABELS[labels], TASK, f"labels: {labels}")
        found = list_40x(data_root)
        check_count(TASK, f"{ROOT}/*/SOB/*/*/40X", len(found), ALL_40X, check_counts)
        kept = [(path, match) for path, match in found if label_name(match, labels) in LABELS[labels]]
        paths = [path for path, _ in kept]
        targets = np.array([LABELS[labels].index(label_name(m, labels)) for _, m in kept], dtype=np.int64)
        patients = np.array([m["patient"] for _, m in kept], dtype=str)
        test, val = np.isin(patients, list(TEST_PATIENTS)), np.isin(patients, list(VAL_PATIENTS))
        masks = {"train": ~test & ~val, "val": val, "test": test}
        for split in ("test", "val", "train"):  # the test count first: it decides comparability with eva
            mask = masks[split]
            check_count(TASK, f"the {split} patients ({labels})", int(mask.sum()), OFFICIAL_COUNTS[labels][split],
                        check_counts)
        self.split_from_masks(paths, targets, masks, groups=patients)
