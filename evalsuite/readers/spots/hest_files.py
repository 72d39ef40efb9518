"""HEST-Benchmark's files on disk (mahmoodlab/HEST, Hugging Face dataset MahmoodLab/hest-bench), read with h5py.

One task folder `<bench_data_root>/<TASK>/` (IDC, PRAD, ...) holds `splits/{train,test}_<k>.csv` (columns sample_id,
patches_path, expr_path; paths relative to the task folder; HEST writes no patient column, one of your own is read),
`patches/<id>.h5` (one H&E tile per spot: `img` [N, 224, 224, 3] uint8, `barcode` [N, 1] strings, `coords` [N, 2]),
`adata/<id>.h5ad` (AnnData: `X` spot-by-gene counts, obs names = spot barcodes, var names = gene symbols) and
`var_50genes.json` ({"genes": [...]}).

The expression reading (`read_expression`, `log1p_expression`) lives in hest_h5ad.py and is re-exported here.
"""

import csv
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.spots.hest_h5ad import (
    REDOWNLOAD,
    TASK,
    decode_strings,
    examples,
    first_repeat,
    log1p_expression,
    open_h5,
    read_expression,
    reason,
)

__all__ = ["SplitRow", "read_split_csv", "fold_files", "read_gene_list", "PatchFile", "read_expression",
           "log1p_expression"]

SPLIT_COLUMNS = ("sample_id", "patches_path", "expr_path")
PATIENT_COLUMN = "patient"  # optional: HEST's files lack it (HESTData.create_splits), a folder of your own may have it
FOLD_FILE = re.compile(r"^(train|test)_(0|[1-9][0-9]*)\.csv$")
GENES_FIX = 'it should be HEST\'s var_50genes.json, {"genes": [gene symbols]}'


@dataclass(frozen=True)
class SplitRow:
    sample_id: str
    patches_path: Path
    expr_path: Path
    patient: str | None = None  # the split file's `patient` cell; None without that column


def read_split_csv(path, task_dir) -> list[SplitRow]:
    """The samples of HEST's `splits/train_<k>.csv` or `test_<k>.csv`, paths resolved against `task_dir`."""
    path, task_dir = Path(path), Path(task_dir)
    if not path.is_file():
        raise EvalsuiteError(f"{TASK}: missing split file {path}; {REDOWNLOAD}")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = csv.DictReader(handle)
            missing = [column for column in SPLIT_COLUMNS if column not in (rows.fieldnames or [])]
            if missing:
                raise EvalsuiteError(f"{TASK}: {path} has no column {', '.join(missing)} (the header must be "
                                     f"{','.join(SPLIT_COLUMNS)}); {REDOWNLOAD}")
            with_patient = PATIENT_COLUMN in rows.fieldnames
            samples = [_split_row(path, task_dir, row, line, with_patient) for line, row in enumerate(rows, 2)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} ({reason(exc)}); {REDOWNLOAD}") from None
    if not samples:
        raise EvalsuiteError(f"{TASK}: {path} lists no samples; {REDOWNLOAD}")
    repeated = first_repeat(row.sample_id for row in samples)
    if repeated is not None:
        raise EvalsuiteError(f"{TASK}: {path} lists sample '{repeated}' twice; list each sample once")
    return samples


def _split_row(path: Path, task_dir: Path, row: dict, line: int, with_patient: bool) -> SplitRow:
    columns = (*SPLIT_COLUMNS, PATIENT_COLUMN) if with_patient else SPLIT_COLUMNS
    values = {column: (row.get(column) or "").strip() for column in columns}
    empty = [column for column, value in values.items() if not value]
    if empty:
        fix = "drop the patient column" if empty == [PATIENT_COLUMN] else REDOWNLOAD
        raise EvalsuiteError(f"{TASK}: {path} line {line} has no {', '.join(empty)}; fill it in or {fix}")
    files = {column: task_dir / values[column] for column in SPLIT_COLUMNS[1:]}  # an absolute path stays absolute
    for column, file in files.items():
        if not file.is_file():
            raise EvalsuiteError(f"{TASK}: {path} row of sample '{values['sample_id']}' names {column} {file}, which "
                                 f"does not exist; put the file there or fix the row (paths are relative to "
                                 f"{task_dir})")
    return SplitRow(values["sample_id"], files["patches_path"], files["expr_path"], values.get(PATIENT_COLUMN))


def fold_files(task_dir) -> list[tuple[Path, Path]]:
    """(splits/train_k.csv, splits/test_k.csv) for k = 0..K-1: HEST's folds (benchmark.py predict_folds).

    HEST takes K = (files in splits/) // 2 and trusts the names; here a gap or an unpaired file is an error."""
    folder = Path(task_dir) / "splits"
    if not folder.is_dir():
        raise EvalsuiteError(f"{TASK}: missing folder {folder}; {REDOWNLOAD}")
    found = {"train": set(), "test": set()}
    for file in folder.iterdir():
        match = FOLD_FILE.match(file.name)
        if match and file.is_file():
            found[match[1]].add(int(match[2]))
    folds = max(found["train"] | found["test"], default=-1) + 1
    if folds == 0:
        raise EvalsuiteError(f"{TASK}: {folder} has no train_<k>.csv / test_<k>.csv fold files; {REDOWNLOAD}")
    missing = [f"{kind}_{k}.csv" for k in range(folds) for kind in ("train", "test") if k not in found[kind]]
    if missing:
        raise EvalsuiteError(f"{TASK}: {folder} lacks {examples(missing, 6)}: folds are numbered 0..{folds - 1} "
                             f"with a train and a test file each; {REDOWNLOAD}")
    return [(folder / f"train_{k}.csv", folder / f"test_{k}.csv") for k in range(folds)]


def read_gene_list(path) -> list[str]:
    """The target genes, in order: HEST's `var_50genes.json` ({"genes": [...]}, utils.py get_k_genes) or a bare list."""
    path = Path(path)
    if not path.is_file():
        raise EvalsuiteError(f"{TASK}: missing gene list {path}; {REDOWNLOAD}")
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalsuiteError(f"{TASK}: {path} is not JSON ({reason(exc)}); {GENES_FIX}") from None
    genes = content.get("genes") if isinstance(content, dict) else content
    if not isinstance(genes, list):
        raise EvalsuiteError(f"{TASK}: {path} has no 'genes' list; {GENES_FIX}")
    if not genes:
        raise EvalsuiteError(f"{TASK}: {path} lists no genes; {GENES_FIX}")
    bad = [gene for gene in genes if not isinstance(gene, str) or not gene.strip()]
    if bad:
        raise EvalsuiteError(f"{TASK}: {path} lists {bad[0]!r}, which is not a gene symbol; {GENES_FIX}")
    repeated = first_repeat(genes)
    if repeated is not None:
        raise EvalsuiteError(f"{TASK}: {path} lists gene '{repeated}' twice; list each gene once")
    return list(genes)


class PatchFile:
    """HEST's `patches/<id>.h5`: one tile per spot (`img`), the spot's barcode (`barcode`), optional `coords`.

    Checked when built. The handle is opened at most once per process: a forked DataLoader worker sees a new pid and
    opens its own (reads through an HDF5 handle inherited across a fork are unsafe); pickling drops the handle."""

    def __init__(self, path):
        self.path = Path(path)
        self._pid, self._file = None, None
        if not self.path.is_file():
            raise EvalsuiteError(f"{TASK}: missing patch file {self.path}; {REDOWNLOAD}")
        file = self._handle()
        try:
            tiles = len(self._checked_images(_dataset(file, "img", self.path)))
            self._barcodes = self._checked_barcodes(_dataset(file, "barcode", self.path), tiles)
            self.coords = self._checked_coords(file.get("coords"), tiles)
        except EvalsuiteError:
            self.close()  # the user fixes the file next: leave no handle holding it open
            raise

    @property
    def barcodes(self) -> list[str]:
        """The spot barcode of each tile, in file order (the order HEST pools spots in)."""
        return self._barcodes

    def __len__(self) -> int:
        return len(self._barcodes)

    def tile(self, index: int) -> np.ndarray:
        """Tile `index` as uint8 [H, W, 3] RGB."""
        return self._handle()["img"][index]

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._pid, self._file = None, None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pid": None, "_file": None}

    def _handle(self) -> h5py.File:
        if self._pid != os.getpid():
            # A forked child inherits the parent's handle: never read through it, open our own.
            self._file, self._pid = open_h5(self.path, "patch file"), os.getpid()
        return self._file

    def _checked_images(self, images: h5py.Dataset) -> h5py.Dataset:
        if images.ndim != 4 or images.shape[3] != 3 or images.dtype != np.uint8:
            raise EvalsuiteError(f"{TASK}: {self.path} 'img' is {images.dtype} {images.shape}; expected uint8 RGB "
                                 f"tiles [N, H, W, 3] (HEST writes [N, 224, 224, 3]); {REDOWNLOAD}")
        if len(images) == 0:
            raise EvalsuiteError(f"{TASK}: {self.path} has no tiles; {REDOWNLOAD}")
        return images

    def _checked_barcodes(self, barcodes: h5py.Dataset, tiles: int) -> list[str]:
        flat = barcodes.ndim == 1 or (barcodes.ndim == 2 and barcodes.shape[1] == 1)
        if not flat or h5py.check_string_dtype(barcodes.dtype) is None:
            raise EvalsuiteError(f"{TASK}: {self.path} 'barcode' is {barcodes.dtype} {barcodes.shape}; expected "
                                 f"strings [N, 1] or [N]; {REDOWNLOAD}")
        names = decode_strings(barcodes[()], self.path, "barcode")
        if len(names) != tiles:
            raise EvalsuiteError(f"{TASK}: {self.path} has {tiles} tiles in 'img' but {len(names)} barcodes; "
                                 f"{REDOWNLOAD}")
        repeated = first_repeat(names)
        if repeated is not None:
            raise EvalsuiteError(f"{TASK}: {self.path} has barcode '{repeated}' twice; a barcode names one spot: "
                                 f"{REDOWNLOAD}")
        return names

    def _checked_coords(self, coords, tiles: int) -> np.ndarray | None:
        if coords is None:
            return None
        if not isinstance(coords, h5py.Dataset) or coords.shape != (tiles, 2):
            raise EvalsuiteError(f"{TASK}: {self.path} 'coords' is {getattr(coords, 'shape', 'a group')}; expected "
                                 f"[{tiles}, 2] (one x, y per tile); {REDOWNLOAD}")
        return coords[()]


def _dataset(file: h5py.File, key: str, path: Path) -> h5py.Dataset:
    if not isinstance(file.get(key), h5py.Dataset):
        raise EvalsuiteError(f"{TASK}: {path} has no dataset '{key}' (found {', '.join(file.keys()) or 'none'}); "
                             f"{REDOWNLOAD}")
    return file[key]
