"""Camelyon17-WILDS: 96x96 px lymph-node patches, tumour in the central 32x32 region or not, five hospitals; read as
the WILDS package reads its release (wilds 2.0.0, wilds/datasets/camelyon17_dataset.py) and as THUNDER takes its
splits (MICS-Lab/thunder src/thunder/datasets/dataset/wilds.py and config/dataset/wilds.yaml at 6fe47e0).

Layout under --data-root (WILDS's root_dir): camelyon17_v1.0/metadata.csv, whose first column is a row index and
whose columns include patient, node, x_coord, y_coord, tumor (0/1), slide, center (hospital 0-4) and split (0/1), and
camelyon17_v1.0/patches/patient_<patient>_node_<node>/patch_patient_<patient>_node_<node>_x_<x>_y_<y>.png.

Official split (WILDS 'official' scheme): hospital 1 is the OOD val, hospital 2 the OOD test, whatever the split
column says; in hospitals 0, 3 and 4 the split column gives train (0) and the in-distribution val `id_val` (1).
THUNDER trains on train, selects on the OOD val and reports the OOD test: 302,436 / 34,904 / 85,054 patches (its
config's counts, checked here). `test_split: id_val` scores WILDS's id_val instead (patches of the train hospitals'
slides, not used by THUNDER): the only official held-out split with more than one hospital, so the only one on which
the robustness index over `center` is defined; its size (33,560 by the WILDS release's total) is not checked.
Each patch's `center`, `slide`, `patient` and `node` are per-tile metadata for a card's `group`; patients are the
test bootstrap's clusters and the robustness index's excluded neighbours.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error, read_csv_rows, require_dir, require_file
from evalsuite.readers.tiles.base import FileListReader

TASK = "camelyon17_wilds"
RELEASE_DIR = "camelyon17_v1.0"
LAYOUT = (f"{RELEASE_DIR}/metadata.csv and "
          f"{RELEASE_DIR}/patches/patient_<P>_node_<N>/patch_patient_<P>_node_<N>_x_<X>_y_<Y>.png")
CLASSES = ["NORMAL", "TUMOR"]  # THUNDER's names for WILDS's y = tumor 0 / 1
COLUMNS = ("patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split")
METADATA_COLUMNS = ("center", "slide", "patient", "node")  # what a card's `group` may name
VAL_CENTER, TEST_CENTER = 1, 2  # WILDS's 0-indexed hospitals (camelyon17_dataset.py VAL_CENTER, TEST_CENTER)
SPLIT_CODES = {0: "train", 1: "id_val"}  # the split column, in the other hospitals
TEST_SPLITS = ("test", "id_val")
OFFICIAL_COUNTS = {"train": 302_436, "val": 34_904, "test": 85_054}


def read_metadata(path: Path) -> list[dict]:
    return read_csv_rows(path, COLUMNS, TASK, "the WILDS release's metadata.csv", "re-download the WILDS release")


def integer_cell(row: dict, column: str, where: str, allowed=None) -> int:
    """The cell as an integer (pandas may write 3 as 3.0); `allowed` limits the values."""
    text = (row.get(column) or "").strip()
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer() or (allowed is not None and int(value) not in allowed):
        expected = f"one of {sorted(allowed)}" if allowed is not None else "an integer"
        raise EvalsuiteError(f"{where}: {column} '{text}' is not {expected}")
    return int(value)


def official_split(center: int, split_code: int) -> str:
    """WILDS's split of a patch: its hospital decides for hospitals 1 and 2, the split column elsewhere."""
    if center == VAL_CENTER:
        return "val"
    if center == TEST_CENTER:
        return "test"
    return SPLIT_CODES[split_code]


def patch_path(release: Path, row: dict) -> Path:
    patient, node = row["patient"].strip(), row["node"].strip()
    x, y = row["x_coord"].strip(), row["y_coord"].strip()
    folder = f"patient_{patient}_node_{node}"
    return release / "patches" / folder / f"patch_{folder}_x_{x}_y_{y}.png"


class Camelyon17WildsReader(FileListReader):
    interval_unit = "patient"

    def __init__(self, card, data_root: Path, check_counts: bool = True, test_split: str = "test",
                 preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        check_classes(card, CLASSES, TASK, "labels (tumor 0 / 1)")
        if test_split not in TEST_SPLITS:
            raise EvalsuiteError(f"task card {card.path}: reader.args.test_split must be one of "
                                 f"{', '.join(TEST_SPLITS)}, got {test_split!r}")
        release = Path(data_root) / RELEASE_DIR
        csv_path = require_file(release / "metadata.csv", TASK, LAYOUT)
        rows = read_metadata(csv_path)
        require_dir(release / "patches", TASK, LAYOUT)
        parsed = [self._split_and_label(row, f"{TASK}: {csv_path} line {line}") for line, row in enumerate(rows, 2)]
        splits = np.array([split for split, _ in parsed])
        labels = np.array([label for _, label in parsed], dtype=np.int64)
        self._check_folders(release, rows)
        masks = {"train": splits == "train", "val": splits == "val", "test": splits == test_split}
        for split in ("train", "val", "test") if test_split == "test" else ("train", "val"):
            check_count(TASK, f"the {split} patches of {csv_path.name}", int(masks[split].sum()),
                        OFFICIAL_COUNTS[split], check_counts)
        columns = {column: np.array([row[column].strip() for row in rows]) for column in METADATA_COLUMNS}
        self.split_from_masks([patch_path(release, row) for row in rows], labels, masks, groups=columns["patient"])
        self.metadata = {split: {column: values[mask].tolist() for column, values in columns.items()}
                         for split, mask in masks.items()}

    @staticmethod
    def _split_and_label(row: dict, where: str) -> tuple[str, int]:
        label = integer_cell(row, "tumor", where, allowed={0, 1})
        center = integer_cell(row, "center", where)
        return official_split(center, integer_cell(row, "split", where, allowed=set(SPLIT_CODES))), label

    def _check_folders(self, release: Path, rows: list[dict]) -> None:
        """Every listed slide's patch folder exists (one check per folder, not per patch: 455k stat calls cost
        minutes on network storage; a missing patch is named when it is decoded)."""
        for folder in sorted({patch_path(release, row).parent for row in rows}):
            if not folder.is_dir():
                raise layout_error(TASK, f"missing folder {folder} (listed in {RELEASE_DIR}/metadata.csv)", LAYOUT)

    def groups_of(self, split: str, column: str) -> list:
        """The metadata.csv `column` (center, slide, patient or node) of each patch of `split`, in dataset order."""
        self.check_split(split, self.metadata)
        if column not in METADATA_COLUMNS:
            raise EvalsuiteError(f"task card {self.card.path}: 'group: {column}' is not a column the {TASK} reader "
                                 f"keeps; use one of {', '.join(METADATA_COLUMNS)}")
        return self.metadata[split][column]
