"""SegPath epithelium (anti-panCK) and lymphocytes (anti-CD3/CD20) segmentation, read from the Zenodo records as
distributed (7412731 and 7412529), with the splits of their file lists, as THUNDER uses them.

Layout under --data-root, one antibody per folder (reader.args cell_type: epithelial or lymphocytes):
  panCK_fileinfo.csv   | CD3CD20_fileinfo.csv   the record's file list: columns `filename` (a path relative to
                                               this folder) and `train_val_test` (train, val or test); may be gzip
  panCK_Epithelium/... | CD3CD20_Lymphocyte/... the unpacked .tar.gz: <name>_HE.png (984x984 H&E, 0.22 um/px per
                                               THUNDER) and <name>_mask.png (label 0 or 1)
Every `filename` ending in _HE.png is an image; its label is the same path ending in _mask.png, as in THUNDER
(MICS-Lab/thunder src/thunder/datasets/dataset/segpath_epithelial.py `segpath`, at 6fe47e0). Class map: 0 background,
1 the stained cell type (label values are class ids, as THUNDER reads them; any other value is an error naming the
file). Splits: the file list's train_val_test column. Images per split are THUNDER's tile counts
(src/thunder/config/dataset/segpath_{epithelial,lymphocytes}.yaml) / 9 tiles per 984 px image. Tiles: 256 x 256,
stride 256, the remainder dropped (split_grid.py).
"""

import csv
import gzip
import io
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, layout_error, require_file
from evalsuite.readers.masks.split_grid import (
    SPLITS,
    THUNDER_TILE_PX,
    LabelledImage,
    LabelPngPairs,
    SplitGridReader,
    label_lut,
)

TILES_PER_IMAGE = 9
# cell_type -> the record's file list, the folder its archive unpacks to, the card's foreground class, and the
# images per split (THUNDER's nb_{train,val,test}_samples / 9).
CELL_TYPES = {
    "epithelial": {"fileinfo": "panCK_fileinfo.csv", "folder": "panCK_Epithelium", "class": "epithelial",
                   "images": {"train": 21912, "val": 2259, "test": 2338}},
    "lymphocytes": {"fileinfo": "CD3CD20_fileinfo.csv", "folder": "CD3CD20_Lymphocyte", "class": "lymphocytes",
                    "images": {"train": 10453, "val": 1082, "test": 738}},
}
IMAGE_SUFFIX, MASK_SUFFIX = "_HE.png", "_mask.png"
MASK_LUT = label_lut({0: 0, 1: 1})
EXPECTED_VALUES = "0 (background) or 1 (stained)"
COLUMNS = ("filename", "train_val_test")


def layout(cell_type: str) -> str:
    kind = CELL_TYPES[cell_type]
    return (f"{kind['fileinfo']} and the files it lists ({kind['folder']}/<name>{IMAGE_SUFFIX} with "
            f"<name>{MASK_SUFFIX})")


def task_name(cell_type: str) -> str:
    return f"segpath_{cell_type}"


def read_fileinfo(path: Path, task: str) -> list[dict]:
    """The file list's rows; the record's CSV is read whether or not it came gzip-compressed."""
    raw = path.read_bytes()
    try:
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise EvalsuiteError(f"{task}: cannot read {path} as a CSV file list ({exc}); re-download it") from None
    rows = csv.DictReader(io.StringIO(text))
    missing = [column for column in COLUMNS if column not in (rows.fieldnames or [])]
    if missing:
        raise EvalsuiteError(f"{task}: {path} has no column {', '.join(missing)}; expected SegPath's file list with "
                             f"columns {', '.join(COLUMNS)}")
    return list(rows)


class SegpathReader(SplitGridReader):
    def __init__(self, card, data_root: Path, cell_type: str = "epithelial", tile_size_px: int = THUNDER_TILE_PX,
                 stride_px: int = THUNDER_TILE_PX, check_counts: bool = True):
        if cell_type not in CELL_TYPES:
            raise EvalsuiteError(f"task card {card.path}: reader.args cell_type must be one of "
                                 f"{', '.join(CELL_TYPES)}, got {cell_type!r}")
        self.cell_type = cell_type
        self.TASK, self.LAYOUT = task_name(cell_type), layout(cell_type)
        self.OFFICIAL_IMAGES = CELL_TYPES[cell_type]["images"]
        check_classes(card, ["background", CELL_TYPES[cell_type]["class"]], self.TASK,
                      f"class map (SegPath {cell_type} mask 0 background, 1 stained)")
        super().__init__(card, data_root, tile_size_px, stride_px, check_counts)

    def scan(self, root: Path) -> list[LabelledImage]:
        fileinfo = require_file(root / CELL_TYPES[self.cell_type]["fileinfo"], self.TASK, self.LAYOUT)
        by_split = {split: [] for split in SPLITS}
        for line, row in enumerate(read_fileinfo(fileinfo, self.TASK), start=2):
            name, split = (row["filename"] or "").strip(), (row["train_val_test"] or "").strip()
            if not name.endswith(IMAGE_SUFFIX):
                continue  # THUNDER reads only the _HE.png rows; their mask is found by name
            if split not in by_split:
                raise EvalsuiteError(f"{self.TASK}: {fileinfo} line {line} has train_val_test {split!r}; expected "
                                     f"one of {', '.join(SPLITS)}")
            image, mask = root / name, root / (name[: -len(IMAGE_SUFFIX)] + MASK_SUFFIX)
            for path in (image, mask):
                if not path.is_file():
                    raise layout_error(self.TASK, f"missing file {path} (listed in {fileinfo.name})", self.LAYOUT)
            by_split[split].append(LabelledImage(split, image, mask))
        return [item for split in SPLITS for item in by_split[split]]

    def make_source(self, labelled: list[LabelledImage]) -> LabelPngPairs:
        return LabelPngPairs(self.TASK, [item.image for item in labelled], [item.mask for item in labelled],
                             MASK_LUT, EXPECTED_VALUES)
