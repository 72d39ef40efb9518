"""One results JSON per run under <out>/runs/: written atomically, found again by run id, read back (its content is
assembled by evalsuite/run_record.py)."""

import contextlib
import glob
import json
import os
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.fsio import discard, fs_errors, staging_name, write_durably

RESULTS_SCHEMA_VERSION = 1
RUNS_FOLDER = "runs"


def write_run_json(out_dir: Path, record: dict) -> Path:
    staging, path = stage_run_json(out_dir, record)
    try:
        with fs_errors("write results", path):
            os.replace(staging, path)
    finally:
        with contextlib.suppress(OSError):
            discard(staging)
    return path


def stage_run_json(out_dir: Path, record: dict) -> tuple[Path, Path]:
    """Write the run's results JSON to its temp name beside the final one; returns (temp, final) paths.

    The caller renames it once the run's leaderboard rows are appended (results/commit.py), so a run JSON exists
    only when a row names it. A failed write leaves no temp file."""
    folder = Path(out_dir) / RUNS_FOLDER
    path = folder / f"{record['run_id']}.json"
    # cwd: relative paths in `command` and `config` resolve against it when re-running.
    document = {"results_schema": RESULTS_SCHEMA_VERSION, "cwd": os.getcwd(), **record}
    with fs_errors("write results", path):
        folder.mkdir(parents=True, exist_ok=True)
    staging = staging_name(path)
    try:
        with fs_errors("write results", path):
            write_durably(staging, json.dumps(document, indent=2, sort_keys=True).encode())
    except BaseException:
        with contextlib.suppress(OSError):
            discard(staging)
        raise
    return staging, path


def find_run_json(out_dir: Path, run_id: str) -> Path:
    """The results JSON of `run_id` or of the one run whose id starts with it."""
    folder = Path(out_dir) / RUNS_FOLDER
    if not folder.is_dir():
        raise EvalsuiteError(f"no runs folder at {folder}; pass the --out folder of an evalsuite run")
    exact = folder / f"{run_id}.json"
    if exact.is_file():
        return exact
    matches = sorted(folder.glob(f"{glob.escape(run_id)}*.json")) if run_id and "/" not in run_id else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise EvalsuiteError(f"run id '{run_id}' matches {len(matches)} runs in {folder}: {_listed(matches)}; "
                             "give more of it")
    raise EvalsuiteError(f"no run '{run_id}' in {folder}; run ids are in leaderboard.csv's run_id column")


def _listed(matches: list, most: int = 10) -> str:
    """The run ids a prefix matched, so the user can copy one; a long list ends with how many more."""
    ids = [path.stem for path in matches[:most]]
    return ", ".join(ids) + (f" and {len(matches) - most} more" if len(matches) > most else "")


def read_run_json(path: Path) -> dict:
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalsuiteError(f"cannot read results {path}: {exc}; the file is damaged or not an evalsuite result") from None
    if not isinstance(record, dict) or "run_id" not in record:
        raise EvalsuiteError(f"{path} is not an evalsuite results JSON (no run_id)")
    return record
