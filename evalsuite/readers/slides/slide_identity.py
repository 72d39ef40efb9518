"""Whether two rows of a slide manifest name one slide file: by resolved path, by inode, or by size and content.

Why: one file under two slide ids, in train and in test, leaks the test slide into training, and ids alone cannot
tell (`a.svs` and `./link-to-a.svs`, a hard link, a copy). Only regular files are read, since opening a FIFO blocks,
and only those whose size another listed file shares, so a cohort costs one stat per slide and a few small reads.
"""

import hashlib
import os
import stat
from collections import Counter
from pathlib import Path

HASHED_BYTES = 64 * 1024  # from each end: a TIFF's header and first directory, and its last tiles or directories

HOW = {"path": "the same path once resolved", "inode": "a hard link",
       "content": f"a copy: same size, same first and last {HASHED_BYTES // 1024} KiB"}


def first_same_file(paths: list) -> tuple[int, int, str] | None:
    """(earlier index, later index, how) of the first path, in list order, naming a file an earlier one names;
    `how` is a phrase of HOW. None when every path names its own file."""
    stats = [_regular_stat(Path(p)) for p in paths]
    shared_sizes = {size for size, count in Counter(s.st_size for s in stats if s is not None).items() if count > 1}
    first_of = {}
    for index, (path, found) in enumerate(zip(paths, stats)):
        for key in _identity_keys(Path(path), found, shared_sizes):
            earlier = first_of.setdefault(key, index)
            if earlier != index:
                return earlier, index, HOW[key[0]]
    return None


def _regular_stat(path: Path) -> os.stat_result | None:
    """The file's stat when it is a regular file; a missing or special file is the slide reader's to report."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found if stat.S_ISREG(found.st_mode) else None


def _identity_keys(path: Path, found: os.stat_result | None, shared_sizes: set) -> list[tuple]:
    keys = [("path", str(path.resolve()))]
    if found is None:
        return keys
    keys.append(("inode", found.st_dev, found.st_ino))
    if found.st_size in shared_sizes:
        digest = _ends_sha256(path, found.st_size)
        if digest is not None:
            keys.append(("content", found.st_size, digest))
    return keys


def _ends_sha256(path: Path, size_bytes: int) -> str | None:
    try:
        with open(path, "rb") as handle:
            head = handle.read(HASHED_BYTES)
            handle.seek(max(size_bytes - HASHED_BYTES, 0))
            tail = handle.read(HASHED_BYTES)
    except OSError:
        return None  # unreadable: opening the slide says why, by name
    return hashlib.sha256(head + tail).hexdigest()
