"""Slide manifests: the CSV that lists a cohort's slides, and the split rule for cohorts without one.

Columns (header row, comma-separated, UTF-8):
- `slide_path`: the slide file, relative to the data root (or absolute);
- `label` (slide classification: one of the card's classes), or `time` and `event` (survival:
  time >= 0 in any unit, event 1 = observed, 0 = censored);
- optional `split` (train/val/test), `patient` (slides of one patient stay in one split; default:
  the slide is its own patient), `slide_id` (default: the file name without extension) and `mpp`
  (this slide's microns per pixel, overriding its metadata and the card's `tiling.mpp`).

Without a `split` column, patients are dealt into `folds` seeded folds and fold `test_fold` is
the test split. Without val slides, val is carved from train by patient (readers/splits.py:
class-stratified for classification, event-stratified for survival).
"""

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.splits import carve_val

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class SlideRecord:
    slide_id: str
    path: Path
    target: tuple  # (class id,) or (time, event)
    patient: str
    split: str
    mpp: float | None = None


def read_manifest_rows(path: Path, required: tuple) -> list[dict]:
    if not path.is_file():
        raise EvalsuiteError(f"slide manifest {path} not found; write a CSV with columns "
                             f"{', '.join(required)} (docs/slides.md) or pass --data-root")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"slide manifest {path} is unreadable ({exc}); it must be a UTF-8 CSV") from None
    columns = set(rows[0]) if rows else set()
    missing = [c for c in required if c not in columns]
    if missing:
        raise EvalsuiteError(f"slide manifest {path} has no column {', '.join(missing)}; it needs "
                             f"{', '.join(required)} (docs/slides.md)")
    return rows


def parse_target(row: dict, line: int, path: Path, classes: list, survival: bool) -> tuple:
    where = f"slide manifest {path} line {line}"
    if not survival:
        label = (row.get("label") or "").strip()
        if label not in classes:
            raise EvalsuiteError(f"{where}: label '{label}' is not one of the card's classes "
                                 f"({', '.join(classes)}); fix the manifest or the card's classes")
        return (classes.index(label),)
    try:
        time_, event = float(row["time"]), float(row["event"])
    except (TypeError, ValueError):
        raise EvalsuiteError(f"{where}: time '{row.get('time')}' and event '{row.get('event')}' must be numbers") \
            from None
    if not np.isfinite(time_) or time_ < 0:
        raise EvalsuiteError(f"{where}: survival time {row['time']} is negative or not finite; times are >= 0")
    if event not in (0.0, 1.0):
        raise EvalsuiteError(f"{where}: event {row['event']} must be 1 (observed) or 0 (censored)")
    return (time_, event)


def parse_mpp(text: str | None, line: int, path: Path) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise EvalsuiteError(f"slide manifest {path} line {line}: mpp '{text}' must be a positive number (um/px)")
    return value


def records_from_rows(rows: list[dict], path: Path, root: Path, classes: list, survival: bool) -> list[dict]:
    """Parsed rows (split may be None): every field checked, one line per problem."""
    parsed, seen = [], set()
    for line, row in enumerate(rows, start=2):
        slide_path = (row.get("slide_path") or "").strip()
        if not slide_path:
            raise EvalsuiteError(f"slide manifest {path} line {line}: empty slide_path")
        full = Path(slide_path) if Path(slide_path).is_absolute() else root / slide_path
        slide_id = (row.get("slide_id") or "").strip() or Path(slide_path).stem
        if slide_id in seen:
            raise EvalsuiteError(f"slide manifest {path} line {line}: slide '{slide_id}' is listed twice")
        seen.add(slide_id)
        split = (row.get("split") or "").strip() or None
        if split is not None and split not in SPLITS:
            raise EvalsuiteError(f"slide manifest {path} line {line}: split '{split}' must be train, val or test")
        parsed.append({"slide_id": slide_id, "path": full, "target": parse_target(row, line, path, classes, survival),
                       "patient": (row.get("patient") or "").strip() or slide_id, "split": split,
                       "mpp": parse_mpp(row.get("mpp"), line, path)})
    return parsed


def assign_splits(parsed: list[dict], folds: int, test_fold: int, val_fraction: float, seed: int) -> list[SlideRecord]:
    """Records with a split each: the manifest's, else patient folds; val carved from train when empty."""
    if any(p["split"] is None for p in parsed):
        _deal_patient_folds(parsed, folds, test_fold, seed)
    if not any(p["split"] == "val" for p in parsed):
        train = [p for p in parsed if p["split"] == "train"]
        strata = np.array([int(p["target"][-1]) if len(p["target"]) == 2 else p["target"][0] for p in train])
        to_val = carve_val(strata, val_fraction, seed, groups=np.array([p["patient"] for p in train]))
        for record, moved in zip(train, to_val):
            record["split"] = "val" if moved else "train"
    return [SlideRecord(**p) for p in parsed]


def _deal_patient_folds(parsed: list[dict], folds: int, test_fold: int, seed: int) -> None:
    if not 0 <= test_fold < folds:
        raise EvalsuiteError(f"reader.args test_fold {test_fold} must be in 0..{folds - 1} (folds: {folds})")
    patients = np.array(sorted({p["patient"] for p in parsed}))
    fold_of = dict(zip(np.random.default_rng(seed).permutation(patients).tolist(),
                       np.arange(len(patients)) % folds))
    for record in parsed:
        record["split"] = "test" if fold_of[record["patient"]] == test_fold else "train"


def check_patients_in_one_split(records: list, path: Path, items: str = "slides") -> dict:
    """{patient: split}; one line naming the manifest when a patient's `items` (slides, tiles) straddle splits."""
    split_of = {}
    for record in records:
        other = split_of.setdefault(record.patient, record.split)
        if other != record.split:
            raise EvalsuiteError(f"{items[:-1]} manifest {path}: patient '{record.patient}' has {items} in {other} "
                                 f"and {record.split}; a patient's {items} must share one split")
    return split_of
