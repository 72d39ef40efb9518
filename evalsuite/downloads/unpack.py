"""Unpack a verified download into --data-root without ever leaving half an archive there.

Members are written into a temporary folder beside the target (`.evalsuite-unpack-*`, on the same file system), then
renamed into place; a folder that is already there is merged into, a file that is already there is refused before
anything moves. Unsafe members are refused (an absolute path, a drive letter, a `..` step); links, devices and
macOS metadata (`__MACOSX/`, `._*`, `.DS_Store`) are never unpacked. A damaged archive (a zip CRC-32, a gzip stream
ending early) is moved aside like a checksum mismatch, so the next run downloads it again.
"""

import gzip
import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

from evalsuite.downloads.checksums import move_aside
from evalsuite.downloads.model import Remote
from evalsuite.downloads.transfer import DISK_FULL, check_space, note
from evalsuite.errors import EvalsuiteError

TEMP_PREFIX = ".evalsuite-unpack-"
CHUNK_BYTES = 1 << 20
JUNK_FOLDERS = {"__MACOSX"}
DAMAGED = (zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error)


def safe_parts(name: str, where) -> tuple | None:
    """The path components of an archive member (or a hub file) named `name`; None for macOS metadata."""
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]
    if name.startswith(("/", "\\")) or ".." in parts or (parts and re.match(r"^[A-Za-z]:", parts[0])):
        raise EvalsuiteError(f"{where} holds the entry {name!r}, which points outside the folder it unpacks into; "
                             "refusing to unpack it")
    if not parts or parts[0] in JUNK_FOLDERS or parts[-1].startswith("._") or parts[-1] == ".DS_Store":
        return None
    return tuple(parts)


def place(archive: Path, remote: Remote, data_root: Path, record) -> list:
    """Put the verified download `archive` where `remote` says under `data_root`; `record(paths)` is called with the
    paths about to be renamed into place, before the first rename. Returns them (relative to data_root)."""
    if remote.unpack == "file":
        dest = data_root.joinpath(*safe_parts(remote.target, remote.url))
        _refuse_existing([dest], archive)
        dest.parent.mkdir(parents=True, exist_ok=True)
        record([dest.relative_to(data_root).as_posix()])
        os.replace(archive, dest)
        return [dest.relative_to(data_root).as_posix()]
    target = data_root.joinpath(*(safe_parts(remote.target, remote.url) or ()))
    folder = target.parent if remote.unpack == "gz" else target
    folder.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder))
    try:
        try:
            _UNPACKERS[remote.unpack](archive, temp, remote, target)
        except DAMAGED as exc:
            bad = move_aside(archive)
            raise EvalsuiteError(f"{archive.name} from {remote.url} is damaged ({' '.join(str(exc).split())}); "
                                 f"nothing was unpacked and it was moved aside to {bad}: rerun to download it again"
                                 ) from None
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            raise EvalsuiteError(f"disk full unpacking {archive} into {folder}: free space there or give another "
                                 "--data-root; nothing was left half-unpacked and the same command unpacks again"
                                 ) from None
        moves = _planned_moves(temp, folder, archive)
        placed = [dst.relative_to(data_root).as_posix() for _, dst in moves]
        record(placed)
        for src, dst in moves:
            os.replace(src, dst)
        return placed
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def leftover_temps(data_root: Path) -> list:
    """Temporary folders an interrupted unpack left (this module names them; nothing else does)."""
    return sorted(data_root.glob(TEMP_PREFIX + "*")) if data_root.is_dir() else []


def _unzip(archive: Path, temp: Path, remote: Remote, target: Path) -> None:
    with zipfile.ZipFile(archive) as bundle:
        members = [(info, safe_parts(info.filename, archive)) for info in bundle.infolist()]
        check_space(temp, sum(info.file_size for info, parts in members if parts), f"unpacking {archive.name}")
        skipped = 0
        for info, parts in members:
            if parts is None:
                continue
            path = temp.joinpath(*parts)
            if info.is_dir():
                path.mkdir(parents=True, exist_ok=True)
            elif stat.S_IFMT(info.external_attr >> 16) not in (0, stat.S_IFREG):  # a link, a device: Unix type bits
                skipped += 1
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(info) as source, open(path, "wb") as out:
                    shutil.copyfileobj(source, out, CHUNK_BYTES)
    _say_skipped(skipped, archive)


def _untar(archive: Path, temp: Path, remote: Remote, target: Path) -> None:
    skipped = 0
    with tarfile.open(archive, "r|gz") as bundle:
        for member in bundle:
            parts = safe_parts(member.name, archive)
            if parts is None:
                continue
            path = temp.joinpath(*parts)
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                path.parent.mkdir(parents=True, exist_ok=True)
                with bundle.extractfile(member) as source, open(path, "wb") as out:
                    shutil.copyfileobj(source, out, CHUNK_BYTES)
            else:
                skipped += 1
    _say_skipped(skipped, archive)


def _gunzip(archive: Path, temp: Path, remote: Remote, target: Path) -> None:
    md5 = hashlib.md5(usedforsecurity=False)
    with gzip.open(archive, "rb") as source, open(temp / target.name, "wb") as out:
        while block := source.read(CHUNK_BYTES):
            md5.update(block)
            out.write(block)
    if remote.unpacked_md5 and md5.hexdigest() != remote.unpacked_md5:
        bad = move_aside(archive)
        raise EvalsuiteError(f"checksum mismatch inside {archive.name} from {remote.url}: the md5 of {target.name} is "
                             f"{md5.hexdigest()}, the published md5 is {remote.unpacked_md5}; nothing was unpacked and "
                             f"the archive was moved aside to {bad}: rerun to download it again")


_UNPACKERS = {"zip": _unzip, "tar.gz": _untar, "gz": _gunzip}


def _say_skipped(skipped: int, archive: Path) -> None:
    if skipped:
        note(f"{archive.name}: left out {skipped} links or special files (links are never unpacked)")


def _planned_moves(source: Path, dest: Path, archive: Path) -> list:
    """(src, dst) renames that put `source`'s tree into `dest`, merging into folders already there; a file already
    there is refused before anything moves."""
    moves, clashes = [], []

    def walk(src_dir: Path, dst_dir: Path) -> None:
        for entry in sorted(src_dir.iterdir()):
            dst = dst_dir / entry.name
            if not os.path.lexists(dst):
                moves.append((entry, dst))
            elif entry.is_dir() and dst.is_dir() and not dst.is_symlink():
                walk(entry, dst)
            else:
                clashes.append(dst)

    walk(source, dest)
    _refuse_existing(clashes, archive)
    return moves


def _refuse_existing(paths: list, archive: Path) -> None:
    existing = [path for path in paths if os.path.lexists(path)]
    if existing:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise EvalsuiteError(f"{existing[0]}{more} is already there and `evalsuite download` did not put it there; "
                             f"move it away and rerun: {archive} is kept and will not be downloaded again")
