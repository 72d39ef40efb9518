"""Reading the long leaderboard CSV: its header checked, its numbers parsed strictly, its last line judged.

A last line without a line break is one of two things. A writer killed inside its one write() (leaderboard.py) leaves
a torn line: fewer fields than the header, a quote left open, or a value or seed cut into something that is no
number. An editor that saves without a final line break leaves a complete row: every field there and parsing. The
first is left out with a note naming the file and line (the next append cuts it off); the second is a row like any
other (the next append adds the missing line break before its own rows). Nothing is skipped without a word.
"""

import csv
import io
import re
import sys
from pathlib import Path

from evalsuite.errors import EvalsuiteError

# What the summary needs to identify and score a row. Other columns are optional, and columns
# this version does not know (added by a newer evalsuite) are kept and ignored.
REQUIRED_COLUMNS = ["schema", "run_id", "timestamp_utc", "task", "model", "probe", "split", "metric", "value", "seed"]
# Schema 1 rows predate `headline_metric`; balanced accuracy was the default selection metric then.
V1_HEADLINE_METRIC = "balanced_accuracy"
READ_FIX = "pass the --out folder of evalsuite runs"
# Python's float() also takes '0_5' (5.0), ' 0.5 ', '٠.٥' and 'infinity': a cell evalsuite never writes is refused,
# not read as another number. 'nan' and 'inf' are what it writes for an undefined or unbounded metric.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SPECIAL = ("nan", "inf", "+inf", "-inf")
NUMBER_FORM = "digits with a '.' decimal point (no '_', no spaces), or nan"


def strict_float(text: str) -> float:
    """`text` as a float when it is written as evalsuite writes numbers; ValueError otherwise."""
    if _DECIMAL.fullmatch(text) or text.lower() in _SPECIAL:
        return float(text)
    raise ValueError(f"not a number: {text!r}")


def strict_int(text: str) -> int:
    if _INTEGER.fullmatch(text):
        return int(text)
    raise ValueError(f"not a whole number: {text!r}")


def check_header(path: Path, header: list[str], fix: str) -> None:
    """A one-line error for a header that lacks a required column or names a column twice (a reader would take
    one of the two, the wrong one as often as not)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise EvalsuiteError(f"{path} is not an evalsuite leaderboard (missing columns: {', '.join(missing)}); {fix}")
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise EvalsuiteError(f"{path}: its header names the column(s) {', '.join(map(repr, twice))} more than once, "
                             "so which one holds the numbers is unknown; the file was edited: delete or rename the "
                             "extra column")


def check_leaderboard_file(path: Path, fix: str = "run `evalsuite run` first or pass --out DIR") -> None:
    """A one-line error unless `path` is a file; `fix`: what to do when there is none. A folder in its place is
    named as one: "no leaderboard" sent the user looking for a missing file."""
    if path.is_dir():
        raise EvalsuiteError(f"{path} is a folder, not the leaderboard file; move it aside (evalsuite writes the "
                             "leaderboard CSV under that name) or pass another --out")
    if not path.is_file():
        raise EvalsuiteError(f"no leaderboard at {path}; {fix}")


def read_rows(path: Path) -> list[dict]:
    """Every row as a dict of strings, except `value` (float), `seed` (int) and `headline_metric` (always set); a
    torn last line is left out with a `note:` line on stderr naming it."""
    rows, notes = read_rows_noted(path)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return rows


def read_rows_noted(path: Path) -> tuple[list[dict], list[str]]:
    """(rows as `read_rows` gives them, notes on lines left out), for a caller that reports notes its own way."""
    path = Path(path)
    text, notes = readable_text(path)
    reader = csv.DictReader(io.StringIO(text))
    check_header(path, reader.fieldnames or [], fix=READ_FIX)
    try:
        rows = [typed_row(row, path, reader.line_num) for row in reader]
    except csv.Error as exc:
        raise EvalsuiteError(f"{path} line {reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        raise EvalsuiteError(f"{path} has a header but no rows; run `evalsuite run` to add some")
    return rows, notes


def readable_text(path: Path) -> tuple[str, list[str]]:
    """The file's text to read (every complete line, and a last line without a line break when it is a complete
    row), and a note for a torn last line, left out."""
    check_leaderboard_file(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM (Excel) is not part of the first column's name
    except UnicodeDecodeError:
        raise EvalsuiteError(f"{path} is not a text CSV; pass the --out folder of an evalsuite run") from None
    if not text.strip():
        raise EvalsuiteError(f"{path} is empty; run `evalsuite run` to add rows or pass another --out")
    if text.endswith("\n"):
        return text, []
    body, tail = text[: text.rfind("\n") + 1], text[text.rfind("\n") + 1:]
    if not body:  # one line and no line break: a header alone (a torn first write fails as a foreign header)
        return tail + "\n", []
    header = next(csv.reader([body[: body.find("\n")]]))
    why = torn_line_problem(header, tail)
    if not why:
        return text + "\n", []
    line = body.count("\n") + 1
    note = (f"{path} line {line} is unfinished ({why}), as a writer killed inside an append "
            "leaves it: it is left out, and the next `evalsuite run` on this folder cuts it off (or delete that line)")
    return body, [note]


def torn_line_problem(header: list[str], tail: str) -> str:
    """Why `tail`, a last line without its line break, is not a complete row under `header` ("" when it is one)."""
    try:
        records = list(csv.reader([tail.rstrip("\r")], strict=True))
    except csv.Error as exc:
        return f"not valid CSV: {exc}"
    fields = records[0] if len(records) == 1 else []
    if len(fields) != len(header):
        return f"{len(fields)} of the header's {len(header)} fields"
    try:
        typed_row(dict(zip(header, fields)), Path(), 0)
    except (EvalsuiteError, KeyError):  # KeyError: a foreign header, which the caller refuses
        return "its value or seed is cut short"
    return ""


def typed_row(row: dict, path: Path, line: int) -> dict:
    if None in row or None in row.values():
        raise EvalsuiteError(f"{path} line {line}: wrong number of fields; the file was edited or is not one leaderboard")
    try:
        row["value"] = strict_float(row["value"])
    except ValueError:
        raise EvalsuiteError(f"{path} line {line}: value '{row['value']}' is not a number ({NUMBER_FORM}); the file "
                             "was edited: correct or delete that row") from None
    try:
        row["seed"] = strict_int(row["seed"])
    except ValueError:
        raise EvalsuiteError(f"{path} line {line}: seed '{row['seed']}' is not a number (a whole number in digits); "
                             "the file was edited: correct or delete that row") from None
    row["headline_metric"] = row.get("headline_metric") or V1_HEADLINE_METRIC
    return row
