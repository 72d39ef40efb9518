"""What each cell last did, one small JSON file per cell under `<out>/sweeps/<name>/cells/`.

The leaderboard decides whether a cell is done (sweeps/cells.py); these files say what happened to the others:
`submitted` (Slurm job ids), `running` (host, pid or job), `failed` (the one-line error and the log), `done`.
They are written atomically by the process running the cell (a failed write leaves the previous file) and never
decide who runs what: a stale `running` file is read against `squeue`, or on its host against the cell's lock and
the process's pid and start time (sweeps/liveness.py), and shown as failed.
"""

import os
import socket
import time
from pathlib import Path

from evalsuite.sweeps.cells import read_json, write_json
from evalsuite.sweeps.liveness import identity

CELLS_FOLDER = "cells"
LOGS_FOLDER = "logs"


def state_path(folder: Path, cell_id: str, element: str = "") -> Path:
    """The state file of a cell (or of one of its shards, `element` = ".shard0") in the sweep's folder."""
    return Path(folder) / CELLS_FOLDER / f"{cell_id}{element}.json"


def read_state(folder: Path, cell_id: str, element: str = "") -> dict:
    return read_json(state_path(folder, cell_id, element))


def lock_path(folder: Path, cell_id: str) -> Path:
    """The file a local runner holds an flock on while it runs the cell (sweeps/liveness.py)."""
    return Path(folder) / CELLS_FOLDER / f"{cell_id}.lock"


def mark(folder: Path, ref: dict, state: str, element: str = "", **fields) -> None:
    """Record `state` for the cell `ref` ({cell, model, task}: `Cell.ref`), keeping the job ids it was given."""
    path = state_path(folder, ref["cell"], element)
    previous = read_state(folder, ref["cell"], element)
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
