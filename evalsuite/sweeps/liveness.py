"""Whether the process named by a cell's `running` record is still running that cell.

On the host that wrote the record the answer is certain. The local runner holds an flock on the cell's lock file
(`cells/<cell>.lock`) while it runs the cell, and the kernel drops it when the process ends, however it ends
(kill -9, the OOM killer). Where the file system has no flock (Lustre without `-o flock`), the record's pid and
that process's start time decide: a pid the kernel gave to another process since has another start time
(/proc/PID/stat, field 22). A record made before the host restarted (another /proc boot id) is dead.

A process on another host cannot be seen from here (nor its flock: an NFS mount with `nolock` keeps locks local).
Its record expires with its Slurm job when it has one (sweeps/status.py); otherwise `sweep run --reclaim HOST`
gives it up.
"""

import calendar
import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

# A lock probe (`sweep status`) holds the lock for microseconds: a runner retries this long before it concludes
# that another runner holds the cell.
_LOCK_RETRY_S, _LOCK_STEP_S = 1.0, 0.05
# The record's time has whole seconds: a process that started more than this after it cannot have written it.
_CLOCK_SLACK_S = 2
_NO_FLOCK = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK)


class CellHeld(Exception):
    """Another live process holds the cell's lock: it runs the cell now."""


def identity() -> dict:
    """What a record says about the process writing it, for `runner_gone` to recognise it later."""
    return {"pid": os.getpid(), "pid_start_ticks": start_ticks(os.getpid()), "boot_id": boot_id()}


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (/proc/PID/stat field 22); None when it is gone."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    # Field 2, the command name, is in parentheses and may hold spaces or ')': count from the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[22 - 3])


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


@contextlib.contextmanager
def hold(lock_path: Path):
    """Hold the cell's lock for the block; yields True, or False where the file system has no flock (the record's
    pid and start time then stand in). Raises CellHeld when another process holds it."""
    with open(lock_path, "a") as handle:
        locked = _lock(handle)
        try:
            yield locked
        finally:
            if locked:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _lock(handle) -> bool:
    deadline = time.monotonic() + _LOCK_RETRY_S
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise CellHeld() from None
            time.sleep(_LOCK_STEP_S)
        except OSError as exc:
            if exc.errno in _NO_FLOCK:
                return False
            raise


def lock_held(lock_path: Path) -> bool | None:
    """True: a process holds the lock; False: none does; None: this file system cannot tell."""
    try:
        descriptor = os.open(lock_path, os.O_RDONLY)  # read-only: `sweep status` writes nothing
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(descriptor)


def runner_gone(record: dict, lock_path: Path) -> str | None:
    """Why the process of a `running` record written on this host no longer runs the cell, or None when it does."""
    pid = record.get("pid")
    ended = f"the process that ran it ({f'pid {pid}' if pid is not None else 'its record names no pid'}) ended " \
            "without a result"
    if record.get("boot_id") and boot_id() and record["boot_id"] != boot_id():
        return f"{ended}: the host restarted since"
    if record.get("locked"):
        held = lock_held(lock_path)
        if held is not None:
            return None if held else ended
    try:
        ticks = start_ticks(int(pid))
    except (TypeError, ValueError):
        return ended
    if ticks is None:
        return None if _alive_without_proc(int(pid)) else ended
    return f"{ended}: pid {pid} is now another process" if _reused(record, ticks) else None


def _alive_without_proc(pid: int) -> bool:
    """Whether `pid` exists, where there is no /proc to read its start time from (macOS)."""
    if Path("/proc/self/stat").exists():
        return False  # /proc is there and has no such pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists under another user
    return True


def _reused(record: dict, ticks: int) -> bool:
    if record.get("pid_start_ticks") is not None:
        return int(record["pid_start_ticks"]) != ticks
    # A record from before start times were kept: the process must have started before it wrote the record.
    try:
        written_s = calendar.timegm(time.strptime(record["updated_utc"], "%Y-%m-%dT%H:%M:%SZ"))
    except (KeyError, TypeError, ValueError):
        return False
    return _started_s(ticks) > written_s + _CLOCK_SLACK_S


def _started_s(ticks: int) -> float:
    """The epoch time a process started, from its start ticks and the boot time in /proc/stat."""
    try:
        boot_s = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                      if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return 0.0
    return boot_s + ticks / os.sysconf("SC_CLK_TCK")
