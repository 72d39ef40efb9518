"""A finished download against its published size and hashes, read once: md5, sha256, or git's blob id (a hub file
kept in git). A file that does not match is moved aside (`.bad`) before anything is unpacked."""

import hashlib
import os
from pathlib import Path

from evalsuite.downloads.model import Remote
from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.progress import Progress

CHUNK_BYTES = 1 << 20
MIB = 1 << 20


def _hashers(remote: Remote, size: int) -> dict:
    hashers = {}
    if remote.md5:
        hashers["md5"] = hashlib.md5(usedforsecurity=False)
    if remote.sha256:
        hashers["sha256"] = hashlib.sha256()
    if remote.git_sha1:
        hashers["git blob id"] = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    return hashers


def digests(path: Path, remote: Remote) -> dict:
    """{name: hex digest} of the hashes `remote` publishes, from one read of `path`."""
    size = path.stat().st_size
    hashers = _hashers(remote, size)
    if not hashers:
        return {}
    with open(path, "rb") as handle, Progress(f"checksum {path.name}", -(-size // MIB) or 1, unit="MiB") as progress:
        done = 0
        while block := handle.read(CHUNK_BYTES):
            for hasher in hashers.values():
                hasher.update(block)
            done += len(block)
            progress.update(done // MIB if done < size else -(-size // MIB))
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


def verify(path: Path, remote: Remote, url: str) -> str:
    """What was checked ("size and sha256"), or "" when nothing is published; a mismatch moves `path` aside and is
    one error line naming the URL, both values and what to do."""
    checked = []
    if remote.size is not None:
        found = path.stat().st_size
        if found != remote.size:
            _mismatch(path, url, "size", f"{found:,} bytes", f"{remote.size:,} bytes")
        checked.append("size")
    expected = {"md5": remote.md5, "sha256": remote.sha256, "git blob id": remote.git_sha1}
    for name, found in digests(path, remote).items():
        if found != expected[name].lower():
            _mismatch(path, url, name, found, expected[name])
        checked.append(name)
    return " and ".join(checked)


def move_aside(path: Path) -> Path:
    bad = path.with_name(path.name + ".bad")
    os.replace(path, bad)
    return bad


def _mismatch(path: Path, url: str, what: str, found: str, expected: str) -> None:
    bad = move_aside(path)
    raise EvalsuiteError(f"checksum mismatch for {url}: its {what} is {found}, the published {what} is {expected}; "
                         f"nothing was unpacked and the file was moved aside to {bad}: rerun to download it again "
                         "(if it fails again, the source changed or a mirror or proxy serves another file)")
