"""One `evalsuite download` from start to finish, and what it keeps between runs.

DIR/.evalsuite-download holds the transfers (`<file>.part`, grown across runs), the verified downloads until they
are unpacked (kept with --keep-archives), and per file a `.done` record of what was placed (so a rerun skips it, and
a file whose published hash changed replaces what it placed) and, while files are being renamed into place, a
`.placing` journal (a run interrupted there removes those paths and unpacks again). A lock keeps two downloads from
writing one DIR at once.
"""

import json
import os
import shutil
from pathlib import Path

from evalsuite.downloads.checksums import verify
from evalsuite.downloads.hub import hub_files
from evalsuite.downloads.layout_check import check_layout
from evalsuite.downloads.model import Download, Remote
from evalsuite.downloads.transfer import fetch, mirrored, note
from evalsuite.downloads.unpack import leftover_temps, place, safe_parts
from evalsuite.errors import EvalsuiteError, one_line

STATE_DIR = ".evalsuite-download"
IDENTITY = ("url", "unpack", "target", "sha256", "md5", "git_sha1", "size", "unpacked_md5")


class State:
    """DIR/.evalsuite-download: partial and verified downloads, `.done` records and `.placing` journals."""

    def __init__(self, data_root: Path):
        self.data_root, self.root = data_root, data_root / STATE_DIR
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = None

    def lock(self) -> None:
        import fcntl

        handle = open(self.root / "lock", "a+")  # noqa: SIM115 - held for the whole download
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise EvalsuiteError(f"another `evalsuite download` is writing {self.data_root} (it holds "
                                 f"{self.root / 'lock'}); wait for it to finish, or give another --data-root") from None
        self._lock = handle

    def archive(self, remote: Remote) -> Path:
        return self.root.joinpath(*safe_parts(remote.filename, "the source table"))

    def _sidecar(self, remote: Remote, suffix: str) -> Path:
        path = self.archive(remote)
        return path.with_name(path.name + suffix)

    def status(self, remote: Remote) -> str:
        """done (placed by an earlier run and still there), stale (placed, but since removed in part, or the table now
        publishes another file) or new."""
        record = _read_json(self._sidecar(remote, ".done"))
        if record is None:
            return "new"
        placed = [self.data_root.joinpath(*safe_parts(path, self.root)) for path in record.get("placed", [])]
        same = record.get("identity") == _identity(remote) and all(map(os.path.lexists, placed))
        return "done" if same else "stale"

    def forget(self, remote: Remote) -> None:
        """Remove what an earlier run placed for `remote` (its `.done` record names it), then the record."""
        record = _read_json(self._sidecar(remote, ".done")) or {}
        self._remove(record.get("placed", []))
        self._sidecar(remote, ".done").unlink(missing_ok=True)

    def recover(self, remote: Remote) -> None:
        """A run stopped while renaming `remote`'s files into place: remove those it had placed, to place them again."""
        journal = self._sidecar(remote, ".placing")
        paths = (_read_json(journal) or {}).get("placed", [])
        if paths:
            note(f"an earlier run stopped while putting {remote.filename} in place; unpacking it again")
        self._remove(paths)
        journal.unlink(missing_ok=True)

    def placing(self, remote: Remote, paths: list) -> None:
        _write_json(self._sidecar(remote, ".placing"), {"placed": paths})

    def mark_done(self, remote: Remote, paths: list) -> None:
        _write_json(self._sidecar(remote, ".done"), {"identity": _identity(remote), "placed": paths})
        self._sidecar(remote, ".placing").unlink(missing_ok=True)

    def _remove(self, paths: list) -> None:
        for relative in paths:
            path = self.data_root.joinpath(*safe_parts(relative, self.root))
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


def download(card, source: Download, data_root: Path, mirror: str | None = None, retries: int = 3,
             keep_archives: bool = False, check_counts: bool = True) -> dict:
    """Fetch, check, unpack and place every file of `source` under `data_root`, then run the card's reader on it;
    returns the split sizes it found."""
    print(f"task      {card.name}: {source.title}, {source.size}")
    print(f"licence   {source.licence}; page {source.page}")
    files = list(source.files)
    if source.hub is not None:
        commit, files = hub_files(source.hub, mirror, source.page)
        total = sum(remote.size or 0 for remote in files)
        print(f"hub       {source.hub.repo} {source.hub.folder} at commit {commit}: {len(files)} files, "
              f"{total:,} bytes")
    data_root.mkdir(parents=True, exist_ok=True)
    state = State(data_root)
    state.lock()
    for temp in leftover_temps(data_root):
        shutil.rmtree(temp, ignore_errors=True)
    had = [remote.filename for remote in files if not _one_file(state, remote, source, mirror, retries, keep_archives)]
    if had:
        print(f"have      {len(had)} file{'s' if len(had) > 1 else ''} unpacked by an earlier run"
              + (f" ({had[0]})" if len(had) == 1 else ""))
    found = check_layout(card, data_root, source.expected_counts, check_counts)
    counts = ", ".join(f"{name} {count:,}" for name, count in found.items())
    how = ("counts not checked" if not check_counts else "the reader's official counts"
           if source.expected_counts is None else "the counts the source table names")
    print(f"ready     {card.name} under {data_root}: {counts} ({how})")
    print(f"next      evalsuite run --task {card.name} --data-root {data_root}")
    return found


def _one_file(state: State, remote: Remote, source: Download, mirror, retries: int, keep_archives: bool) -> bool:
    """False when an earlier run put `remote` in place (and it still is); else fetch, check and place it."""
    status = state.status(remote)
    if status == "done":
        return False
    if status == "stale":
        note(f"what an earlier run placed for {remote.filename} is gone in part, or the published file changed; "
             "placing it again")
        state.forget(remote)
    state.recover(remote)
    archive, url = state.archive(remote), mirrored(remote.url, mirror)
    archive.parent.mkdir(parents=True, exist_ok=True)
    try:
        if archive.exists():
            print(f"found     {archive} (downloaded before)")
        else:
            size = f" ({remote.size:,} bytes)" if remote.size is not None else ""
            print(f"get       {url}{size}")
            fetch(url, archive, remote.size, retries, source.page)
        checked = verify(archive, remote, url) + (f", md5 of {Path(remote.target).name}" if remote.unpacked_md5 else "")
        placed = place(archive, remote, state.data_root, lambda paths: state.placing(remote, paths))
    except EvalsuiteError as exc:
        if not remote.optional:
            raise
        note(f"left out the optional {remote.filename} ({one_line(exc)}); the task runs without it")
        return True
    state.mark_done(remote, placed)
    if archive.exists() and not keep_archives:
        archive.unlink()
    if not checked:
        note(f"{remote.filename}: no checksum or size is published for it ({remote.facts}); the archive's own "
             "CRCs and the reader's count check are what checks it")
    shown = ", ".join(placed[:2]) + (f" and {len(placed) - 2} more" if len(placed) > 2 else "")
    print(f"placed    {remote.filename} -> {shown}" + (f" ({checked} as published)" if checked else ""))
    return True


def _identity(remote: Remote) -> dict:
    """What makes a placed file the published one: its hashes where it has any (a hub file's URL names the commit,
    which moves on when other files change), else its URL."""
    hashed = any((remote.sha256, remote.md5, remote.git_sha1))
    return {name: getattr(remote, name) for name in IDENTITY if not (hashed and name == "url")}


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: dict) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(value, indent=1))
    temp.replace(path)
