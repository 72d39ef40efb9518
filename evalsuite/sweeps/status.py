"""`sweep status`: every cell's state (done / running / pending / failed) from the leaderboard, the cells' state
files and, where Slurm is installed, `squeue` and `sacct`; a model x task grid, failed cells with their error."""

import shlex
import shutil
import socket
import subprocess

from evalsuite.errors import EXIT_SWEEP_INCOMPLETE, EXIT_SWEEP_WAITING, EvalsuiteError, one_line
from evalsuite.sweeps.cells import done_pairs, leaderboard_rows, missing_runs, sweep_dir, weights_ids
from evalsuite.sweeps.liveness import lock_held, runner_gone
from evalsuite.sweeps.state import lock_path, read_record, state_path

STATE_WORDS = ("done", "running", "pending", "failed")
# Job states that still end well (the job runs or waits); anything else with no result is a failure.
_ALIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
          "REQUEUE_FED"}


def cell_states(sweep, cells, reclaim=(), remember: bool = True) -> list:
    """[{cell, model, task, state, error, log, job}] in the cells' order. `reclaim`: hosts whose records this host
    cannot check are given up (`sweep run --reclaim HOST`), their cells shown as failed. `remember`: False keeps the
    checkpoints' hashes out of the sweep's folder (a dry run writes nothing)."""
    rows, ids, folder = leaderboard_rows(sweep), weights_ids(sweep, remember), sweep_dir(sweep)
    records = {cell.id: read_record(folder, cell.id) for cell in cells}
    queue = _slurm_states([job for record in records.values() for job in _jobs(record)])
    where = {"folder": folder, "queue": queue, "reclaim": set(reclaim)}
    return [_state(cell, records[cell.id], not missing_runs(cell, done_pairs(sweep, rows, cell, ids)), where)
            for cell in cells]


def _jobs(record: dict) -> list:
    return list(record.get("jobs") or []) + ([record["job"]] if record.get("job") else [])


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
    """Whether a job or a process still holds the cell (`active`); `unchecked` (why) when this host cannot tell."""
    jobs, host = _jobs(record), record.get("host")
    if jobs:
        by_slurm = _by_slurm(jobs, where["queue"])
        if by_slurm is not None:
            return by_slurm
        # Also on the host that submitted them: without Slurm's word the jobs may have ended long ago.
        why = f"its Slurm job {jobs[-1]} cannot be queried: {where['queue'].get('__why__')}"
    elif word != "running":
        return {"state": "pending"}
    elif host == socket.gethostname():
        gone = runner_gone(record, lock_path(where["folder"], cell_id))
        return {"state": "failed", "error": gone} if gone else {"state": "running", "active": True}
    else:
        why = f"held by a process on {host}, which this host cannot check" if host else \
            "its record names no host (nor a Slurm job), so no host can check its process"
    if host and host in where["reclaim"]:
        return {"state": "failed", "error": f"given up by `--reclaim {host}`: {why}"}
    state = "running" if word == "running" else "pending"
    return {"state": state, "active": True, "unchecked": why, **({"host": host} if host else {})}


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
    when squeue answered (a job it does not list has left the queue), else `__why__` it could not be asked."""
    if not jobs:
        return {}
    if shutil.which("squeue") is None:
        return {"__why__": "no squeue/sacct on this host"}
    arrays = sorted({job.split("_")[0] for job in jobs})
    listed, problem = _query(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(arrays)])
    if listed is None:
        return {"__why__": problem}
    states = dict(listed)
    gone = [job for job in jobs if job not in states]
    if gone and shutil.which("sacct"):
        ended, _ = _query(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(gone)])
        states.update({job: state for job, state in ended or [] if job in gone})
    return {**states, "__known__": True}


def _query(command: list) -> tuple:
    """([(job, state)], None), or (None, why the command gave no answer)."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{command[0]} did not answer ({type(exc).__name__})"
    if result.returncode != 0 and not result.stdout:
        # squeue refuses ids that have left the queue ("Invalid job id"): then nothing is queued.
        if "Invalid job id" in result.stderr:
            return [], None
        said = one_line(Exception(result.stderr.strip())) or "no message"
        return None, f"{command[0]} failed (exit {result.returncode}): {said}"
    pairs = [line.split("|", 1) for line in result.stdout.splitlines() if "|" in line]
    return [(job.strip(), state.split()[0].strip() if state.strip() else "") for job, state in pairs], None


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
        elif s.get("unchecked"):
            lines.append(unchecked_line(sweep, s))
    return "\n".join(line.rstrip() for line in lines)


def unchecked_line(sweep, state: dict) -> str:
    """Why this host cannot tell whether the cell's holder lives, and how to take the cell over if it does not."""
    head = f"{state['state']} {state['model']} x {state['task']}: {state['unchecked']}"
    if state.get("host"):
        return (f"{head}; if it is gone, `evalsuite sweep run {shlex.quote(str(sweep.path))} --reclaim "
                f"{shlex.quote(state['host'])}` takes the cell over")
    return (f"{head}; if nothing runs it, remove {state_path(sweep_dir(sweep), state['cell'])} and `evalsuite sweep "
            "run` runs the cell again")


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
        unchecked = sum(bool(s.get("unchecked")) for s in waiting)
        which = f"; {unchecked} of them this host cannot check (how to take them over is listed above)" \
            if unchecked else ""
        error = EvalsuiteError(f"{len(waiting)} of {len(states)} cells are not done: queued or running elsewhere "
                               f"(`sweep status`){which}; run the same `evalsuite sweep run` again once they end")
        error.exit_code = EXIT_SWEEP_WAITING
    return error if failed or waiting else None
