"""The long-format leaderboard CSV: safe concurrent appends and a model x task summary.

One row per model x task x probe x split x metric x seed. Appends from many processes (a
Slurm array, torchrun ranks) take an exclusive lock and write all of a run's rows in one
write() on an O_APPEND descriptor, then fsync, so rows are neither lost nor interleaved.
"""

import csv
import fcntl
import io
import os
from collections import defaultdict
from pathlib import Path

from evalsuite.errors import EvalsuiteError

SCHEMA_VERSION = 1
LEADERBOARD_FILE = "leaderboard.csv"
COLUMNS = [
    "schema", "run_id", "timestamp_utc", "task", "model", "weights_id", "probe", "selected_params",
    "split", "metric", "value", "seed", "n_samples",
]


def append_rows(path: Path, rows: list[dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                needs_header = os.fstat(descriptor).st_size == 0
                os.write(descriptor, _render(rows, needs_header).encode())
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _render(rows: list[dict], with_header: bool) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    if with_header:
        writer.writeheader()
    for row in rows:
        writer.writerow({"schema": SCHEMA_VERSION, **row})
    return buffer.getvalue()


def read_rows(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise EvalsuiteError(f"no leaderboard at {path}; run `evalsuite run` first or pass --out DIR")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise EvalsuiteError(f"{path} is not an evalsuite leaderboard (missing columns: {', '.join(missing)})")
        return list(reader)


def summary_table(rows: list[dict], metric: str, split: str) -> tuple[list[str], list[list[str]]]:
    """Model rows x task/probe columns: mean over seeds of the latest run per (model, task, probe, seed)."""
    latest = {}
    for row in rows:
        if row["metric"] != metric or row["split"] != split:
            continue
        ident = (row["model"], row["task"], row["probe"], row["seed"])
        if ident not in latest or row["timestamp_utc"] >= latest[ident]["timestamp_utc"]:
            latest[ident] = row
    if not latest:
        raise EvalsuiteError(f"the leaderboard has no rows for metric '{metric}' on split '{split}'")
    values = defaultdict(list)
    for (model, task, probe, _), row in latest.items():
        values[(model, f"{task}/{probe}")].append(float(row["value"]))
    models = sorted({m for m, _ in values})
    columns = sorted({c for _, c in values})
    body = [[model] + [_mean_text(values.get((model, column))) for column in columns] for model in models]
    return ["model"] + columns, body


def _mean_text(values) -> str:
    if not values:
        return "-"
    mean = sum(values) / len(values)
    return f"{mean:.4f}" if len(values) == 1 else f"{mean:.4f} (n={len(values)})"


def format_table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)) for line in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
