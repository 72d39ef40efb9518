"""`sweep status`: every cell's state (done / running / pending / failed) from the leaderboard, the cells' state
files and, where Slurm is installed, `squeue` and `sacct`; a model x task grid, failed cells with their error."""

import os
import shutil
import socket
import subprocess

from evalsuite.sweeps.cells import done_pairs, leaderboard_rows, missing_runs, sweep_dir, weights_ids
from evalsuite.sweeps.state import read_state

STATE_WORDS = ("done", "running", "pending", "failed")
# Job states that still end well (the job runs or waits); anything else with no result is a failure.
_ALIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
          "REQUEUE_FED"}


def cell_states(sweep, cells) -> list:
    """[{cell, model, task, state, error, log, job}] in the cells' order."""
    rows, ids = leaderboard_rows(sweep), weights_ids(sweep)
    records = {cell.id: read_state(sweep_dir(sweep), cell.id) for cell in cells}
    queue = _slurm_states([job for record in records.values() for job in _jobs(record)])
    return [_state(cell, records[cell.id], not missing_runs(cell, done_pairs(sweep, rows, cell, ids)), queue)
            for cell in cells]


def _jobs(record: dict) -> list:
    return list(record.get("jobs", [])) + ([record["job"]] if record.get("job") else [])


def _state(cell, record: dict, done: bool, queue: dict) -> dict:
    base = {"cell": cell.id, "model": cell.model.label, "task": cell.task_name, "error": None,
            "log": record.get("log"), "job": record.get("job") or (record.get("jobs") or [None])[-1]}
    if done:
        return {**base, "state": "done"}
    word = record.get("state")
    if word == "failed":
        where = f" (at {record['stage']})" if record.get("stage") else ""
        return {**base, "state": "failed", "error": f"{record.get('error')}{where}"}
    if word in ("running", "submitted"):
        return {**base, **_alive_or_failed(record, word, queue)}
    return {**base, "state": "pending"}


def _alive_or_failed(record: dict, word: str, queue: dict) -> dict:
    jobs = _jobs(record)
    if jobs:
        states = [queue.get(job) for job in jobs]
        if any(state in _ALIVE for state in states):
            return {"state": "running" if "RUNNING" in states else "pending", "active": True}
        if any(state is None for state in states) and not queue.get("__known__"):  # Slurm cannot be asked here
            return {"state": "running" if word == "running" else "pending", "active": True}
        ended = next((state for state in states if state), "gone from the queue")
        return {"state": "failed", "error": f"job {jobs[-1]} ended ({ended}) without writing its result; see its log"}
    if word == "running" and not _pid_alive(record):
        return {"state": "failed", "error": f"the process that ran it (pid {record.get('pid')}) ended without a result"}
    return {"state": "running", "active": True} if word == "running" else {"state": "pending"}


def _pid_alive(record: dict) -> bool:
    if record.get("host") != socket.gethostname():
        return True  # another host's process cannot be seen from here
    try:
        os.kill(int(record["pid"]), 0)
    except (KeyError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _slurm_states(jobs: list) -> dict:
    """{job id (ARRAY_TASK or plain): Slurm state} from squeue, then sacct for jobs no longer queued; `__known__`
    when squeue answered (a job it does not list has left the queue)."""
    if not jobs or shutil.which("squeue") is None:
        return {}
    arrays = sorted({job.split("_")[0] for job in jobs})
    listed = _query(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(arrays)])
    if listed is None:
        return {}
    states = dict(listed)
    if shutil.which("sacct"):
        gone = [job for job in jobs if job not in states]
        states.update({job: state for job, state in (_query(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j",
                                                             ",".join(gone)]) or []) if job in gone} if gone else {})
    return {**states, "__known__": True}


def _query(command: list):
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0 and not result.stdout:
        # squeue refuses ids that have left the queue ("Invalid job id"): then nothing is queued.
        return [] if "Invalid job id" in result.stderr else None
    pairs = [line.split("|", 1) for line in result.stdout.splitlines() if "|" in line]
    return [(job.strip(), state.split()[0].strip() if state.strip() else "") for job, state in pairs]


def grid_text(sweep, states: list) -> str:
    """The model x task grid, the counts, then each failed cell's error and log."""
    models = list(dict.fromkeys(s["model"] for s in states))
    tasks = list(dict.fromkeys(s["task"] for s in states))
    by_cell = {(s["model"], s["task"]): s["state"] for s in states}
    width = max(len(m) for m in models) + 2
    lines = ["".ljust(width) + "".join(t.ljust(max(len(t), 8) + 2) for t in tasks)]
    lines += [model.ljust(width) + "".join(by_cell[(model, t)].ljust(max(len(t), 8) + 2) for t in tasks)
              for model in models]
    counts = {word: sum(s["state"] == word for s in states) for word in STATE_WORDS}
    lines.append(f"sweep {sweep.name}: " + ", ".join(f"{n} {word}" for word, n in counts.items()) +
                 f" of {len(states)} cells")
    for s in states:
        if s["state"] == "failed":
            where = f" (log {s['log']})" if s["log"] else ""
            lines.append(f"failed {s['model']} x {s['task']}: {s['error']}{where}")
    return "\n".join(line.rstrip() for line in lines)
