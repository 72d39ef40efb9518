"""The generic tile reader: any tile cohort listed in a CSV manifest, optionally with a site/scanner/stain column.

Columns (header row, comma-separated, UTF-8):
- `image_path`: the tile image, relative to the folder holding the CSV (or absolute);
- `label`: one of the card's classes;
- optional `split` (one of the card's splits; all rows or none), `patient` (tiles of one patient stay in
  one split and form one bootstrap cluster; default: the tile is its own unit), `caption` (a text describing
  the tile, read by the text_retrieval probe; `caption_column` names another column) and any other columns,
  such as the one a card's `group` names (e.g. `site`), which `groups_of(split, column)` hands out.

Without a `split` column the patients are dealt into `folds` seeded folds and fold `test_fold` is
test; without val tiles, val is carved from train by patient, class-stratified (the slide manifest's
rule, readers/slides/slide_manifest.py `assign_splits`). Every problem is one line naming the file and line.
"""

import csv
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.reader_args import checked_fold_args
from evalsuite.readers.slides.slide_manifest import assign_splits, check_patients_in_one_split
from evalsuite.readers.tiles.base import FileListReader

REQUIRED = ("image_path", "label")


class TileCsvReader(FileListReader):
    def __init__(self, card, data_root, check_counts: bool = True, manifest: str = "tiles.csv", folds: int = 5,
                 test_fold: int = 0, val_fraction: float = 0.2, seed: int = 0, preprocess: str = "resize",
                 crop_px: int | None = None, caption_column: str | None = None):
        # check_counts: a user cohort has no official split sizes; accepted for a uniform interface.
        super().__init__(card, preprocess, crop_px, data_root)
        split_args = checked_fold_args(card, folds, test_fold, val_fraction, seed)  # before the manifest is read
        self.manifest_path = Path(data_root) / manifest
        # A listed tile is left out by deleting its row; --no-count-check does nothing here (no official counts).
        self.unreadable_remedy = f"replace the file, or delete its row from {self.manifest_path}"
        rows, columns = read_tile_rows(self.manifest_path)
        if card.group is not None and card.group not in columns:
            raise EvalsuiteError(f"tile manifest {self.manifest_path} has no column '{card.group}', which task card "
                                 f"{card.path} names in 'group'; add the column or fix the card")
        self.caption_column = _caption_column(caption_column, columns, self.manifest_path, card)
        parsed = self._parse(rows, "split" in columns)
        records = assign_splits(parsed, *split_args, source=f"task card {card.path} ({self.manifest_path})")
        self._check_patients(records)
        self._fill(records, rows, "patient" in columns)

    def _parse(self, rows: list[dict], has_split: bool) -> list[dict]:
        """Rows as the slide manifest's split rule takes them (`slide_id` = the tile's path as written)."""
        parsed, seen, folder = [], {}, self.manifest_path.parent
        for line, row in enumerate(rows, start=2):
            where = f"tile manifest {self.manifest_path} line {line}"
            written = (row.get("image_path") or "").strip()
            path = Path(written) if Path(written).is_absolute() else folder / written
            if not written or not path.is_file():
                raise EvalsuiteError(f"{where}: image file '{written}' not found (looked for {path}); paths are "
                                     "relative to the CSV's folder")
            if written in seen:
                raise EvalsuiteError(f"{where}: tile '{written}' is already listed on line {seen[written]}")
            seen[written] = line
            label = (row.get("label") or "").strip()
            if label not in self.card.classes:
                raise EvalsuiteError(f"{where}: label '{label}' is not one of the card's classes "
                                     f"({', '.join(self.card.classes)}); fix the manifest or the card's classes")
            parsed.append({"slide_id": written, "path": path, "target": (self.card.classes.index(label),),
                           "patient": (row.get("patient") or "").strip() or written,
                           "split": self._split(row, line, has_split), "mpp": None})
            self._check_group_cell(row, where)
        return parsed

    def _split(self, row: dict, line: int, has_split: bool) -> str | None:
        split = (row.get("split") or "").strip() or None
        if has_split and split not in self.card.splits:
            raise EvalsuiteError(f"tile manifest {self.manifest_path} line {line}: split '{split or ''}' must be one "
                                 f"of {', '.join(self.card.splits)} (give every row a split, or drop the column)")
        return split

    def _check_group_cell(self, row: dict, where: str) -> None:
        if self.card.group is not None and not (row.get(self.card.group) or "").strip():
            raise EvalsuiteError(f"{where}: empty '{self.card.group}' (the card's group column); every tile needs one")

    def _check_patients(self, records) -> None:
        split_of = check_patients_in_one_split(records, self.manifest_path, "tiles")
        for split in ("train", "val", "test"):
            if split not in split_of.values():
                raise EvalsuiteError(f"tile manifest {self.manifest_path}: no {split} tiles; list some, or drop the "
                                     "split column to deal patients into folds")

    def _fill(self, records, rows: list[dict], has_patient: bool) -> None:
        splits = np.array([r.split for r in records])
        masks = {split: splits == split for split in self.card.splits}
        labels = np.array([r.target[0] for r in records], dtype=np.int64)
        patients = [r.patient for r in records] if has_patient else None
        self.split_from_masks([r.path for r in records], labels, masks, groups=patients)
        self.interval_unit = "patient" if has_patient else "tile"
        self.split_rows = {split: [rows[i] for i in np.flatnonzero(mask)] for split, mask in masks.items()}
        self.split_lines = {split: [int(i) + 2 for i in np.flatnonzero(mask)] for split, mask in masks.items()}

    def captions(self, split: str) -> list:
        """The caption of each tile of `split`, in dataset order; an empty one is refused with its line."""
        self.check_split(split, self.split_rows)
        captions = [(row.get(self.caption_column) or "").strip() for row in self.split_rows[split]]
        for caption, line in zip(captions, self.split_lines[split]):
            if not caption:
                raise EvalsuiteError(f"tile manifest {self.manifest_path} line {line}: empty '{self.caption_column}' "
                                     f"(the caption column); every {split} tile needs a caption")
        return captions

    def groups_of(self, split: str, column: str) -> list:
        """The manifest's `column` value of each tile of `split`, in dataset order."""
        self.check_split(split, self.split_rows)
        if self.split_rows[split] and column not in self.split_rows[split][0]:
            raise EvalsuiteError(f"tile manifest {self.manifest_path} has no column '{column}', which task card "
                                 f"{self.card.path} names in 'group'; add the column or fix the card")
        return [(row.get(column) or "").strip() for row in self.split_rows[split]]


def _caption_column(asked: str | None, columns: set, manifest: Path, card) -> str | None:
    """The manifest's caption column: `caption` where present, or the one reader.args.caption_column names."""
    if asked is not None and asked not in columns:
        raise EvalsuiteError(f"tile manifest {manifest} has no column '{asked}', which task card {card.path} names in "
                             "reader.args.caption_column; add the column or fix the card")
    return asked or ("caption" if "caption" in columns else None)


def read_tile_rows(path: Path) -> tuple[list[dict], set]:
    """(rows, column names) of a tile manifest; a missing, unreadable or column-less file is one line."""
    if not path.is_file():
        raise EvalsuiteError(f"tile manifest {path} not found; write a CSV with columns {', '.join(REQUIRED)} "
                             "(docs/group_robustness.md) or pass --data-root")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows, columns = list(reader), set(reader.fieldnames or ())
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"tile manifest {path} is unreadable ({exc}); it must be a UTF-8 CSV") from None
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise EvalsuiteError(f"tile manifest {path} has no column {', '.join(missing)}; it needs "
                             f"{', '.join(REQUIRED)} (docs/group_robustness.md)")
    if not rows:
        raise EvalsuiteError(f"tile manifest {path} lists no tiles")
    return rows, columns
