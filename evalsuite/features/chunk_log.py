"""The chunk log of an unfinished feature cache: one line per chunk written, appended durably.

A chunk's record (index, bounds, sha256, time) used to be saved by rewriting the whole manifest after the chunk,
so writing a cache cost the square of its chunks: PANDA's slide caches (10,616 slides, a chunk or more each) took
429 s for 2.6 GB, 38 ms a chunk (benchmarks/cache_write.py). Now a record is one JSON line appended to
`chunks.jsonl` and fsynced after the chunk's bytes are, and `CacheWriter.finish` folds the log into the manifest
and removes it. Whoever reads an unfinished cache (a resumed run, another torchrun rank, `cache ls`) replays the
log over the manifest. A line cut short by a kill, or one that does not fit the manifest's chunk table, is
skipped: that chunk counts as not done and is extracted again, which is always safe.
"""

import contextlib
import json
import os
from pathlib import Path

from evalsuite.storage.fsio import fs_error, fsync_dir

CHUNK_LOG_FILE = "chunks.jsonl"


def append_record(folder: Path, record: dict) -> None:
    """Append `record` (index, start, stop, sha256, written_utc) as one line, durably. A line a killed writer left
    unfinished is closed first, so it stays one unreadable line instead of spoiling this one. If the write or its
    fsync fails, the line is cut off again: a record that raised is not a record."""
    path = folder / CHUNK_LOG_FILE
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size_bytes = os.fstat(descriptor).st_size
        if size_bytes and os.pread(descriptor, 1, size_bytes - 1) != b"\n":
            line = b"\n" + line
        try:
            _write_all(descriptor, line)
            os.fsync(descriptor)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, size_bytes)
            raise
    finally:
        os.close(descriptor)
    if not size_bytes:  # a new file: its name in the folder must be durable too
        fsync_dir(folder)


def replayed(folder: Path, manifest: dict) -> dict:
    """`manifest` with the chunk log's records applied (a later record of a chunk replaces an earlier one)."""
    if manifest.get("complete"):
        return manifest
    path = folder / CHUNK_LOG_FILE
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return manifest
    except OSError as exc:
        raise fs_error("read", path, exc) from None
    chunks = manifest["chunks"]
    for line in lines:
        record = _record(line)
        index = record.get("index")
        if (isinstance(index, int) and 0 <= index < len(chunks) and isinstance(record.get("sha256"), str)
                and [record.get("start"), record.get("stop")] == [chunks[index]["start"], chunks[index]["stop"]]):
            chunks[index].update(done=True, sha256=record["sha256"], written_utc=record.get("written_utc"))
    return manifest


def remove_log(folder: Path) -> None:
    """After `finish` made the manifest complete: the log says nothing the manifest does not. A log that cannot be
    removed is left: a complete cache's log is never read, and failing a finished cache over it would redo nothing."""
    with contextlib.suppress(OSError):
        (folder / CHUNK_LOG_FILE).unlink(missing_ok=True)


def _write_all(descriptor: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        written += os.write(descriptor, data[written:])


def _record(line: bytes) -> dict:
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}
