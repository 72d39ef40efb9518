"""File-system faults as one-line user errors, and files that appear whole or not at all.

A full disk, a read-only mount, a permission problem or a file where a folder should be is
the user's environment, not a bug: each write site wraps its OSError with `fs_errors`, which
names the path and what to do (one fix per errno). `staged` writes beside the target and
renames, removing its temp file on every exit path, so a fault leaves no debris.
"""

import contextlib
import errno
import fcntl
import os
import re
import sys
from pathlib import Path

from evalsuite.errors import EvalsuiteError

_MORE_ROOM = "free space there or pass an --out folder on a disk with room"
_MOVE_ASIDE = "move it aside or pass another --out"
# errno -> (what went wrong, what to do)
_EXPLAINED = {
    errno.ENOSPC: ("no space left on the device", _MORE_ROOM),
    errno.EDQUOT: ("disk quota exceeded", _MORE_ROOM),
    errno.EROFS: ("read-only file system", "pass an --out folder on a writable file system"),
    errno.EACCES: ("permission denied", "make it writable for this user or pass another --out"),
    errno.EPERM: ("operation not permitted (for root: an immutable or append-only file, see lsattr)",
                  "make it writable for this user or pass another --out"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "move that file aside or pass another --out"),
    errno.EEXIST: ("a file is in the way of a folder", _MOVE_ASIDE),
    errno.EISDIR: ("it is a folder, not a file", _MOVE_ASIDE),
    errno.ENAMETOOLONG: ("the path or one of its names is too long", "pass a shorter path"),
}
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 4096  # Linux's limits (ext4, xfs, NFS, Lustre): one name, a whole path
# A read refused for permissions needs read access, not a writable --out.
_READ_FIXES = {
    errno.EACCES: "make it readable for this user (chmod u+r) or run as its owner",
    errno.EPERM: "make it readable for this user (chmod u+r) or run as its owner",
}


def fs_error(action: str, path, exc: OSError, flag: str = "--out") -> EvalsuiteError:
    """`cannot ACTION PATH: what went wrong; what to do`; `flag`: the option that named the path."""
    reason, fix = _EXPLAINED.get(exc.errno, (exc.strerror or str(exc), "check the file system holding --out"))
    if action.startswith("read"):
        fix = _READ_FIXES.get(exc.errno, fix)
    if flag != "--out":  # e.g. --plot: pointing at --out would send the user to the wrong option
        fix = fix.replace("an --out folder", f"a {flag} path").replace("--out", flag)
    return EvalsuiteError(f"cannot {action} {path}: {reason}; {fix}")


@contextlib.contextmanager
def fs_errors(action: str, path, flag: str = "--out"):
    """Turn an OSError raised in the block into a one-line EvalsuiteError about `path`."""
    try:
        yield
    except OSError as exc:
        raise fs_error(action, path, exc, flag) from None


@contextlib.contextmanager
def staged(path: Path, action: str | None = None):
    """A temp name beside `path` for the block to fill; renamed onto `path` when the block succeeds.

    The temp file is removed however the block ends, so an error (a full disk, an exception, a
    signal) leaves neither a half-written target nor a temp file. With `action`, a failing rename
    is the one-line `cannot ACTION PATH` error."""
    staging = staging_name(path)
    try:
        yield staging
        with fs_errors(action, path) if action else contextlib.nullcontext():
            os.replace(staging, path)
    finally:
        # Best effort: on a file system that turned read-only the unlink fails too, and its EROFS must not replace
        # the one-line error being raised (a later run removes the temp file, results.commit).
        with contextlib.suppress(OSError):
            discard(staging)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, durably: temp file, fsync, rename, fsync of the folder. Readers see the old
    file or the new one; a failure leaves the old one and no temp file."""
    with staged(path) as staging:
        write_durably(staging, data)
    fsync_dir(path.parent)


@contextlib.contextmanager
def exclusive_lock(path: Path, action: str | None = None, announce_wait: bool = False):
    """An flock on `path` (created if missing) held for the block; with `action`, failing to open the lock file
    is the one-line `cannot ACTION PATH` error. A separate lock file, because the files it guards may be
    replaced by a rename while it is held. `announce_wait`: a process that has to wait says so on stderr (a
    silent wait for another run's extraction looks like a hang)."""
    with fs_errors(action, path) if action else contextlib.nullcontext():
        handle = open(path, "a")
    with handle:
        _flock(handle, path, fcntl.LOCK_EX | fcntl.LOCK_NB, announce_wait)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _flock(handle, path: Path, operation: int, announce_wait: bool) -> None:
    try:
        fcntl.flock(handle.fileno(), operation)
        return
    except BlockingIOError:
        if announce_wait:
            print(f"evalsuite: waiting for the lock {path}, held by another evalsuite process (a run or "
                  "`cache rm` on the same cache)", file=sys.stderr, flush=True)
    except OSError as exc:
        raise _lock_error(path, exc) from None
    try:
        fcntl.flock(handle.fileno(), operation & ~fcntl.LOCK_NB)
    except OSError as exc:
        raise _lock_error(path, exc) from None


def _lock_error(path: Path, exc: OSError) -> EvalsuiteError:
    # Lustre mounted without `-o flock` (and some FUSE and old NFS mounts) answer flock with ENOSYS or EOPNOTSUPP.
    if exc.errno not in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
        return fs_error("lock", path, exc)
    fs_type, mount_point = file_system_of(path)
    return EvalsuiteError(f"cannot lock {path}: the {fs_type} file system mounted at {mount_point} does not support "
                          f"flock ({exc.strerror}); mount it with the flock option (Lustre: `-o flock`, ask the "
                          "cluster's admins) or pass an --out on a file system with locks (e.g. node-local scratch)")


def file_system_of(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> tuple[str, str]:
    """(type, mount point) of the mount holding `path`, from the longest mount point that prefixes it."""
    target = os.path.realpath(path)
    best = ("unknown", "/")
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        fields, _, rest = line.partition(" - ")
        mount_point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields.split()[4])  # \040: a space
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best[1]) and rest:
            best = (rest.split()[0], mount_point)
    return best


def staging_name(path: Path) -> Path:
    """The temp file beside `path` that this process fills before renaming it onto `path`."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def discard(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def write_durably(path: Path, data: bytes) -> None:
    """Write `data` to a new file and fsync it (its bytes are on disk before it is renamed into place)."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def check_path_length(path, flag: str, room_bytes: int = 0) -> None:
    """One line for a path the kernel would refuse with ENAMETOOLONG, before any stat() of it raises; `room_bytes`
    are kept for the names a folder's files add (cache keys, run ids, temp suffixes)."""
    encoded = os.fsencode(os.path.abspath(path))
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_MAX_BYTES:
        name = os.fsdecode(longest)
        raise EvalsuiteError(f"{flag} {_shortened(str(path))}: the name '{name[:24]}...' is {len(longest)} bytes, over "
                             f"the file system's {NAME_MAX_BYTES} (NAME_MAX); pass a shorter {flag}")
    limit = PATH_MAX_BYTES - 1 - room_bytes
    if len(encoded) > limit:
        room = f", less {room_bytes} for the files under it" if room_bytes else ""
        raise EvalsuiteError(f"{flag} {_shortened(str(path))}: the path is {len(encoded)} bytes, over the "
                             f"{limit} allowed (PATH_MAX {PATH_MAX_BYTES - 1}{room}); pass a shorter {flag}")


def _shortened(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else f"{text[:keep]}..."


def check_out_folder(out: Path, subfolders=("cache", "runs")) -> None:
    """--out is a folder, or can be created, and this process can write in it: checked before any work.

    Nothing is created: a run refused later for another reason leaves no empty --out behind."""
    out = Path(out)
    _check_links_lead_somewhere(out)
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "it" if existing == out else f"{existing}"
        raise EvalsuiteError(f"--out {out} is not a folder: {where} is a file; pass a folder (it is created if missing)")
    if existing != out:
        _check_writable(existing, f"create --out {out} in")
        return
    _check_writable(out, "write in")
    for name in subfolders:
        sub = out / name
        if sub.exists() and not sub.is_dir():
            raise EvalsuiteError(f"{sub} is a file, not a folder; {_MOVE_ASIDE}")
        if sub.is_dir():
            _check_writable(sub, "write in")


def _check_links_lead_somewhere(out: Path) -> None:
    """A symlink in --out's path that loops or points at nothing: exists() calls both missing, and the first
    folder created under it failed as "a file in the way" (or a loop as an internal error)."""
    for path in (out, *out.parents):
        if not path.is_symlink() or path.exists():
            continue
        where = "it" if path == out else str(path)
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise EvalsuiteError(f"--out {out}: {where} is a symlink loop (-> {os.readlink(path)}, which never "
                                     "reaches a folder); point the link at a folder or pass another --out") from None
        target = os.path.abspath(path.parent / os.readlink(path))
        raise EvalsuiteError(f"--out {out}: {where} is a symlink to a missing folder ({target}); create that folder "
                             "(mkdir -p) or pass another --out")


def check_file_destination(path: Path, flag: str) -> None:
    """The folder `path` goes into exists and takes files, or can be created: checked before other files are
    written. Nothing is created."""
    if Path(path).is_dir():  # else found only by the final rename onto it, after all the work
        raise EvalsuiteError(f"{flag} {path} is a folder, not a file; pass the path of a file to write (in that folder "
                             "or elsewhere)")
    existing = Path(path).parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise EvalsuiteError(f"{flag} {path}: {existing} is a file, not a folder; pass another {flag}")
    _check_writable(existing, "write in", flag)


def _check_writable(folder: Path, action: str, flag: str = "--out") -> None:
    # Creating a file is the only test that sees ACLs, root squash and read-only mounts alike.
    probe = folder / f".evalsuite-write-check-{os.getpid()}"
    with fs_errors(action, folder, flag):
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
