"""A Hugging Face dataset folder as published files: the hub's own listing gives each file's size and hash.

The revision (e.g. main) is first resolved to its commit, so every file of one download comes from the same commit,
which the command prints. LFS files are checked by the sha256 the listing names (its `lfs.oid`), files kept in git by
their git blob id (`oid`). No token is sent: a folder behind the hub's access conditions answers 401 or 403, and the
error says how to fetch it yourself.
"""

import json
import re
import urllib.error
import urllib.parse

from evalsuite.downloads.model import HubFolder, Remote
from evalsuite.downloads.transfer import http_error, mirrored, open_url
from evalsuite.downloads.unpack import safe_parts
from evalsuite.errors import EvalsuiteError

MAX_PAGES = 100


def hub_files(hub: HubFolder, mirror: str | None, page: str) -> tuple:
    """(commit, [Remote]) of the files under `hub.folder` matching `hub.include`, in the listing's order."""
    quoted = urllib.parse.quote(hub.revision, safe="")
    answer = _get_page(f"{hub.host}/api/datasets/{hub.repo}/revision/{quoted}", hub, mirror, page)[0]
    commit = answer.get("sha") if isinstance(answer, dict) else None
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise EvalsuiteError(f"the hub's answer for {hub.repo}@{hub.revision} names no commit; check {page}")
    url = f"{hub.host}/api/datasets/{hub.repo}/tree/{commit}/{urllib.parse.quote(hub.folder)}?recursive=true"
    entries = []
    for _ in range(MAX_PAGES):
        listing, next_url = _get_page(url, hub, mirror, page)
        if not isinstance(listing, list):
            raise EvalsuiteError(f"the hub's listing of {hub.repo}/{hub.folder} is not a list of files; check {page}")
        entries += listing
        if next_url is None:
            break
        url = next_url
    files = [_remote(entry, hub, commit) for entry in entries if _wanted(entry, hub)]
    if not files:
        raise EvalsuiteError(f"the hub lists no files under {hub.repo}/{hub.folder} at {commit[:12]} matching "
                             f"{', '.join(hub.include)}; check {page}")
    return commit, files


def _wanted(entry: dict, hub: HubFolder) -> bool:
    if not isinstance(entry, dict) or entry.get("type") != "file" or not isinstance(entry.get("path"), str):
        return False
    prefix = hub.folder.rstrip("/") + "/"
    if not entry["path"].startswith(prefix):
        return False
    relative = entry["path"][len(prefix):]
    return not hub.include or any(relative == rule or (rule.endswith("/") and relative.startswith(rule))
                                  for rule in hub.include)


def _remote(entry: dict, hub: HubFolder, commit: str) -> Remote:
    relative = entry["path"][len(hub.folder.rstrip("/")) + 1:]
    safe_parts(relative, f"the hub listing of {hub.repo}")  # no `..` or absolute path may come from a listing
    lfs = entry.get("lfs") if isinstance(entry.get("lfs"), dict) else None
    facts = f"size and {'sha256' if lfs else 'git blob id'} from the hub's listing of {hub.repo} at {commit[:12]}"
    url = f"{hub.host}/datasets/{hub.repo}/resolve/{commit}/{urllib.parse.quote(entry['path'])}"
    try:
        if lfs:
            return Remote(url, relative, target=relative, sha256=str(lfs["oid"]), size=int(lfs["size"]), facts=facts)
        return Remote(url, relative, target=relative, git_sha1=str(entry["oid"]), size=int(entry["size"]),
                      facts=facts)
    except (KeyError, TypeError, ValueError):
        raise EvalsuiteError(f"the hub's listing of {hub.repo} gives no size or hash for {entry['path']}; "
                             "rerun later, or fetch the folder with huggingface-cli") from None


def _get_page(url: str, hub: HubFolder, mirror, page: str) -> tuple:
    """(the JSON answer of `url` through the mirror, the next page's URL from the Link header or None)."""
    shown = mirrored(url, mirror)
    try:
        with open_url(shown, {"Accept": "application/json"}) as response:
            body, link = response.read(), response.headers.get("Link") or ""
    except urllib.error.HTTPError as exc:
        with exc:
            if exc.code in (401, 403):
                raise EvalsuiteError(f"{shown} answered HTTP {exc.code}: {hub.repo} asks for a signed-in user who "
                                     f"accepted its conditions; do that on {page}, then fetch the folder with "
                                     f"`huggingface-cli download {hub.repo} --repo-type dataset --include "
                                     f"'{hub.folder}/*' --local-dir SOMEWHERE` and pass SOMEWHERE/{hub.folder} as "
                                     "--data-root") from None
            raise http_error(shown, exc, page) from None
    except (urllib.error.URLError, OSError) as exc:
        raise EvalsuiteError(f"cannot fetch {shown} ({' '.join(str(getattr(exc, 'reason', exc)).split())}): check the "
                             "network or the proxy (HTTPS_PROXY), or point --mirror at a mirror") from None
    try:
        value = json.loads(body)
    except ValueError:
        raise EvalsuiteError(f"{shown} did not answer with JSON; check {page}, or the --mirror") from None
    match = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', link)
    return value, (match.group(1) if match else None)
