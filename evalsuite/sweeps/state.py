"""What each cell last did, one small JSON file per cell under `<out>/sweeps/<name>/cells/`.

The leaderboard decides whether a cell is done (sweeps/cells.py); these files say what happened to the others:
`submitted` (Slurm job ids), `running` (host, pid or job), `failed` (the one-line error and the log), `done`.
They are written atomically by the process running the cell (a failed write leaves the previous file) and never
decide who runs what: a stale `running` file is read against `squeue`, or on its host against the cell's lock and
the process's pid and start time (sweeps/liveness.py), and shown as failed.
"""

import json
import os
import socket
import time
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.sweeps.cells import read_json, write_json
from evalsuite.sweeps.liveness import identity

CELLS_FOLDER = "cells"
LOGS_FOLDER = "logs"


def state_path(folder: Path, cell_id: str, element: str = "") -> Path:
    """The state file of a cell (or of one of its shards, `element` = ".shard0") in the sweep's folder."""
    return Path(folder) / CELLS_FOLDER / f"{cell_id}{element}.json"


# The fields `sweep status` reads from a record, and the JSON type each must have when present (null: absent).
_FIELD_TYPES = {"state": str, "host": str, "job": str, "pid": int, "pid_start_ticks": int, "boot_id": str,
                "updated_utc": str, "locked": bool}


def read_state(folder: Path, cell_id: str, element: str = "") -> dict:
    """The record as written; {} when there is none yet or it was cut short (its cell reads as pending)."""
    record = read_json(state_path(folder, cell_id, element))
    return record if isinstance(record, dict) else {}


def read_record(folder: Path, cell_id: str) -> dict:
    """The cell's record for `sweep status` and `sweep run`: one that is valid JSON but no record evalsuite writes
    (a list, a job id as a number) is one line naming the file, not an internal error in whatever reads it."""
    path = state_path(folder, cell_id)
    record = read_json(path)
    problem = _not_a_record(record)
    if problem:
        raise EvalsuiteError(f"sweep cell record {path}: {problem}, not a record `sweep run` writes; remove the file "
                             "to rerun the cell: `evalsuite sweep run` then runs what the leaderboard lacks")
    return record


def _not_a_record(record) -> str | None:
    if not isinstance(record, dict):
        return f"holds a JSON {_json_type(record)} instead of an object"
    for key, kind in _FIELD_TYPES.items():
        if record.get(key) is not None and not isinstance(record[key], kind):
            return f"its {key} is {json.dumps(record[key])[:60]}, a JSON {_json_type(record[key])}"
    jobs = record.get("jobs")
    if jobs is not None and (not isinstance(jobs, list) or not all(isinstance(job, str) for job in jobs)):
        return f"its jobs is {json.dumps(jobs)[:60]}, not a list of job ids"
    return None


def _json_type(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def lock_path(folder: Path, cell_id: str) -> Path:
    """The file a local runner holds an flock on while it runs the cell (sweeps/liveness.py)."""
    return Path(folder) / CELLS_FOLDER / f"{cell_id}.lock"


def mark(folder: Path, ref: dict, state: str, element: str = "", **fields) -> None:
    """Record `state` for the cell `ref` ({cell, model, task}: `Cell.ref`), keeping the job ids it was given."""
    path = state_path(folder, ref["cell"], element)
    previous = read_state(folder, ref["cell"], element)  # a record that is no object is replaced
    record = {**ref, "state": state,
              "updated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": socket.gethostname(),
              **identity(), **_slurm_job(), **fields}
    if "jobs" in previous and "jobs" not in record:
        record["jobs"] = previous["jobs"]
    write_json(path, record)  # a full disk there is one line naming the file (cells.write_json)


def _slurm_job() -> dict:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return {"job": f"{array}_{task}"}
    return {"job": os.environ["SLURM_JOB_ID"]} if os.environ.get("SLURM_JOB_ID") else {}


def log_path(folder: Path, cell_id: str) -> Path:
    """A local run's failure log (its traceback); Slurm elements log to the array's own files."""
    return Path(folder) / LOGS_FOLDER / f"{cell_id}.local.log"
