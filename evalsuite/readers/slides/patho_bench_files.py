"""Patho-Bench's files for readers/slides/patho_bench.py: the task config, the split file's rows, the slide files.

What each file holds and why each check: readers/slides/patho_bench.py. Sources: mahmoodlab/Patho-Bench at 660e770,
patho_bench/datasets/DataSplit.py (reading, dropped rows, the agreement of a sample's rows), SplitFactory.py (the
config's keys), DatasetFactory.py `_labels_dataset` (a survival task's `<task>_event` and `<task>_days`).
"""

import csv
import glob
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.yaml_files import parse_yaml

FOLD_COLUMN = re.compile(r"fold_(\d+)")
FOLD_VALUES = ("train", "val", "test", "-1")  # -1: in no split of that fold (Patho-Bench's few-shot leftovers)
SLIDE_SUFFIXES = {".svs", ".tif", ".tiff", ".ndpi", ".mrxs", ".scn", ".vms", ".vmu", ".bif", ".svslide", ".dcm"}
SPLIT_FILE = "k=all.tsv"


@dataclass(frozen=True)
class Row:
    """One slide line of a split file."""
    line: int
    slide_id: str
    sample: str
    patient: str
    target: tuple  # (class id,) or (time, event)
    folds: tuple  # the fold columns' values


@dataclass
class Cohort:
    source: str
    path: Path
    rows: list
    fold_columns: list
    paths: dict  # slide id -> slide file


def task_columns(config: Path | None, split_path: Path, task: str | None, card, survival: bool) -> dict:
    """{task, sample, label_dict, time, event}: from config.yaml (the one given, else the one beside the split file),
    else from reader.args.task (labels are then class names)."""
    explicit = config is not None
    config = config or split_path.parent / "config.yaml"
    if not config.is_file():
        if explicit:
            raise EvalsuiteError(f"Patho-Bench task config {config} not found; point reader.args.config at the "
                                 "task's config.yaml, or leave it out and give reader.args.task")
        if not task:
            raise EvalsuiteError(f"no config.yaml beside split file {split_path}; put the task's config.yaml there "
                                 "or give reader.args.task (the label column)")
        return {"task": task, "sample": None, "label_dict": None, "time": f"{task}_days", "event": f"{task}_event"}
    info = _read_config(config)
    if task and task != info["task_col"]:
        raise EvalsuiteError(f"task card {card.path}: reader.args.task '{task}' but config {config} has task_col "
                             f"'{info['task_col']}'; leave task out")
    label_dict = None if survival else _label_dict(info, config)
    return {"task": info["task_col"], "sample": info["sample_col"], "label_dict": label_dict,
            "time": f"{info['task_col']}_days", "event": f"{info['task_col']}_event"}


def _read_config(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalsuiteError(f"Patho-Bench task config {path} is unreadable ({str(exc).splitlines()[0]})") from None
    info = parse_yaml(text, path, "Patho-Bench task config")
    for key in ("task_col", "sample_col"):
        if not isinstance(info, dict) or not isinstance(info.get(key), str):
            raise EvalsuiteError(f"Patho-Bench task config {path} has no {key} (a column name); it is not a "
                                 "Patho-Bench config.yaml")
    return info


def _label_dict(info: dict, path: Path) -> dict:
    labels = info.get("label_dict")
    try:
        return {int(key): str(name) for key, name in labels.items()}
    except (AttributeError, TypeError, ValueError):
        raise EvalsuiteError(f"Patho-Bench task config {path} has no label_dict of class id -> name") from None


def read_cohort(source: str, path: Path, columns: dict, classes: list, survival: bool) -> Cohort:
    if not path.is_file():
        raise EvalsuiteError(f"Patho-Bench split file {path} not found; put the task's {SPLIT_FILE} there (hub "
                             "dataset MahmoodLab/Patho-Bench, <source>/<task>/) or fix reader.args / --data-root")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle, delimiter="\t" if path.suffix == ".tsv" else ",")
            lines, header = list(reader), [name.strip() for name in reader.fieldnames or ()]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalsuiteError(f"Patho-Bench split file {path} is unreadable ({exc})") from None
    label_columns = (columns["time"], columns["event"]) if survival else ()
    sample = columns["sample"] or ("case_id" if "case_id" in header else "slide_id")
    missing = [c for c in dict.fromkeys(("slide_id", sample, columns["task"], *label_columns)) if c not in header]
    if missing:
        raise EvalsuiteError(f"Patho-Bench split file {path} has no column {', '.join(missing)} (its columns: "
                             f"{', '.join(header)})")
    folds = sorted((c for c in header if FOLD_COLUMN.fullmatch(c)), key=lambda c: int(c.split("_")[1]))
    if not folds:
        raise EvalsuiteError(f"Patho-Bench split file {path} has no fold column (fold_0, fold_1, ...)")
    cells = [(line, {k.strip(): v.strip() for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)})
             for line, raw in enumerate(lines, start=2)]
    rows = [_row(line, values, path, columns, sample, folds, classes, survival) for line, values in cells
            if values.get(columns["task"])]  # a row without a label is dropped, as DataSplit's dropna
    check_samples_agree(rows, path, sample, folds)
    return Cohort(source, path, rows, folds, {})


def _row(line: int, values: dict, path: Path, columns: dict, sample: str, folds: list, classes: list,
         survival: bool) -> Row:
    where = f"Patho-Bench split file {path} line {line}"
    slide_id = values.get("slide_id", "")
    if not slide_id:
        raise EvalsuiteError(f"{where}: empty slide_id")
    fold_values = tuple(values.get(column, "") for column in folds)
    for column, value in zip(folds, fold_values):
        if value not in FOLD_VALUES:
            raise EvalsuiteError(f"{where}: {column} is '{value}'; a fold column holds train, val, test or -1")
    target = _survival(values, where, columns) if survival else _class(values[columns["task"]], where, columns,
                                                                        classes)
    sample_id = values.get(sample) or slide_id
    return Row(line, slide_id, sample_id, values.get("case_id") or sample_id, target, fold_values)


def _class(value: str, where: str, columns: dict, classes: list) -> tuple:
    name, label_dict = value, columns["label_dict"]
    if label_dict is not None:
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not number.is_integer() or int(number) not in label_dict:
            raise EvalsuiteError(f"{where}: {columns['task']} '{value}' is not a class id of the config's label_dict "
                                 f"({', '.join(map(str, label_dict))})")
        name = label_dict[int(number)]
    if name not in classes:
        raise EvalsuiteError(f"{where}: label '{name}' is not one of the card's classes ({', '.join(classes)}); "
                             "the card's classes are the names of the task's label_dict")
    return (classes.index(name),)


def _survival(values: dict, where: str, columns: dict) -> tuple:
    try:
        time_, event = float(values[columns["time"]]), float(values[columns["event"]])
    except ValueError:
        raise EvalsuiteError(f"{where}: {columns['time']} '{values[columns['time']]}' and {columns['event']} "
                             f"'{values[columns['event']]}' must be numbers") from None
    if not np.isfinite(time_) or time_ < 0 or event not in (0.0, 1.0):
        raise EvalsuiteError(f"{where}: {columns['time']} {time_:g} must be >= 0 and {columns['event']} {event:g} "
                             "1 (observed) or 0 (censored)")
    return (time_, event)


def check_samples_agree(rows: list, path: Path, sample: str, folds: list) -> None:
    """One slide per row, and a sample's rows agree on label and folds (DataSplit asserts both)."""
    first, seen = {}, {}
    for row in rows:
        if row.slide_id in seen:
            raise EvalsuiteError(f"Patho-Bench split file {path} line {row.line}: slide '{row.slide_id}' is already "
                                 f"on line {seen[row.slide_id]}; list each slide once")
        seen[row.slide_id] = row.line
        other = first.setdefault(row.sample, row)
        if other.target != row.target:
            raise EvalsuiteError(f"Patho-Bench split file {path} line {row.line}: {sample} '{row.sample}' has "
                                 f"another label on line {other.line}; a {sample}'s rows share its label")
        for column, mine, theirs in zip(folds, row.folds, other.folds):
            if mine != theirs:
                raise EvalsuiteError(f"Patho-Bench split file {path} line {row.line}: {sample} '{row.sample}' is "
                                     f"{mine} in {column} but {theirs} on line {other.line}; a case is in one split "
                                     "of a fold")


def find_slides(cohort: Cohort, spec: str, root: Path) -> dict:
    """{slide id: file} of every row: by a folder, a `{slide_id}` pattern or a slide_id,slide_path CSV."""
    where = str(spec).replace("{source}", cohort.source)
    base = Path(where) if Path(where).is_absolute() else root / where
    lookup = _lookup(base, root)
    paths = {}
    for row in cohort.rows:
        found = lookup(row.slide_id)
        if len(found) != 1:
            looked = str(base).replace("{slide_id}", row.slide_id)
            problem = f"has no file in {looked}" if not found else \
                f"matches {len(found)} files ({', '.join(map(str, found[:2]))})"
            raise EvalsuiteError(f"Patho-Bench split file {cohort.path} line {row.line}: slide '{row.slide_id}' "
                                 f"{problem}; point reader.args.slides at one file per slide (a folder, a "
                                 "{slide_id} pattern or a CSV), or remove its row")
        paths[row.slide_id] = found[0]
    return paths


def _lookup(base: Path, root: Path):
    """slide id -> [the files that match it] for a CSV, a pattern or a folder."""
    if base.suffix == ".csv":
        listed = _mapping_csv(base, root)
        return lambda slide_id: [listed[slide_id]] if slide_id in listed else []
    pattern = str(base)
    if "{slide_id}" in pattern:
        wild = glob.has_magic(pattern.replace("{slide_id}", ""))

        def matches(slide_id: str) -> list:
            if not wild:  # a plain path: a slide id with [ or * in it is not a wildcard
                return [path for path in [Path(pattern.replace("{slide_id}", slide_id))] if path.is_file()]
            return sorted(Path(p) for p in glob.glob(pattern.replace("{slide_id}", glob.escape(slide_id))))
        return matches
    in_folder = _folder_slides(base)
    return lambda slide_id: in_folder.get(slide_id, [])


def _folder_slides(folder: Path) -> dict:
    if not folder.is_dir():
        raise EvalsuiteError(f"slide folder {folder} not found; point reader.args.slides at the folder of the "
                             "cohort's slides (or a {slide_id} pattern, or a CSV)")
    found = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() in SLIDE_SUFFIXES and path.is_file():
            found.setdefault(path.stem, []).append(path)
    return found


def _mapping_csv(path: Path, root: Path) -> dict:
    if not path.is_file():
        raise EvalsuiteError(f"slide list {path} not found; write a CSV with columns slide_id, slide_path")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        if not {"slide_id", "slide_path"} <= set(reader.fieldnames or ()):
            raise EvalsuiteError(f"slide list {path} has no column slide_id or slide_path; it needs both")
    return {row["slide_id"].strip(): (Path(p) if Path(p := row["slide_path"].strip()).is_absolute() else root / p)
            for row in rows if (row.get("slide_id") or "").strip()}
