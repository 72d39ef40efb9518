"""Rows of a .npy file read on demand with positioned reads: the process holds only what it asked for.

This is how memory-mapped (`--cache memmap`) caches, dense masks and PanNuke's arrays are read.
Why not index a numpy memory map: every page a read touches stays mapped into the process,
and Linux 6.18 maps a whole large page-cache folio (up to 2 MiB) on the fault of one row. On
this project's CI host a linear-probe fit reading 128 scattered 8 KiB rows at a time from a
328 MB memory map raised peak RSS by 185 MB, even though each read's pages were given back
with madvise right after it. A positioned read copies the wanted bytes and maps nothing; the
file's pages stay in the page cache, which the kernel reclaims under pressure and which is not
counted as the process's RSS.
"""

import os
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.fsio import fs_errors

MERGE_GAP_BYTES = 64 * 1024  # wanted rows closer than this are read in one call, the gap discarded
SPAN_BYTES = 4 * 1024**2  # one call reads at most this much beyond the wanted rows' own bytes


class NpyRows:
    """Array-like rows of a C-ordered .npy file: `len`, `shape`, `dtype`, and `rows[index]`
    for an int, a slice or an index array, each returning a new in-memory array."""

    def __init__(self, path: Path):
        self.path = Path(path)
        header = np.load(self.path, mmap_mode="r")
        self.shape, self.dtype, self.ndim = header.shape, header.dtype, header.ndim
        self._data_offset = header.offset
        self._fortran = header.ndim > 1 and header.flags.f_contiguous and not header.flags.c_contiguous
        del header
        self._row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self._merge_gap_rows = max(1, MERGE_GAP_BYTES // max(self._row_bytes, 1))
        self._span_rows = max(1, SPAN_BYTES // max(self._row_bytes, 1))
        self._fd = None

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index):
        if self._fortran:  # rows are not contiguous on disk; rare for .npy, so copy out of a map
            return np.array(np.load(self.path, mmap_mode="r")[index])
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._read_run(start, max(start, stop))
            index = np.arange(start, stop, step)
        if np.ndim(index) == 0:
            return self._read_run(*self._bounds(int(index), int(index) + 1))[0]
        wanted = np.asarray(index)
        if wanted.dtype == bool:
            wanted = np.flatnonzero(wanted)
        wanted = self._in_range(wanted.astype(np.int64, copy=False))
        unique, inverse = np.unique(wanted, return_inverse=True)
        rows = self._read_sorted(unique)
        return rows if len(unique) == len(wanted) and np.array_equal(unique, wanted) else rows[inverse]

    # Forked DataLoader workers share the descriptor (positioned reads keep no file offset);
    # a spawned or pickled copy opens its own.
    def __getstate__(self):
        return {**self.__dict__, "_fd": None}

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)

    def _bounds(self, start: int, stop: int) -> tuple[int, int]:
        if start < 0:
            start, stop = start + len(self), stop + len(self)
        if not 0 <= start < len(self):
            raise IndexError(f"row {start} is out of range for {self.path} with {len(self)} rows")
        return start, stop

    def _in_range(self, wanted: np.ndarray) -> np.ndarray:
        wanted = np.where(wanted < 0, wanted + len(self), wanted)
        if len(wanted) and (wanted.min() < 0 or wanted.max() >= len(self)):
            raise IndexError(f"row index out of range for {self.path} with {len(self)} rows")
        return wanted

    def _read_sorted(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), *self.shape[1:]), self.dtype)
        if len(rows) == 0:
            return out
        # A new call where the gap to the previous wanted row is wide or a span would grow too long.
        breaks = np.flatnonzero((np.diff(rows) > self._merge_gap_rows)
                                | (np.diff(rows // self._span_rows) != 0)) + 1
        for first, stop in zip([0, *breaks], [*breaks, len(rows)]):
            low, high = int(rows[first]), int(rows[stop - 1]) + 1
            if high - low == stop - first:  # consecutive rows: straight into the output
                self._read_into(out[first:stop], low)
            else:
                out[first:stop] = self._read_run(low, high)[rows[first:stop] - low]
        return out

    def _read_run(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((max(0, min(stop, len(self)) - start), *self.shape[1:]), self.dtype)
        self._read_into(out, start)
        return out

    def _read_into(self, out: np.ndarray, first_row: int) -> None:
        if out.nbytes == 0:
            return
        if self._fd is None:
            with fs_errors("read", self.path):
                self._fd = os.open(self.path, os.O_RDONLY)
        view = memoryview(out.reshape(-1).view(np.uint8))
        offset = self._data_offset + first_row * self._row_bytes
        with fs_errors("read", self.path):
            while len(view):
                done = os.preadv(self._fd, [view], offset)
                if done == 0:
                    raise EvalsuiteError(f"{self.path} ends before row {first_row + len(out)} of {len(self)} "
                                         "(truncated); remove the cache with 'evalsuite cache rm' and rerun")
                view, offset = view[done:], offset + done
