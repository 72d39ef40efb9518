"""BRACS regions of interest (BRACS_RoI, latest version), read as distributed by ICAR-CNR.

Layout under --data-root: BRACS_RoI/latest_version/{train,val,test}/<k_CLASS>/*.png with the
seven classes 0_N 1_PB 2_UDH 3_FEA 4_ADH 5_DCIS 6_IC. The official splits are patient-disjoint:
3,657 / 312 / 570 RoIs. RoIs vary in size (a few hundred to many thousands of px a side), so the
card centre-crops the largest square before the resize, and Pillow's decompression-bomb limit
is lifted for these trusted files. RoI files are named BRACS_<slide>_<CLASS>_<k>.png; the test
bootstrap resamples slides (`BRACS_<slide>`), since RoIs of one slide are not independent.
The patient of a slide is only in the separate BRACS.xlsx, so a patient with several
slides is several units.
"""

import re
from pathlib import Path

from evalsuite.readers.files import check_classes, check_count, class_folder_samples, layout_error
from evalsuite.readers.tiles.base import FileListReader

TASK = "bracs"
ROOT = Path("BRACS_RoI") / "latest_version"
LAYOUT = "BRACS_RoI/latest_version/{train,val,test}/<k_CLASS>/*.png"
CLASSES = ["0_N", "1_PB", "2_UDH", "3_FEA", "4_ADH", "5_DCIS", "6_IC"]
OFFICIAL_COUNTS = {"train": 3657, "val": 312, "test": 570}
SLIDE = re.compile(r"^(BRACS_\d+)_")


def slide_of(path: Path) -> str:
    match = SLIDE.match(path.name)
    if not match:
        raise layout_error(TASK, f"unexpected file name {path}", "BRACS_<slide>_<CLASS>_<k>.png in " + LAYOUT)
    return match.group(1)


class BracsReader(FileListReader):
    max_pixels = None
    interval_unit = "slide"

    def __init__(self, card, data_root: Path, check_counts: bool = True, preprocess: str = "center_crop",
                 crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "class folders")
        for split, expected in OFFICIAL_COUNTS.items():
            self.splits[split] = class_folder_samples(Path(data_root) / ROOT / split, card, ".png", TASK, LAYOUT)
            self.split_groups[split] = [slide_of(path) for path in self.splits[split][0]]
            check_count(TASK, f"{ROOT / split}", len(self.splits[split][0]), expected, check_counts)
