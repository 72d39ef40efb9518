"""Slide manifests: the CSV that lists a cohort's slides, and the split rule for cohorts without one.

Columns (header row, comma-separated, UTF-8):
- `slide_path`: the slide file, relative to the data root (or absolute);
- `label` (slide classification: one of the card's classes), or `time` and `event` (survival:
  time >= 0 in any unit, event 1 = observed, 0 = censored);
- optional `split` (train/val/test), `patient` (slides of one patient stay in one split; default:
  the slide is its own patient), `slide_id` (default: the file name without extension) and `mpp`
  (this slide's microns per pixel, overriding its metadata and the card's `tiling.mpp`).

Without a `split` column (or with an empty one), patients are dealt into `folds` seeded folds and
fold `test_fold` is the test split; a column filled for some rows only is an error. Without val
slides, val is carved from train by patient (readers/splits.py: class-stratified for
classification, event-stratified for survival). One slide file under two rows (two ids, a link or
a copy: readers/slides/slide_identity.py) is an error, as is a survival split without an observed event.
"""

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.slide_identity import first_same_file
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
            reader = csv.DictReader(handle)
            rows, columns = list(reader), set(reader.fieldnames or ())
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"slide manifest {path} is unreadable ({exc}); it must be a UTF-8 CSV") from None
    if not columns:
        raise EvalsuiteError(f"slide manifest {path} is empty; write a header row ({', '.join(required)}) and one "
                             "row per slide (docs/slides.md)")
    missing = [c for c in required if c not in columns]
    if missing:
        raise EvalsuiteError(f"slide manifest {path} has no column {', '.join(missing)}; it needs "
                             f"{', '.join(required)} (docs/slides.md)")
    if not rows:
        raise EvalsuiteError(f"slide manifest {path} lists no slides (a header and no rows); add one row per slide")
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
    parsed, line_of_id = [], {}
    for line, row in enumerate(rows, start=2):
        slide_path = (row.get("slide_path") or "").strip()
        if not slide_path:
            raise EvalsuiteError(f"slide manifest {path} line {line}: empty slide_path")
        full = Path(slide_path) if Path(slide_path).is_absolute() else root / slide_path
        slide_id = (row.get("slide_id") or "").strip() or Path(slide_path).stem
        if slide_id in line_of_id:
            raise _duplicate_id(path, line, row, parsed[line_of_id[slide_id] - 2], line_of_id[slide_id], full)
        line_of_id[slide_id] = line
        split = (row.get("split") or "").strip() or None
        if split is not None and split not in SPLITS:
            raise EvalsuiteError(f"slide manifest {path} line {line}: split '{split}' must be train, val or test")
        parsed.append({"slide_id": slide_id, "path": full, "target": parse_target(row, line, path, classes, survival),
                       "patient": (row.get("patient") or "").strip() or slide_id, "split": split,
                       "mpp": parse_mpp(row.get("mpp"), line, path)})
    _check_split_all_or_none(parsed, path)
    _check_one_row_per_file(parsed, path)
    return parsed


def _duplicate_id(path: Path, line: int, row: dict, first: dict, first_line: int, full: Path) -> EvalsuiteError:
    where = f"slide manifest {path} line {line}"
    if full.resolve() == first["path"].resolve():
        return EvalsuiteError(f"{where}: slide file {full} is already listed on line {first_line}; list each slide "
                              "once")
    if not (row.get("slide_id") or "").strip():
        # Two cohorts' folders often reuse file names (siteA/001.svs, siteB/001.svs): the default id is the name.
        return EvalsuiteError(f"{where}: slide id '{first['slide_id']}' (the file name of {full.name}) is also line "
                              f"{first_line}'s ({first['path']}); add a slide_id column with an id per slide")
    return EvalsuiteError(f"{where}: slide_id '{first['slide_id']}' is already line {first_line}'s; slide ids must "
                          "be unique")


def _check_split_all_or_none(parsed: list[dict], path: Path) -> None:
    """A split column filled for some rows only is refused: dealing folds would override the splits given, and
    guessing splits for the empty rows could put a patient's slides on both sides."""
    empty = [p["split"] is None for p in parsed]
    if any(empty) and not all(empty):
        line = empty.index(True) + 2
        raise EvalsuiteError(f"slide manifest {path} line {line}: empty split while other rows have one; give every "
                             "row a split (train, val or test), or empty the whole column to deal patient folds")


def _check_one_row_per_file(parsed: list[dict], path: Path) -> None:
    same = first_same_file([p["path"] for p in parsed])
    if same is None:
        return
    first, later = parsed[same[0]], parsed[same[1]]
    raise EvalsuiteError(f"slide manifest {path} line {same[1] + 2}: slide '{later['slide_id']}' ({later['path']}) "
                         f"names the file of slide '{first['slide_id']}' on line {same[0] + 2} ({same[2]}); one slide "
                         "under two ids is scored twice or leaks between splits: list each slide file once")


def assign_splits(parsed: list[dict], folds: int, test_fold: int, val_fraction: float, seed: int,
                  source: str = "the manifest") -> list[SlideRecord]:
    """Records with a split each: the manifest's, else patient folds; val carved from train when empty. The reader
    checks the arguments (readers/reader_args.py); `source` names the card and manifest in an error."""
    if any(p["split"] is None for p in parsed):
        _deal_patient_folds(parsed, folds, test_fold, seed, source)
    if not any(p["split"] == "val" for p in parsed):
        train = [p for p in parsed if p["split"] == "train"]
        strata = np.array([int(p["target"][-1]) if len(p["target"]) == 2 else p["target"][0] for p in train])
        to_val = carve_val(strata, val_fraction, seed, groups=np.array([p["patient"] for p in train]))
        for record, moved in zip(train, to_val):
            record["split"] = "val" if moved else "train"
    return [SlideRecord(**p) for p in parsed]


def _deal_patient_folds(parsed: list[dict], folds: int, test_fold: int, seed: int, source: str) -> None:
    if not 0 <= test_fold < folds:
        raise EvalsuiteError(f"{source}: reader.args test_fold {test_fold} must be in 0..{folds - 1} (folds: {folds})")
    patients = np.array(sorted({p["patient"] for p in parsed}))
    # A fold without a patient is empty, and test_fold could be one. One patient fits no folds at all: the reader's
    # check of its splits says so in its own terms (slides/scorable.py, tile_csv's empty split).
    if len(patients) > 1 and folds > len(patients):
        raise EvalsuiteError(f"{source}: reader.args.folds is {folds} but the manifest lists {len(patients)} "
                             f"patients, and each fold needs one: use at most {len(patients)} folds, or give the "
                             "manifest a split column")
    fold_of = dict(zip(np.random.default_rng(seed).permutation(patients).tolist(),
                       np.arange(len(patients)) % folds))
    for record in parsed:
        record["split"] = "test" if fold_of[record["patient"]] == test_fold else "train"


def check_patients_in_one_split(records: list, path: Path | None, items: str = "slides", where: str | None = None,
                                patient: str = "patient") -> dict:
    """{patient: split}; one line naming the manifest (or `where`: another file's words, e.g. Patho-Bench's split
    file and its `case`) when a `patient`'s `items` (slides, tiles) straddle splits."""
    split_of = {}
    for record in records:
        other = split_of.setdefault(record.patient, record.split)
        if other != record.split:
            raise EvalsuiteError(f"{where or f'{items[:-1]} manifest {path}'}: {patient} '{record.patient}' has "
                                 f"{items} in {other} and {record.split}; a {patient}'s {items} must share one split "
                                 "(else they leak)")
    return split_of


def check_events(records: list, path: Path) -> None:
    """Every survival split needs an observed event: train to fit a Cox model, val and test for a concordance index
    (no event, no comparable pair). Checked on the manifest, before any slide is tiled or extracted."""
    for split in SPLITS:
        events = [r.target[1] for r in records if r.split == split]
        if events and not any(events):
            raise EvalsuiteError(f"slide manifest {path}: all {len(events)} {split} slides are censored (event 0); "
                                 f"every split needs an observed event: check the event column or the splits")
