"""The long-format leaderboard CSV: its versioned columns, safe concurrent appends, a checking reader.

One row per model x task x probe x split x metric x seed. Many processes (a Slurm array,
torchrun ranks) may append at once: each append takes an exclusive lock and writes all of its
rows in one write() on an O_APPEND descriptor, then fsyncs, so rows are neither lost nor
interleaved, and a line left unfinished by a killed writer is cut off before the next append.
"""

import contextlib
import csv
import fcntl
import io
import os
from pathlib import Path

from evalsuite.errors import EvalsuiteError

SCHEMA_VERSION = 4
LEADERBOARD_FILE = "leaderboard.csv"
# New columns only ever go at the end: an older file is upgraded by widening its header
# (old rows keep their `schema` value and get empty cells), so no column is ever lost.
COLUMNS = [
    "schema", "run_id", "timestamp_utc", "task", "model", "weights_id", "probe", "selected_params",
    "split", "metric", "value", "seed", "n_samples", "headline_metric", "ci_low", "ci_high",
    "precision",  # schema 4: compute precision of the backbone (fp32, bf16, fp16); empty in older rows
]
# What the summary needs to identify and score a row. Other columns are optional, and columns
# this version does not know (added by a newer evalsuite) are kept and ignored.
REQUIRED_COLUMNS = ["schema", "run_id", "timestamp_utc", "task", "model", "probe", "split", "metric", "value", "seed"]
# Schema 1 rows predate `headline_metric`; balanced accuracy was the default selection metric then.
V1_HEADLINE_METRIC = "balanced_accuracy"


def append_rows(path: Path, rows: list[dict]) -> None:
    """Append one run's rows (dicts keyed by COLUMNS, `schema` filled in) as one atomic batch."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(path):
        header = _repaired_header(path)
        if header is None:
            _append_bytes(path, _render(rows, COLUMNS, with_header=True))
            return
        _check_columns(path, header, fix="move it aside or pass another --out")
        widened = header + [c for c in COLUMNS if c not in header]
        if widened != header:
            _rewrite_with_header(path, widened)
        _append_bytes(path, _render(rows, widened, with_header=False))


@contextlib.contextmanager
def _exclusive_lock(path: Path):
    # A separate lock file, because the CSV itself may be replaced when its header is widened.
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _repaired_header(path: Path) -> list[str] | None:
    """The file's header after cutting off a torn last line; None when there is no file or no complete header."""
    if not path.exists():
        return None
    with open(path, "r+b") as handle:
        if _drop_torn_tail(handle.fileno()) == 0:
            return None
        first_line = handle.readline().decode("utf-8", errors="replace")
    return next(csv.reader([first_line]))


def _drop_torn_tail(descriptor: int, chunk: int = 65536) -> int:
    """Truncate the file after its last newline (a writer killed inside write() leaves no newline); new size."""
    size = os.fstat(descriptor).st_size
    end = size
    while end > 0:
        start = max(0, end - chunk)
        newline = os.pread(descriptor, end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    if end != size:
        os.ftruncate(descriptor, end)
    return end


def _check_columns(path: Path, header: list[str], fix: str) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise EvalsuiteError(f"{path} is not an evalsuite leaderboard (missing columns: {', '.join(missing)}); {fix}")


def _rewrite_with_header(path: Path, header: list[str]) -> None:
    """Copy every row under a wider header into a new file, swapped in atomically (readers see old or new)."""
    with open(path, newline="") as handle:
        old_rows = list(csv.DictReader(handle))
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(staging, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(old_rows)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)


def _render(rows: list[dict], header: list[str], with_header: bool) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, restval="", lineterminator="\n")
    if with_header:
        writer.writeheader()
    for row in rows:
        writer.writerow({**row, "schema": SCHEMA_VERSION})
    return buffer.getvalue().encode()


def _append_bytes(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size_before = os.fstat(descriptor).st_size
        try:
            # One write() per batch is what keeps concurrent batches whole and in one piece.
            written = os.write(descriptor, data)
            if written != len(data):
                raise EvalsuiteError(f"could not append to {path}: wrote {written} of {len(data)} bytes (disk full?)")
            os.fsync(descriptor)
        except BaseException:
            # Leave no partial batch behind: the file goes back to exactly what it was.
            os.ftruncate(descriptor, size_before)
            raise
    finally:
        os.close(descriptor)


def read_rows(path: Path) -> list[dict]:
    """Every row as a dict of strings, except `value` (float), `seed` (int) and `headline_metric` (always set)."""
    path = Path(path)
    reader = csv.DictReader(io.StringIO(_complete_lines(path)))
    _check_columns(path, reader.fieldnames or [], fix="pass the --out folder of evalsuite runs")
    try:
        rows = [_typed_row(row, path, reader.line_num) for row in reader]
    except csv.Error as exc:
        raise EvalsuiteError(f"{path} line {reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        raise EvalsuiteError(f"{path} has a header but no rows; run `evalsuite run` to add some")
    return rows


def _complete_lines(path: Path) -> str:
    if not path.is_file():
        raise EvalsuiteError(f"no leaderboard at {path}; run `evalsuite run` first or pass --out DIR")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EvalsuiteError(f"{path} is not a text CSV; pass the --out folder of an evalsuite run") from None
    if not text.strip():
        raise EvalsuiteError(f"{path} is empty; run `evalsuite run` to add rows or pass another --out")
    # An unterminated last line is a batch whose writer was killed mid-write; the next append removes it.
    return text if text.endswith("\n") else text[: text.rfind("\n") + 1]


def _typed_row(row: dict, path: Path, line: int) -> dict:
    if None in row or None in row.values():
        raise EvalsuiteError(f"{path} line {line}: wrong number of fields; the file was edited or is not one leaderboard")
    try:
        row["value"], row["seed"] = float(row["value"]), int(row["seed"])
    except ValueError:
        raise EvalsuiteError(f"{path} line {line}: value '{row['value']}' or seed '{row['seed']}' is not a number") from None
    row["headline_metric"] = row.get("headline_metric") or V1_HEADLINE_METRIC
    return row


def format_table(header: list[str], body: list[list[str]]) -> str:
    """A plain aligned text table (header, dashes, rows)."""
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
