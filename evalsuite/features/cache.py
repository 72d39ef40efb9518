"""On-disk float16 feature caches: chunked, checksummed, resumable, shared safely between processes.

One folder per cache key under `<out>/cache/`:
- `features.npy`: float16 [N, *row_shape], allocated at full size when extraction starts and
  filled chunk by chunk with positioned writes (no mapping, so the writer's RSS stays flat);
- `labels.npy`: integer labels [N] (class ids) or [N, H, W] (masks), in the reader's integer dtype, or
  float64 targets [N, T] (regression);
- `manifest.json`: key fields, shape, dtype, chunk table (rows, sha256, done), completeness,
  library versions; replaced atomically (temp file + fsync + rename) when the cache starts and when
  it is finished;
- `chunks.jsonl` while the cache is unfinished: a line per chunk written, appended and fsynced after the
  chunk's bytes are on disk (evalsuite.features.chunk_log), so a process killed at any moment leaves
  records of only chunks whose bytes are durable, at a cost per chunk that does not grow with the
  cache. A rerun continues from the first unfinished chunk.
Readers accept only complete caches; opening one checks every chunk's sha256 and every row's
finiteness in one pass (evalsuite.features.cache_checks), and a cache failing either is refused
as corrupt. An exclusive lock per key makes a second process asking for the same key wait (it
says so on stderr), then reuse what the first one wrote. A file-system fault is a one-line error
naming the file (evalsuite.storage.fsio); a cache that fails before its first chunk is removed.
"""

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.features.cache_checks import check_opened, corrupt_chunks
from evalsuite.features.chunk_log import CHUNK_LOG_FILE, append_record, remove_log, replayed
from evalsuite.storage.fsio import exclusive_lock, fs_errors, write_atomically
from evalsuite.storage.npy_rows import NpyRows

CACHE_DTYPE = np.float16
FEATURES_FILE = "features.npy"
LABELS_FILE = "labels.npy"
MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
_LOCK_DIR = ".locks"


def cache_key(fields: dict) -> str:
    """A stable hash of everything that changes the cached numbers."""
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def chunk_bounds(samples: int, chunk_rows: int) -> list[tuple[int, int]]:
    return [(start, min(start + chunk_rows, samples)) for start in range(0, samples, chunk_rows)]


def write_json_atomic(path: Path, payload: dict) -> None:
    """Replace `path` with `payload`; a failure leaves the old file and no temp file."""
    write_atomically(path, json.dumps(payload, indent=1, sort_keys=True).encode())


@dataclass
class CacheLayout:
    """What a slide cache adds to the plain layout: chunk bounds (a slide's tiles never share a chunk with
    another slide's), manifest entries (the slide table) and arrays saved beside the features."""
    bounds: list = field(default_factory=list)  # [(start, stop)]; empty: every chunk_rows rows
    manifest: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)  # {name: array} saved as <name>.npy


class CacheWriter:
    """Fills one cache folder chunk by chunk; see the module docstring for the guarantees."""

    def __init__(self, folder: Path, manifest: dict):
        self.folder = folder
        self.manifest = manifest

    @property
    def row_shape(self) -> tuple:
        return tuple(self.manifest["shape"][1:])

    def pending_chunks(self) -> list[tuple[int, int, int]]:
        return [(i, c["start"], c["stop"]) for i, c in enumerate(self.manifest["chunks"]) if not c["done"]]

    def write_chunk(self, index: int, rows: np.ndarray) -> None:
        chunk = self.manifest["chunks"][index]
        if rows.dtype != CACHE_DTYPE or rows.shape != (chunk["stop"] - chunk["start"], *self.row_shape):
            raise ValueError(f"chunk {index} expects float16 {(chunk['stop'] - chunk['start'], *self.row_shape)}, "
                             f"got {rows.dtype}{rows.shape}")
        payload = memoryview(np.ascontiguousarray(rows)).cast("B")  # no copy of the chunk
        offset = self.manifest["data_offset_bytes"] + chunk["start"] * self._row_bytes()
        try:
            self._write_and_record(index, payload, offset)
        except EvalsuiteError:
            self._check_still_there()
            raise

    def _write_and_record(self, index: int, payload: memoryview, offset: int) -> None:
        # A fault leaves this chunk unrecorded in the chunk log: the rerun writes it again.
        with fs_errors("write feature cache", self.folder / FEATURES_FILE):
            _pwrite_durably(self.folder / FEATURES_FILE, payload, offset)
        chunk = self.manifest["chunks"][index]
        record = {"sha256": hashlib.sha256(payload).hexdigest(),
                  "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        # Several ranks may fill chunks of one cache: one appender at a time (O_APPEND alone is not atomic on NFS).
        with exclusive_lock(self.folder / ".manifest.lock", "lock"), \
                fs_errors("update", self.folder / CHUNK_LOG_FILE):
            append_record(self.folder, {"index": index, "start": chunk["start"], "stop": chunk["stop"], **record})
        chunk.update(done=True, **record)

    def reload(self) -> None:
        """The manifest on disk with the chunk log replayed: every rank's chunks so far."""
        try:
            self.manifest = replayed(self.folder, json.loads((self.folder / MANIFEST_FILE).read_text()))
        except FileNotFoundError:
            self._check_still_there()
            raise

    def _check_still_there(self) -> None:
        """A scratch purge removes folders under a running extraction (`cache rm` waits): say so, not ENOENT."""
        if not (self.folder / MANIFEST_FILE).is_file():
            raise EvalsuiteError(f"feature cache {self.folder} was removed while this run was writing it (a scratch "
                                 "purge, another tool); rerun the same command") from None

    def finish(self) -> None:
        self.reload()
        if self.pending_chunks():
            raise RuntimeError("cannot finish a cache with unfinished chunks")
        self.manifest["complete"] = True
        with fs_errors("update", self.folder / MANIFEST_FILE):
            write_json_atomic(self.folder / MANIFEST_FILE, self.manifest)
        remove_log(self.folder)

    def _row_bytes(self) -> int:
        return int(np.prod(self.row_shape, dtype=np.int64)) * np.dtype(CACHE_DTYPE).itemsize


class FeatureCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        return self.root / key

    @contextlib.contextmanager
    def lock(self, key: str):
        """Exclusive per-key lock; a second process blocks here until the first is done."""
        lock_dir = self.root / _LOCK_DIR
        with fs_errors("create", lock_dir):
            lock_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_dir / f"{key}.lock", "lock", announce_wait=True):
            yield

    def manifest(self, key: str) -> dict | None:
        path = self.folder(key) / MANIFEST_FILE
        if not path.is_file():
            return None
        try:
            return replayed(path.parent, json.loads(path.read_text()))
        except ValueError:
            raise EvalsuiteError(f"feature cache manifest {path} is corrupt; remove it with "
                                 f"`evalsuite cache rm {key}` and rerun") from None

    def is_complete(self, key: str) -> bool:
        manifest = self.manifest(key)
        return bool(manifest and manifest.get("complete"))

    def open(self, key: str, mode: str = "memmap"):
        """(features, labels) of a complete cache: features in host RAM (`ram`) or memory-mapped."""
        folder = self.folder(key)
        manifest = self.manifest(key)
        if not (manifest and manifest.get("complete")):
            raise EvalsuiteError(f"feature cache {folder} is gone or unfinished: it was removed while this run "
                                 "used it (`evalsuite cache rm`, a scratch purge); rerun the same command")
        try:
            features = np.load(folder / FEATURES_FILE) if mode == "ram" else NpyRows(folder / FEATURES_FILE)
            # Masks of a segmentation task can be large: map them, never load them whole.
            labels = np.load(folder / LABELS_FILE, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise EvalsuiteError(f"feature cache {folder} is unreadable ({exc}); remove it with "
                                 f"`evalsuite cache rm {key}` and rerun") from None
        if features.dtype != CACHE_DTYPE or len(features) != len(labels):
            raise EvalsuiteError(f"feature cache {folder} has features {features.dtype}{features.shape} for "
                                 f"{len(labels)} labels; remove it with `evalsuite cache rm {key}` and rerun")
        check_opened(features, manifest, folder)
        return features, labels

    def attach(self, key: str) -> CacheWriter:
        """A writer on a cache another process (rank 0) has started."""
        return CacheWriter(self.folder(key), self.manifest(key))

    def start_or_resume(self, key: str, shape: tuple, labels: np.ndarray, fields: dict, chunk_rows: int,
                        versions: dict, layout: "CacheLayout | None" = None) -> CacheWriter:
        """A writer for the key: resumed when an unfinished cache of the same shape and chunking exists.

        `layout` (slide caches): chunk bounds other than every `chunk_rows` rows, manifest entries and
        arrays saved beside the features (e.g. each tile's slide coordinates)."""
        folder = self.folder(key)
        existing = self.manifest(key)
        layout = layout or CacheLayout()
        bounds = layout.bounds or chunk_bounds(shape[0], chunk_rows)
        if existing and existing["shape"] == list(shape) and existing["chunk_rows"] == chunk_rows \
                and [[c["start"], c["stop"]] for c in existing["chunks"]] == [list(b) for b in bounds] \
                and (folder / FEATURES_FILE).is_file():
            writer = CacheWriter(folder, existing)
            self._forget_corrupt_chunks(writer)
            return writer
        labels = np.asarray(labels)
        if not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.floating)):
            raise TypeError(f"labels must be integers (class ids, masks) or floats (regression targets), got "
                            f"{labels.dtype}")
        shutil.rmtree(folder, ignore_errors=True)
        try:
            with fs_errors("create feature cache", folder):
                return self._start(folder, key, shape, labels, fields, chunk_rows, versions, bounds, layout)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # a cache that never started holds nothing to resume
            raise

    @staticmethod
    def _start(folder: Path, key: str, shape: tuple, labels: np.ndarray, fields: dict, chunk_rows: int,
               versions: dict, bounds: list, layout: "CacheLayout") -> CacheWriter:
        folder.mkdir(parents=True)
        for name, array in layout.arrays.items():
            np.save(folder / f"{name}.npy", array)
        features = np.lib.format.open_memmap(folder / FEATURES_FILE, mode="w+", dtype=CACHE_DTYPE, shape=tuple(shape))
        data_offset_bytes = int(features.offset)
        del features  # the file now has its header and full (sparse) size; chunks are written with pwrite
        np.save(folder / LABELS_FILE, labels)
        manifest = {
            "manifest_version": MANIFEST_VERSION, "key": key, "fields": fields, "shape": list(shape),
            "dtype": np.dtype(CACHE_DTYPE).name, "chunk_rows": chunk_rows, "data_offset_bytes": data_offset_bytes,
            "labels_sha256": hashlib.sha256((folder / LABELS_FILE).read_bytes()).hexdigest(),
            "chunks": [{"start": int(a), "stop": int(b), "done": False} for a, b in bounds],
            "complete": False, "versions": versions, **layout.manifest,
        }
        write_json_atomic(folder / MANIFEST_FILE, manifest)
        return CacheWriter(folder, manifest)

    def _forget_corrupt_chunks(self, writer: CacheWriter) -> None:
        """A chunk whose bytes no longer match its checksum is extracted again."""
        for index in corrupt_chunks(writer.folder, writer.manifest):
            writer.manifest["chunks"][index]["done"] = False

    def keys(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def size_bytes(self, key: str) -> int:
        return sum(p.stat().st_blocks * 512 for p in self.folder(key).iterdir() if p.is_file())

    def remove(self, key: str) -> None:
        with self.lock(key), fs_errors("remove", self.folder(key)):
            shutil.rmtree(self.folder(key))


def _pwrite_durably(path: Path, payload: memoryview, offset: int) -> None:
    descriptor = os.open(path, os.O_WRONLY)
    try:
        written = 0
        while written < len(payload):
            written += os.pwrite(descriptor, payload[written:], offset + written)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
