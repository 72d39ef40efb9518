"""The local executor: a sweep's cells one after another in this process.

Cells of one model run in a row and share its loaded backbone (models/reuse.py); a cell's seeds and probes run in
one `evalsuite run`, sharing its feature cache. A failed cell is one line (its traceback goes to the cell's log) and
the sweep goes on. SIGTERM or SIGUSR1 stops the sweep after the current extraction chunk (exit 75), Ctrl-C at once
(exit 130); the same command resumes it. A cell that Slurm or another process is running or has queued (`sweep
status`) is left to it. While it runs a cell this process holds the cell's lock (sweeps/liveness.py), so a record
it leaves behind when killed is seen as dead and taken up by the next `sweep run`, and two `sweep run`s started
together do not run one cell twice. `shards:` has no meaning here: one process extracts each cache whole. The run
says what precision its cells compute in after its plan line, the dry run in a note on stderr (spec.precision_line).
"""

import sys
import time
import traceback

from evalsuite.errors import EXIT_INTERNAL, EvalsuiteError, one_line
from evalsuite.features.extract import Preempted
from evalsuite.models.reuse import ReusedBuilds
from evalsuite.results.commit import repair_half_commits
from evalsuite.runner import run
from evalsuite.sweeps.cell_lines import TimeLeft, headline, plan_line
from evalsuite.sweeps.cells import done_pairs, leaderboard_rows, missing_runs, out_error, sweep_dir, weights_ids
from evalsuite.sweeps.liveness import CellHeld, hold
from evalsuite.sweeps.spec import precision_line
from evalsuite.sweeps.state import lock_path, log_path, mark
from evalsuite.sweeps.status import cell_states


def run_local(sweep, cells, say=print, reclaim=()) -> dict:
    """Run every cell not done; returns {cell id: "done" | "failed" | "skipped" | "busy"}. `reclaim`: hosts whose
    records of running cells are given up (`--reclaim`)."""
    for note in repair_half_commits(sweep.out):  # a run killed while committing, finished or undone first
        print(f"note: {note}", file=sys.stderr)
    rows, ids = leaderboard_rows(sweep), weights_ids(sweep)
    busy = held_elsewhere(sweep, cells, reclaim)
    if busy:
        say(f"sweep {sweep.name}: {len(busy)} cells are queued or running elsewhere (`sweep status`); left to them")
    todo = [(cell, missing_runs(cell, done_pairs(sweep, rows, cell, ids))) for cell in cells if cell.id not in busy]
    outcome = {cell.id: "skipped" for cell, runs in todo if not runs}
    builds, started, pending = ReusedBuilds(), time.monotonic(), [c for c, r in todo if r]
    say(plan_line(sweep, cells, busy, set(outcome), pending))
    say(precision_line(sweep))
    if outcome:
        say(f"sweep {sweep.name}: {len(outcome)} of {len(cells)} cells already in {sweep.out}/leaderboard.csv, "
            "skipped")
    time_left = TimeLeft()
    for number, cell in enumerate(pending, 1):
        cell_started = time.monotonic()
        outcome[cell.id] = _run_cell(sweep, cell, ids, builds, say)
        time_left.finished(cell, time.monotonic() - cell_started)
        say(_progress_line(cell, number, len(pending), outcome[cell.id], cell_started, started,
                           time_left.seconds(pending[number:])))
    return outcome


def held_elsewhere(sweep, cells, reclaim=(), remember: bool = True) -> dict:
    """{cell id: its state} of the cells a Slurm job or another live process holds: the run leaves them to it."""
    return {s["cell"]: s for s in cell_states(sweep, cells, reclaim, remember)
            if s.get("active") and s["state"] != "done"}


def dry_run_local(sweep, cells, say=print, reclaim=()) -> None:
    """What run_local would do with each cell, from the same states, running and writing nothing: a cell held
    elsewhere is said to be left to its holder, as the real run leaves it."""
    rows, ids = leaderboard_rows(sweep), weights_ids(sweep, remember=False)
    busy = held_elsewhere(sweep, cells, reclaim, remember=False)
    for cell in cells:
        name = f"{cell.model.label} x {cell.task_name}"
        if cell.id in busy:
            say(f"{name}: left to its holder, {busy[cell.id]['state']} elsewhere ({_holder_words(busy[cell.id])})")
            continue
        runs = missing_runs(cell, done_pairs(sweep, rows, cell, ids))
        say(f"{name}: " + ("; ".join(f"seeds {','.join(map(str, seeds))} with {', '.join(probes)}"
                                     for probes, seeds in runs) or "done"))
    print(f"note: {precision_line(sweep)}", file=sys.stderr)  # stdout stays one line per cell


def _holder_words(state: dict) -> str:
    if state.get("unchecked"):
        return f"{state['unchecked']}; `sweep status` says how to take it over"
    return f"Slurm job {state['job']}" if state.get("job") else "a live `sweep run` on this host"


def _run_cell(sweep, cell, ids: dict, builds, say) -> str:
    lock = lock_path(sweep_dir(sweep), cell.id)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.touch()
    except OSError as exc:  # a full or read-only disk: one line naming the file
        raise out_error("create", lock, exc) from None
    try:
        with hold(lock) as locked:
            # Read again under the lock: another `sweep run` may have finished the cell since this one looked.
            runs = missing_runs(cell, done_pairs(sweep, leaderboard_rows(sweep), cell, ids))
            return _run_held_cell(sweep, cell, runs, builds, say, locked) if runs else "skipped"
    except CellHeld:  # another `sweep run` took the cell after this one looked
        say(f"  {cell.model.label} x {cell.task_name}: another process started it; left to it")
        return "busy"


def _run_held_cell(sweep, cell, runs: list, builds, say, locked: bool) -> str:
    folder = sweep_dir(sweep)
    mark(folder, cell.ref, "running", jobs=[], locked=locked)  # this process runs it now, not a job submitted before
    try:
        for probes, seeds in runs:
            record = run(cell.config(sweep, probes=probes, seeds=seeds), builds)
            say(f"  {cell.model.label} x {cell.task_name}: run {record['run_id']} (seeds "
                f"{','.join(map(str, seeds))}; {', '.join(probes)}): {headline(record)}")
    except (Preempted, KeyboardInterrupt):
        mark(folder, cell.ref, "pending", note="stopped by a signal; the same `sweep run` resumes it")
        raise
    except EvalsuiteError as exc:
        return _failed(sweep, cell, one_line(exc), say, exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - one cell's bug must not end the other cells
        return _failed(sweep, cell, f"internal error: {type(exc).__name__}: {one_line(exc)}", say, EXIT_INTERNAL)
    mark(folder, cell.ref, "done")
    return "done"


def _failed(sweep, cell, message: str, say, exit_code: int = 2) -> str:
    folder = sweep_dir(sweep)
    log = log_path(folder, cell.id)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"{message}\n\n{traceback.format_exc()}")
    except OSError:
        log = None
    # Said before the state is written: when that write fails too (a full disk), the cell's own error is seen.
    print(f"evalsuite: cell {cell.model.label} x {cell.task_name} failed: {message}", file=sys.stderr)
    mark(folder, cell.ref, "failed", error=message, log=str(log) if log else None, exit_code=exit_code)
    return "failed"


def _progress_line(cell, number: int, total: int, word: str, cell_started: float, started: float,
                   remaining_s: float) -> str:
    return (f"[{number}/{total}] {cell.model.label} x {cell.task_name}: {word} in "
            f"{_duration(time.monotonic() - cell_started)}; elapsed {_duration(time.monotonic() - started)}, about "
            f"{_duration(remaining_s)} left (each cell estimated from finished cells of its task, else of its kind)")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
