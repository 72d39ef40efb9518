"""A run's commit: its leaderboard rows and its run JSON appear together, and a commit cut short (SIGKILL, a node
lost, the file system turning read-only) is finished or undone by the next process that looks.

The run JSON is staged as `runs/.<run_id>.json.<pid>.tmp`, the rows are appended, then the JSON is renamed into
place, all under the leaderboard's lock. Whoever holds that lock later and finds a staged JSON therefore knows its
writer is gone (a live writer holds the lock for as long as its staged JSON exists, on any node that shares the
lock), and the rows decide: rows naming the run mean the append happened, so the JSON is moved into place; no
rows mean the run never counted, so the staged JSON and the files written beside it (test predictions, plots) go.
"""

import contextlib
import os
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard import (
    LEADERBOARD_FILE,
    append_rows_locked,
    check_appendable,
    leaderboard_lock,
    run_ids,
)
from evalsuite.results.run_json import RUNS_FOLDER, stage_run_json
from evalsuite.storage.fsio import discard, fs_errors

_STAGED_SUFFIX = ".tmp"


class RowsWrittenError(EvalsuiteError):
    """The run's rows are appended but its run JSON could not be moved into place: the run counts, so the files
    written beside it stay, and the next process holding the lock finishes the commit."""


def commit_run(out_dir, record: dict, rows: list) -> tuple[Path, list[str]]:
    """Append a run's rows and move its run JSON into place, or neither; returns (the JSON's path, notes on commits
    of earlier runs this one finished or undid)."""
    leaderboard = Path(out_dir) / LEADERBOARD_FILE
    check_appendable(leaderboard)  # a foreign leaderboard.csv refuses before the run JSON is written
    with fs_errors("append to", leaderboard):
        leaderboard.parent.mkdir(parents=True, exist_ok=True)
    with leaderboard_lock(leaderboard):
        notes = _repair_or_note(out_dir, leaderboard)
        staging, path = stage_run_json(out_dir, record)
        try:
            append_rows_locked(leaderboard, rows)
        except BaseException:
            with contextlib.suppress(OSError):  # EROFS must not hide the error being raised
                discard(staging)
            raise
        # From here on the rows count: a failed rename keeps the staged JSON for the next process to move.
        try:
            with fs_errors("write results", path):
                os.replace(staging, path)
        except EvalsuiteError as exc:
            raise RowsWrittenError(f"{exc} (its leaderboard rows are written: the next `evalsuite run` or `evalsuite "
                                   f"leaderboard` on this --out, once it is writable, moves the run JSON into "
                                   f"place)") from None
    return path, notes


def _repair_or_note(out_dir, leaderboard: Path) -> list[str]:
    """Another run's unfinished commit must not sink this one (it may be another user's file in a shared --out)."""
    try:
        return _repair_locked(out_dir, leaderboard)
    except EvalsuiteError as exc:
        return [f"an earlier run's unfinished commit could not be repaired ({exc}); this run is committed all the "
                "same"]


def repair_half_commits(out_dir) -> list[str]:
    """Finish or undo the commits cut short under `out_dir`; one note per run, also when it cannot be repaired now
    (a read-only --out)."""
    staged = _staged_jsons(out_dir)
    if not staged:
        return []
    leaderboard = Path(out_dir) / LEADERBOARD_FILE
    try:
        with leaderboard_lock(leaderboard):
            return _repair_locked(out_dir, leaderboard)
    except EvalsuiteError as exc:
        names = ", ".join(_run_id(p) for p in staged)
        return [f"run(s) {names} stopped while committing and cannot be repaired now ({exc}); rerun on a writable "
                "--out to finish or undo them"]


def _repair_locked(out_dir, leaderboard: Path) -> list[str]:
    staged = _staged_jsons(out_dir)
    if not staged:
        return []
    committed = run_ids(leaderboard)
    notes = []
    for path in staged:
        run_id = _run_id(path)
        with fs_errors("repair the run JSON", path):
            if run_id in committed:
                path.replace(path.parent / f"{run_id}.json")
                notes.append(f"run {run_id} stopped after its leaderboard rows were written; its run JSON is now in "
                             "place")
            else:
                beside = [p for p in path.parent.glob(f"{run_id}.*") if p.name != f"{run_id}.json"]
                for stale in [path, *beside]:
                    discard(stale)
                notes.append(f"run {run_id} stopped before its leaderboard rows were written; removed its staged run "
                             f"JSON and {len(beside)} file(s) written beside it")
    return notes


def _staged_jsons(out_dir) -> list[Path]:
    folder = Path(out_dir) / RUNS_FOLDER
    try:
        return sorted(p for p in folder.glob(f".*.json.*{_STAGED_SUFFIX}") if _run_id(p))
    except OSError:  # no readable runs folder: nothing this process could repair
        return []


def _run_id(path: Path) -> str:
    """`.<run_id>.json.<pid>.tmp` -> run_id ('' for another name)."""
    stem, _, pid = path.name[1:].removesuffix(_STAGED_SUFFIX).rpartition(".json.")
    return stem if stem and pid.isdigit() else ""
