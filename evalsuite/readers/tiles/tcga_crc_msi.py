"""TCGA-CRC-MSI: Kather's tumour tiles of TCGA-CRC-DX slides, MSI-high vs not, read as THUNDER reads Zenodo record
3832231 (TRAIN.zip, TEST.zip).

Layout under --data-root: {TRAIN,TEST}/{nonMSIH,MSIH}/<tile>, 512x512 px at 0.5 um/px (THUNDER's config,
MICS-Lab/thunder src/thunder/config/dataset/tcga_crc_msi.yaml at 6fe47e0). Test is TEST (32,361 tiles). THUNDER
(src/thunder/datasets/dataset/tcga_crc_msi.py at 6fe47e0) carves val from TRAIN (19,557 tiles) by "case id": the
2nd and 3rd '-'-separated fields of the file name, joined; after `random.seed(0)` it draws
int(0.2 x cases) of them, in first-seen order over nonMSIH then MSIH files (each folder sorted by name), with
`random.sample`. This reader repeats that draw with `random.Random(val_seed)` on the same ordered case ids, which
Python's `random.sample` treats as THUNDER's dict keys (a set is turned into a tuple in iteration order), so the
split is THUNDER's 14,762 / 4,795 as far as the rule goes; the real files were not at hand to confirm it, so a val
of another size is a note, not an error. THUNDER's count for val is only consistent with several tiles per case id
(a tile-unique id would give 3,911 val tiles), i.e. names like TCGA-XX-YYYY-..., whose case id is the patient; the
case id is also the test bootstrap's cluster.
"""

import random
import sys
from pathlib import Path

import numpy as np

from evalsuite.readers.files import check_classes, check_count, layout_error, require_dir
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.tiles.base import FileListReader

TASK = "tcga_crc_msi"
TRAIN_DIR, TEST_DIR = "TRAIN", "TEST"
LAYOUT = "{TRAIN,TEST}/{nonMSIH,MSIH}/* (tiles named TCGA-XX-YYYY-...)"
CLASSES = ["nonMSIH", "MSIH"]  # THUNDER's class ids: nonMSIH 0, MSIH 1
OFFICIAL_COUNTS = {TRAIN_DIR: 14_762 + 4_795, TEST_DIR: 32_361}
THUNDER_VAL_COUNT = 4_795


def list_class_tiles(root: Path) -> tuple[list, np.ndarray]:
    """(paths, class ids) of root/<class>/* in THUNDER's order: classes in CLASSES order, files sorted by name."""
    require_dir(root, TASK, LAYOUT)
    unknown = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in CLASSES
                     and not p.name.startswith("."))
    if unknown:
        print(f"evalsuite: note: {TASK}: skipping folders in {root} that are not {' or '.join(CLASSES)}: "
              f"{', '.join(unknown)}", file=sys.stderr)
    paths, labels = [], []
    for label, name in enumerate(CLASSES):
        folder = require_dir(root / name, TASK, LAYOUT)
        files = sorted((p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")),
                       key=lambda p: p.name)
        paths += files
        labels += [label] * len(files)
    return paths, np.array(labels, dtype=np.int64)


def case_id(path: Path) -> str:
    """THUNDER's case id: the file name's 2nd and 3rd '-'-separated fields, joined (XXYYYY of TCGA-XX-YYYY-...)."""
    fields = path.name.split("-")
    if len(fields) < 3:
        raise layout_error(TASK, f"unexpected file name {path} (THUNDER's case id needs three '-'-separated fields)",
                           LAYOUT)
    return fields[1] + fields[2]


def thunder_val_cases(cases: list, fraction: float, seed: int) -> set:
    """The case ids THUNDER's rule sends to val: random.sample of int(fraction x cases) over the ids in first-seen
    order, from a generator seeded like THUNDER's set_seed."""
    ordered = tuple(dict.fromkeys(cases))
    return set(random.Random(seed).sample(ordered, int(fraction * len(ordered))))


class TcgaCrcMsiReader(FileListReader):
    interval_unit = "patient"

    def __init__(self, card, data_root: Path, check_counts: bool = True, val_fraction: float = 0.2,
                 val_seed: int = 0, preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "class folders")
        val_fraction = checked_fraction(card, "val_fraction", val_fraction)  # before the files are listed
        val_seed = checked_seed(card, "val_seed", val_seed)
        found = {}
        for folder in (TRAIN_DIR, TEST_DIR):
            found[folder] = list_class_tiles(Path(data_root) / folder)
            check_count(TASK, folder, len(found[folder][0]), OFFICIAL_COUNTS[folder], check_counts)
        paths, labels = found[TRAIN_DIR]
        cases = [case_id(path) for path in paths]
        chosen = thunder_val_cases(cases, val_fraction, val_seed)
        val = np.array([case in chosen for case in cases], dtype=bool)
        if check_counts and int(val.sum()) != THUNDER_VAL_COUNT:
            print(f"evalsuite: note: {TASK}: val has {int(val.sum())} tiles, THUNDER's has {THUNDER_VAL_COUNT}; "
                  "the val differs from THUNDER's (test is the same)", file=sys.stderr)
        self.split_from_masks(paths, labels, {"train": ~val, "val": val}, groups=cases)
        test_paths, test_labels = found[TEST_DIR]
        self.splits["test"] = (test_paths, test_labels)
        self.split_groups["test"] = [case_id(path) for path in test_paths]
