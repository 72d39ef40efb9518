"""`sweep status`: every cell's state (done / running / pending / failed) from the leaderboard, the cells' state
files and, where Slurm is installed, `squeue` and `sacct`; a model x task grid, failed cells with their error."""

import shutil
import socket
import subprocess

from evalsuite.errors import EXIT_SWEEP_INCOMPLETE, EXIT_SWEEP_WAITING, EvalsuiteError
from evalsuite.sweeps.cells import done_pairs, leaderboard_rows, missing_runs, sweep_dir, weights_ids
from evalsuite.sweeps.liveness import lock_held, runner_gone
from evalsuite.sweeps.state import lock_path, read_state

STATE_WORDS = ("done", "running", "pending", "failed")
# Job states that still end well (the job runs or waits); anything else with no result is a failure.
_ALIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
          "REQUEUE_FED"}


def cell_states(sweep, cells, reclaim=()) -> list:
    """[{cell, model, task, state, error, log, job}] in the cells' order. `reclaim`: hosts whose records this host
    cannot check are given up (`sweep run --reclaim HOST`), their cells shown as failed."""
    rows, ids, folder = leaderboard_rows(sweep), weights_ids(sweep), sweep_dir(sweep)
    records = {cell.id: read_state(folder, cell.id) for cell in cells}
    queue = _slurm_states([job for record in records.values() for job in _jobs(record)])
    where = {"folder": folder, "queue": queue, "reclaim": set(reclaim)}
    return [_state(cell, records[cell.id], not missing_runs(cell, done_pairs(sweep, rows, cell, ids)), where)
            for cell in cells]


def _jobs(record: dict) -> list:
    return list(record.get("jobs", [])) + ([record["job"]] if record.get("job") else [])


def _state(cell, record: dict, done: bool, where: dict) -> dict:
    base = {"cell": cell.id, "model": cell.model.label, "task": cell.task_name, "error": None,
            "log": record.get("log"), "job": record.get("job") or (record.get("jobs") or [None])[-1]}
    if done:
        return {**base, "state": "done"}
    if lock_held(lock_path(where["folder"], cell.id)):  # a local runner took the cell, whatever its record says yet
        return {**base, "state": "running", "active": True}
    word = record.get("state")
    if word == "failed":
        stage = f" (at {record['stage']})" if record.get("stage") else ""
        return {**base, "state": "failed", "error": f"{record.get('error')}{stage}"}
    if word in ("running", "submitted"):
        return {**base, **_holder(cell.id, record, word, where)}
    return {**base, "state": "pending"}


def _holder(cell_id: str, record: dict, word: str, where: dict) -> dict:
    """Whether a job or a process still holds the cell (`active`); `host` when only that host could tell."""
    jobs = _jobs(record)
    if jobs:
        by_slurm = _by_slurm(jobs, where["queue"])
        if by_slurm is not None:
            return by_slurm
    elif word != "running":
        return {"state": "pending"}
    elif record.get("host") == socket.gethostname():
        gone = runner_gone(record, lock_path(where["folder"], cell_id))
        return {"state": "failed", "error": gone} if gone else {"state": "running", "active": True}
    host = record.get("host") or "?"
    if host == socket.gethostname():  # its jobs' Slurm cannot be asked on the host that submitted or ran them
        return {"state": "running" if word == "running" else "pending", "active": True}
    if host in where["reclaim"]:
        return {"state": "failed", "error": f"given up by `--reclaim {host}`: its process there could not be checked"}
    return {"state": "running" if word == "running" else "pending", "active": True, "host": host}


def _by_slurm(jobs: list, queue: dict) -> dict | None:
    """The state Slurm gives the cell's jobs; None where Slurm cannot be asked here."""
    states = [queue.get(job) for job in jobs]
    if any(state in _ALIVE for state in states):
        return {"state": "running" if "RUNNING" in states else "pending", "active": True}
    if any(state is None for state in states) and not queue.get("__known__"):
        return None
    ended = next((state for state in states if state), "gone from the queue")
    return {"state": "failed", "error": f"job {jobs[-1]} ended ({ended}) without writing its result; see its log"}


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
        elif s.get("host"):
            lines.append(f"{s['state']} {s['model']} x {s['task']}: held by a process on {s['host']}, which this "
                         f"host cannot check; if it is gone, `evalsuite sweep run {sweep.path} --reclaim {s['host']}` "
                         "runs the cell here")
    return "\n".join(line.rstrip() for line in lines)


def unfinished(states: list, waiting_fails: bool = True) -> EvalsuiteError | None:
    """The error `sweep run` ends with: exit 4 when a cell failed; else, with `waiting_fails` (the local executor:
    exit 0 means every cell is done), exit 5 while cells are queued or running elsewhere."""
    failed = [s for s in states if s["state"] == "failed"]
    waiting = [s for s in states if s["state"] != "done"] if waiting_fails else []
    if failed:
        error = EvalsuiteError(f"{len(failed)} of {len(states)} cells failed (listed above); fix them and run the "
                               "same `evalsuite sweep run` again: it runs only what is missing")
        error.exit_code = EXIT_SWEEP_INCOMPLETE
    elif waiting:
        error = EvalsuiteError(f"{len(waiting)} of {len(states)} cells are not done: queued or running elsewhere "
                               "(`sweep status`); run the same `evalsuite sweep run` again once they end")
        error.exit_code = EXIT_SWEEP_WAITING
    return error if failed or waiting else None
