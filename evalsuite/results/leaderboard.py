"""The long-format leaderboard CSV: its versioned columns, safe concurrent appends, a checking reader.

One row per model x task x probe x split x metric x seed. Many processes (a Slurm array,
torchrun ranks) may append at once: each append takes an exclusive lock and writes all of its
rows in one write() on an O_APPEND descriptor, then fsyncs, so rows are neither lost nor
interleaved, and a line left unfinished by a killed writer is cut off before the next append, while a complete
last row that only lacks its line break (an editor saved it so) is kept and gets one (leaderboard_read.py tells them
apart); either repair is a `note:` line on stderr. An append that fails (a full disk, a read-only mount) leaves the
file byte for byte as it was.
"""

import contextlib
import csv
import errno
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# The reading side lives in leaderboard_read.py; its names stay importable from here, where callers import them.
from evalsuite.results.leaderboard_read import (  # noqa: F401
    REQUIRED_COLUMNS,
    V1_HEADLINE_METRIC,
    check_header,
    check_leaderboard_file,
    read_rows,
    readable_text,
    torn_line_problem,
)
from evalsuite.storage.fsio import discard, exclusive_lock, fs_errors, write_atomically

SCHEMA_VERSION = 6
LEADERBOARD_FILE = "leaderboard.csv"
# New columns only ever go at the end: an older file is upgraded by widening its header
# (old rows keep their `schema` value and get empty cells), so no column is ever lost.
COLUMNS = [
    "schema", "run_id", "timestamp_utc", "task", "model", "weights_id", "probe", "selected_params",
    "split", "metric", "value", "seed", "n_samples", "headline_metric", "ci_low", "ci_high",
    "precision",  # schema 4: compute precision of the backbone (fp32, bf16, fp16); empty in older rows
    # schema 5: what extraction cost (evalsuite.features.throughput); empty in older rows and for caches made before.
    # Schema 5's gpu_hours_est is schema 6's device_hours_est: an older file keeps the old column (empty in new rows).
    "throughput_img_s", "forward_img_s", "device_name",
    # schema 6: the backbone's load-independent cost (evalsuite.models.flops) and the load the rates were measured under
    "device_hours_est", "gflops_per_image", "params", "host_load_1m",
]
_FOREIGN_FIX = "move it aside or pass another --out"


def check_appendable(path: Path) -> None:
    """Refuse, before a run writes anything, a leaderboard.csv that `append_rows` would refuse."""
    path = Path(path)
    with fs_errors("read", path):
        header = _layout(path).header
    if header is not None:
        check_header(path, header, fix=_FOREIGN_FIX)
    # The files the append opens, opened now (neither is created): an immutable CSV (chattr +i) or a lock file that
    # is a folder refuses in seconds, not after hours of extraction and probes.
    for target, action in ((path, "append to"), (lock_path(path), "lock")):
        if os.path.lexists(target):
            with fs_errors(action, target):
                os.close(os.open(target, os.O_WRONLY | os.O_APPEND))


def append_rows(path: Path, rows: list[dict]) -> None:
    """Append one run's rows (dicts keyed by COLUMNS, `schema` filled in) as one atomic batch.

    On any failure (a full disk included) the file is left byte for byte as it was."""
    path = Path(path)
    with fs_errors("append to", path):
        path.parent.mkdir(parents=True, exist_ok=True)
    with leaderboard_lock(path):
        append_rows_locked(path, rows)


def leaderboard_lock(path: Path):
    """The appenders' lock, a separate file because the CSV may be replaced when widened."""
    return exclusive_lock(lock_path(path), "lock")


def lock_path(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + ".lock")


def append_rows_locked(path: Path, rows: list[dict]) -> None:
    """`append_rows` for a caller that holds `leaderboard_lock(path)`."""
    with fs_errors("append to", path):
        layout = _layout(path)
        if layout.header is None:
            _append_bytes(path, _render(rows, COLUMNS, with_header=True), keep_bytes=0)
        else:
            check_header(path, layout.header, fix=_FOREIGN_FIX)
            widened = layout.header + [c for c in COLUMNS if c not in layout.header]
            new_rows = _render(rows, widened, with_header=False)
            if widened != layout.header:  # every row is written anew, each with its line break
                _rewrite_with_header(path, widened, layout.keep_bytes, new_rows)
            else:
                _append_bytes(path, layout.line_break + new_rows, keep_bytes=layout.keep_bytes)
    if layout.note:  # said once the append has happened: a failed one leaves the file as it was
        print(f"note: {path}: {layout.note}", file=sys.stderr)


def run_ids(path: Path) -> set:
    """The run ids the leaderboard's rows name (empty without a file); a foreign file is an error."""
    text = readable_text(Path(path))[0] if Path(path).exists() else ""
    reader = csv.DictReader(io.StringIO(text))
    if not text.strip():
        return set()
    check_header(Path(path), reader.fieldnames or [], fix=_FOREIGN_FIX)
    return {row.get("run_id") for row in reader}


@dataclass(frozen=True)
class _Layout:
    """What an append keeps of the file and writes before its rows."""
    header: list | None  # None: no file, or nothing to keep
    keep_bytes: int  # the file's bytes to keep: a torn last line after them is cut off
    line_break: bytes = b""  # b"\n" when the kept bytes end in a complete row (or header) without its line break
    note: str = ""  # what the append repaired, for stderr


def _layout(path: Path) -> _Layout:
    """The header and what to keep. Bytes after the last newline are either a line left unfinished by a writer
    killed inside write(), cut off, or a complete row whose line break an editor left out, kept."""
    if not path.exists():
        return _Layout(None, 0)
    with open(path, "rb") as handle:
        size, complete_bytes = os.fstat(handle.fileno()).st_size, _complete_bytes(handle.fileno())
        first_line = handle.readline()
        tail = os.pread(handle.fileno(), size - complete_bytes, complete_bytes)
    if size == 0:
        return _Layout(None, 0)
    header = _header(first_line)
    if not tail:
        return _Layout(header, size)
    if complete_bytes == 0:  # one line, no line break: a torn first write, or a header an editor saved so
        return _first_line_layout(header, size)
    why = torn_line_problem(header, tail.decode("utf-8", errors="replace"))
    if not why:
        return _Layout(header, size, b"\n", "its last row had no line break at its end (an editor saves it so); "
                                             "added one before the new rows, so that row is kept")
    return _Layout(header, complete_bytes, note=f"cut off its unfinished last line ({why}), as a writer killed "
                                                "inside an append leaves it")


def _first_line_layout(header: list, size: int) -> _Layout:
    if ",".join(COLUMNS).startswith(",".join(header)) and len(header) < len(COLUMNS):
        return _Layout(None, 0, note="cut off its unfinished header, as a writer killed inside the first append "
                                     "leaves it")
    return _Layout(header, size, b"\n", "its header had no line break at its end; added one before the new rows")


def _header(first_line: bytes) -> list:
    return next(csv.reader([first_line.decode("utf-8-sig", errors="replace")]), [])  # Excel saves a BOM first


def _complete_bytes(descriptor: int, chunk: int = 65536) -> int:
    """The file's size up to and including its last newline."""
    end = os.fstat(descriptor).st_size
    while end > 0:
        start = max(0, end - chunk)
        newline = os.pread(descriptor, end - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _rewrite_with_header(path: Path, header: list[str], complete_bytes: int, new_rows: bytes) -> None:
    """Every old row under a wider header plus the new rows, in a new file swapped in atomically.

    Readers see the old file or the new one; a failure (a full disk) leaves the old one and no temp file."""
    with open(path, "rb") as handle:
        old_text = handle.read(complete_bytes).decode("utf-8-sig", errors="surrogateescape")
    old_rows = csv.DictReader(io.StringIO(old_text, newline=""))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(old_rows)
    write_atomically(path, text.getvalue().encode("utf-8", errors="surrogateescape") + new_rows)


def _render(rows: list[dict], header: list[str], with_header: bool) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, restval="", lineterminator="\n")
    if with_header:
        writer.writeheader()
    for row in rows:
        writer.writerow({**row, "schema": SCHEMA_VERSION})
    return buffer.getvalue().encode()


def _append_bytes(path: Path, data: bytes, keep_bytes: int) -> None:
    """Cut the file to `keep_bytes` (dropping a torn last line) and append `data` in one write()."""
    existed = path.exists()
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        torn_tail = os.pread(descriptor, os.fstat(descriptor).st_size - keep_bytes, keep_bytes)
        try:
            if torn_tail:
                os.ftruncate(descriptor, keep_bytes)
            # One write() per batch is what keeps concurrent batches whole and in one piece.
            written = os.write(descriptor, data)
            if written != len(data):
                # A short write to a regular file means the disk or the quota is full.
                raise OSError(errno.ENOSPC, f"wrote {written} of {len(data)} bytes")
            os.fsync(descriptor)
        except BaseException:
            _restore(descriptor, path, keep_bytes, torn_tail, existed)
            raise
    finally:
        os.close(descriptor)


def _restore(descriptor: int, path: Path, keep_bytes: int, torn_tail: bytes, existed: bool) -> None:
    """Put the file back byte for byte as it was before a failed append."""
    if not existed:
        discard(path)
        return
    with contextlib.suppress(OSError):  # best effort: the error being raised is the one to report
        os.ftruncate(descriptor, keep_bytes)
        if torn_tail:
            os.write(descriptor, torn_tail)


def _cell(value) -> str:
    return "" if value == "" else f"{value:.6f}"


def device_hours(throughput: dict):
    """The device-hours estimate of a run JSON's throughput block (or a leaderboard row), under its old name
    (gpu_hours_est) in runs made before issue 41."""
    value = throughput.get("device_hours_est")
    return throughput.get("gpu_hours_est") if value in (None, "") else value


def _throughput_cells(throughput: dict) -> dict:
    measured = {**throughput, "device_hours_est": device_hours(throughput)}
    rates = {name: "" if measured.get(name) is None else _cell(measured[name])
             for name in ("throughput_img_s", "forward_img_s", "device_hours_est")}
    load = throughput.get("host_load_1m")
    return {**rates, "device_name": throughput.get("device_name") or "", "host_load_1m": "" if load is None else load}


def _cost_cells(cost: dict) -> dict:
    """The backbone's FLOPs and parameters (run JSON `cost`); empty for runs made before they were counted."""
    return {"gflops_per_image": cost.get("gflops_per_image", ""), "params": cost.get("params", "")}


def rows_from_record(record: dict, split_sizes: dict) -> list[dict]:
    """One leaderboard row per (probe, seed, split, metric) of a run record; `split_sizes` = {split: samples}."""
    rows = []
    for result in record["probes"]:
        for split, metrics in result["metrics"].items():
            for metric, value in metrics.items():
                low, high = result["intervals_95"].get(split, {}).get(metric, ("", ""))
                rows.append({
                    "run_id": record["run_id"], "timestamp_utc": record["timestamp_utc"],
                    "task": record["task"]["name"], "model": record["model"]["name"],
                    "weights_id": record["model"]["weights_id"], "probe": result["probe"],
                    "selected_params": json.dumps(result["selected_params"], sort_keys=True),
                    "split": split, "metric": metric, "value": f"{value:.6f}", "seed": result["seed"],
                    "ci_low": _cell(low), "ci_high": _cell(high),
                    "n_samples": split_sizes[split],
                    "headline_metric": record["task"]["selection_metric"],
                    "precision": record["precision"],
                    **_throughput_cells(record.get("throughput") or {}),
                    **_cost_cells(record.get("cost") or {}),
                })
    return rows
