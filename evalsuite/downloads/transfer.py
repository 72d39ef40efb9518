"""Resumable HTTP(S) transfers with urllib: a `.part` file grows across tries and runs, and never restarts silently.

A partial file is resumed with `Range: bytes=N-` (and `If-Range` with the validator its first response gave). A
server that answers 200 instead of 206 does not honour ranges: the file restarts from byte 0 and a note says so. A
connection that ends early is retried `retries` times (waiting 2, 4, 8 ... s); after that the partial file stays and
the same command goes on from it. `--mirror URL` (or EVALSUITE_DOWNLOAD_MIRROR) replaces the scheme and host of every
source URL, keeping its path and query; urllib also honours the usual HTTP(S)_PROXY variables.
"""

import errno
import http.client
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.progress import Progress
from evalsuite.version import __version__

CHUNK_BYTES = 1 << 20
MIB = 1 << 20
TIMEOUT_S = 60.0
RETRY_WAIT_S = 2.0  # the first retry's wait, doubled after each, at most 60 s
MIRROR_ENV = "EVALSUITE_DOWNLOAD_MIRROR"
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
TRANSIENT_HTTP = {408, 429, 500, 502, 503, 504}


class Interrupted(Exception):
    """The transfer ended before the file did; what arrived stays in the partial file."""


def note(text: str) -> None:
    print(f"evalsuite: note: {text}", file=sys.stderr, flush=True)


def check_mirror(mirror: str | None) -> str | None:
    if not mirror:
        return None
    parts = urllib.parse.urlsplit(mirror)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise EvalsuiteError(f"mirror '{mirror}' (--mirror or {MIRROR_ENV}): expected http(s)://HOST[:PORT][/PATH], "
                             "which replaces the scheme and host of every source URL")
    return mirror


def mirrored(url: str, mirror: str | None) -> str:
    """`url` with its scheme and host replaced by the mirror's (the mirror's path, if any, goes before url's path)."""
    if not mirror:
        return url
    base, source = urllib.parse.urlsplit(mirror), urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + source.path, source.query, ""))


def open_url(url: str, headers: dict | None = None):
    request = urllib.request.Request(url, headers={"User-Agent": f"evalsuite/{__version__}", **(headers or {})})
    return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # http(s) URLs: the table's or a mirror's


def http_error(url: str, exc: urllib.error.HTTPError, page: str) -> EvalsuiteError:
    why = {401: "the server wants a login", 403: "the server refuses this client (a login, a licence click or a "
                                                 "region block)", 404: "the file is not (or no longer) there",
           410: "the file was removed"}.get(exc.code, "the server refused the request")
    return EvalsuiteError(f"{url} answered HTTP {exc.code} {exc.reason}: {why}; check {page} for where the file is "
                          "now, or point --mirror at a copy")


def fetch(url: str, dest: Path, size: int | None, retries: int, page: str) -> int:
    """Download `url` to `dest` through `dest`.part, resuming what a previous try left; returns the bytes received
    in this call. `size`: the published size, if any (a server offering another size is refused before the body)."""
    part, meta = dest.with_name(dest.name + ".part"), dest.with_name(dest.name + ".part.json")
    received, tries = [0], 0
    while True:
        try:
            if _attempt(url, part, meta, size, page, received):
                break
        except Interrupted as exc:
            have = part.stat().st_size if part.exists() else 0
            if tries >= retries:
                raise EvalsuiteError(_stopped_message(url, part, have, str(exc), tries)) from None
            tries += 1
            wait = min(RETRY_WAIT_S * 2 ** (tries - 1), 60.0)
            note(f"the transfer of {url} stopped at byte {have:,} ({exc}); trying again in {wait:g} s "
                 f"(try {tries} of {retries})")
            time.sleep(wait)
    os.replace(part, dest)
    meta.unlink(missing_ok=True)
    return received[0]


def _stopped_message(url: str, part: Path, have: int, reason: str, tries: int) -> str:
    again = f" after {tries} retries" if tries else ""
    if have == 0:
        return (f"cannot fetch {url} ({reason}){again}: check the network or the proxy (HTTPS_PROXY), or point "
                f"--mirror (or {MIRROR_ENV}) at a mirror; rerun the same command to try again")
    return (f"the transfer of {url} stopped at byte {have:,} ({reason}){again}; the partial file {part} is kept: "
            "rerun the same command to fetch the rest")


def _attempt(url: str, part: Path, meta: Path, size: int | None, page: str, received: list) -> bool:
    """One request: True when the file is complete, False when it must restart at once from byte 0."""
    have = part.stat().st_size if part.exists() else 0
    validators = _read_json(meta) if have else {}
    headers = {"Range": f"bytes={have}-"} if have else {}
    validator = validators.get("etag") if not str(validators.get("etag") or "W/").startswith("W/") else None
    if have and (validator or validators.get("last_modified")):
        headers["If-Range"] = validator or validators["last_modified"]
    try:
        response = open_url(url, headers)
    except urllib.error.HTTPError as exc:
        with exc:
            if exc.code == 416 and have:
                total = _content_range(exc.headers.get("Content-Range"))[1]
                if total == have:
                    return True
                note(f"{url} refused the range bytes={have}- (HTTP 416); {part.name} restarts from byte 0")
                _restart(part, meta)
                return False
            if exc.code in TRANSIENT_HTTP:
                raise Interrupted(f"HTTP {exc.code} {exc.reason}") from None
            raise http_error(url, exc, page) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise Interrupted(_reason(exc)) from None
    with response:
        return _receive(url, response, part, meta, have, size, page, received)


def _receive(url, response, part: Path, meta: Path, have: int, size, page: str, received: list) -> bool:
    length = response.headers.get("Content-Length")
    if have and response.status == 206:
        start, total = _content_range(response.headers.get("Content-Range"))
        if start != have:
            note(f"{url} answered the range bytes={have}- from byte {start}; {part.name} restarts from byte 0")
            _restart(part, meta)
            return False
    elif have:
        note(f"{urllib.parse.urlsplit(url).netloc} does not honour HTTP Range requests (it answered {response.status} "
             f"to bytes={have}-, or the file changed since the partial one began); {part.name} restarts from byte 0")
        have, total = 0, int(length) if length is not None else None
    else:
        total = int(length) if length is not None else None
    total = size if total is None else total  # a body without a length still has to reach the published size
    if response.headers.get_content_type() == "text/html" and not part.name.endswith((".html.part", ".htm.part")):
        raise EvalsuiteError(f"{url} answered with a web page instead of the file (a login, quota or confirmation "
                             f"page): open {page} in a browser, save the file as {part.with_suffix('')} and rerun "
                             "the same command")
    if size is not None and total is not None and total != size:
        raise EvalsuiteError(f"{url} offers {total:,} bytes but the published file has {size:,}: the source changed "
                             f"or a mirror or proxy serves another file; check {page}")
    if total is not None:
        check_space(part.parent, total - have, f"the rest of {url}")
    if have == 0:
        _write_json(meta, {"url": url, "etag": response.headers.get("ETag"),
                           "last_modified": response.headers.get("Last-Modified")})
    have = _copy_body(url, response, part, have, total, received)
    if total is not None and have < total:
        raise Interrupted(f"the connection closed after {have:,} of {total:,} bytes")
    return True


def _copy_body(url: str, response, part: Path, have: int, total, received: list) -> int:
    descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if have else os.O_TRUNC), 0o644)
    progress = Progress(f"download {part.name[:-5]}", -(-total // MIB), unit="MiB",
                        initial=have // MIB) if total else None
    try:
        while True:
            try:
                block = response.read(CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as exc:
                raise Interrupted(_reason(exc)) from None
            if not block:
                break
            _write_all(descriptor, block, part, have, total)
            have += len(block)
            received[0] += len(block)
            if progress is not None:
                progress.update(have // MIB if have < total else -(-total // MIB))
    finally:
        os.close(descriptor)
        if progress is not None and have >= total:
            progress.close(f"{have:,} bytes")
        elif progress is not None and progress.bar is not None:  # stopped early: no "done" line, the bar goes
            progress.bar.close()
    return have


def _write_all(descriptor: int, block: bytes, part: Path, have: int, total) -> None:
    view = memoryview(block)
    while view:
        try:
            view = view[os.write(descriptor, view):]
        except OSError as exc:
            if exc.errno in DISK_FULL:
                of = f" of {total:,}" if total else ""
                raise EvalsuiteError(f"disk full writing {part} ({have:,}{of} bytes written): free space on that file "
                                     "system or give another --data-root; the partial file is kept and the same "
                                     "command resumes") from None
            raise


def check_space(folder: Path, need: int | None, what: str) -> None:
    """Refuse before writing when the file system cannot hold `need` more bytes."""
    if not need:
        return
    free = shutil.disk_usage(folder).free
    if free < need:
        raise EvalsuiteError(f"not enough space for {what}: {need:,} bytes are needed in {folder} but {free:,} are "
                             "free; free space there or give another --data-root")


def _content_range(value: str | None) -> tuple:
    """(first byte, total) of `bytes first-last/total` or `bytes */total`; None where absent or unknown."""
    try:
        span, total = value.split(" ", 1)[1].split("/")
        first = None if span == "*" else int(span.split("-")[0])
        return first, None if total == "*" else int(total)
    except (AttributeError, IndexError, ValueError):
        return None, None


def _restart(part: Path, meta: Path) -> None:
    part.unlink(missing_ok=True)
    meta.unlink(missing_ok=True)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return " ".join(str(reason).split()) or type(exc).__name__


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value))
