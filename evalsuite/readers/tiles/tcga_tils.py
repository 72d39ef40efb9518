"""TCGA-TILs (Abousamra, Saltz et al. 2022): TIL-positive vs TIL-negative tiles, read as THUNDER reads the Zenodo
release (record 6604094, TCGA-TILs.tar.gz).

Layout under --data-root: TCGA-TILs/images-tcga-tils/<study>/{train,val,test}/{til-negative,til-positive}/<file>,
one folder per TCGA study plus `pancancer`. THUNDER (MICS-Lab/thunder src/thunder/datasets/dataset/tcga_tils.py at
6fe47e0) deletes every symbolic link after unpacking (`remove_symlinks`), then lists every study folder's split and
class folders in sorted order; its config (src/thunder/config/dataset/tcga_tils.yaml) fixes 209,221 / 38,601 /
56,275 tiles of 100x100 px at 0.5 um/px. This reader skips links instead of deleting them (evalsuite's unpacker
never writes them: downloads/unpack.py), so a `pancancer` folder of links adds nothing, as in THUNDER; a study
folder without one of train/val/test is an error (THUNDER asserts the three), a class folder a split lacks adds no
tiles (THUNDER skips it too).

Patients: third-party loaders name the tiles `<barcode>_<md5>.png` (the metadata CSV's columns partition, study,
barcode, label, path, md5); where every tile name starts with a TCGA barcode, its first three fields (TCGA-XX-YYYY,
the participant) are the tile's patient for the test bootstrap. That naming is not confirmed from the dataset's own
page; other names leave every tile its own unit.
"""

import sys
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error, require_dir
from evalsuite.readers.tiles.base import FileListReader

TASK = "tcga_tils"
IMAGES_DIR = Path("TCGA-TILs") / "images-tcga-tils"
LAYOUT = "TCGA-TILs/images-tcga-tils/<study>/{train,val,test}/{til-negative,til-positive}/*.png"
CLASSES = ["til-negative", "til-positive"]
SPLITS = ("train", "val", "test")
OFFICIAL_COUNTS = {"train": 209_221, "val": 38_601, "test": 56_275}
BARCODE_FIELDS = 3  # TCGA-<site>-<participant>: the patient part of a TCGA barcode


def real_entries(folder: Path) -> list[Path]:
    """`folder`'s entries that are not links and not hidden, sorted by name (THUNDER's sorted_listdir after its
    remove_symlinks)."""
    return sorted((p for p in folder.iterdir() if not p.is_symlink() and not p.name.startswith(".")),
                  key=lambda p: p.name)


def study_folders(images_root: Path) -> list[Path]:
    studies = [p for p in real_entries(require_dir(images_root, TASK, LAYOUT)) if p.is_dir()]
    if not studies:
        raise layout_error(TASK, f"no study folder in {images_root}", LAYOUT)
    return studies


def split_tiles(study: Path, split: str, unknown: set) -> tuple[list, list]:
    """(paths, class ids) of one study's split folder; class folders not among CLASSES go to `unknown`."""
    folder = study / split
    if not folder.is_dir() or folder.is_symlink():
        raise layout_error(TASK, f"missing folder {folder} (every study has train, val and test)", LAYOUT)
    unknown.update(str(p) for p in real_entries(folder) if p.is_dir() and p.name not in CLASSES)
    paths, labels = [], []
    for label, name in enumerate(CLASSES):
        class_dir = folder / name
        if class_dir.is_dir() and not class_dir.is_symlink():
            files = [p for p in real_entries(class_dir) if p.is_file()]
            paths += files
            labels += [label] * len(files)
    return paths, labels


def patient_of(path: Path) -> str | None:
    """TCGA-XX-YYYY from `<barcode>_<md5>.png`, or None for a name that does not start with a TCGA barcode."""
    fields = path.name.split("_")[0].split("-")
    if len(fields) < BARCODE_FIELDS or fields[0] != "TCGA":
        return None
    return "-".join(fields[:BARCODE_FIELDS])


class TcgaTilsReader(FileListReader):
    def __init__(self, card, data_root: Path, check_counts: bool = True, preprocess: str = "resize",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "class folders")
        found = {split: ([], []) for split in SPLITS}
        unknown: set = set()
        for study in study_folders(Path(data_root) / IMAGES_DIR):
            for split in SPLITS:
                paths, labels = split_tiles(study, split, unknown)
                found[split][0].extend(paths)
                found[split][1].extend(labels)
        if unknown and card.classes_closed:
            raise EvalsuiteError(f"{TASK}: folders that are not {' or '.join(CLASSES)}: {', '.join(sorted(unknown))}"
                                 f"; remove them, or drop `classes_closed` from task card {card.path}")
        if unknown:
            print(f"evalsuite: note: {TASK}: skipping folders that are not {' or '.join(CLASSES)}: "
                  f"{', '.join(sorted(unknown))}", file=sys.stderr)
        for split in SPLITS:
            check_count(TASK, f"the {split} folders of {IMAGES_DIR}/<study>", len(found[split][0]),
                        OFFICIAL_COUNTS[split], check_counts)
        self.splits = {split: (paths, np.array(labels, dtype=np.int64)) for split, (paths, labels) in found.items()}
        patients = {split: [patient_of(p) for p in paths] for split, (paths, _) in found.items()}
        if all(None not in ids for ids in patients.values()):
            self.split_groups, self.interval_unit = patients, "patient"
