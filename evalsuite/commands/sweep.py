"""`evalsuite sweep run|status FILE`: many models x many tasks from one sweep file (docs/sweeps.md), run here one
cell after another or submitted as a Slurm job array; `sweep element` is what the array's tasks run."""

import json
import sys


def add_parser(commands, common) -> None:
    sweep = commands.add_parser("sweep", parents=[common],
                                help="many models x tasks from a sweep file: run here or as a Slurm job array")
    actions = sweep.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", parents=[common], help="run the cells not done yet (local) or submit them (slurm)")
    run.add_argument("file", help="sweep file (YAML; docs/sweeps.md)")
    run.add_argument("--executor", choices=["local", "slurm"], default="local",
                     help="local: cells one after another in this process (default); slurm: one job array")
    run.add_argument("--dry-run", action="store_true",
                     help="say what would run; with --executor slurm, write and print the scripts and the sbatch "
                          "lines without submitting")
    run.add_argument("--reclaim", action="append", default=[], metavar="HOST",
                     help="take over cells recorded by HOST (this host too) that this host cannot check: a process "
                          "there (that host went down), or Slurm jobs without squeue/sacct here; repeatable. Cells of a "
                          "dead process on this host are taken over without it")
    run.set_defaults(handler=main_run)
    status = actions.add_parser("status", parents=[common], help="the model x task grid: done, running, pending, "
                                                                 "failed (with the error and the log)")
    status.add_argument("file", help="sweep file (YAML)")
    status.add_argument("--json", action="store_true", help="one JSON list of cells, for scripts")
    status.set_defaults(handler=main_status)
    element = actions.add_parser("element", parents=[common],
                                 help="(run by a submitted sweep's array script) one element of its plan file")
    element.add_argument("plan", help="the submission's plan-STAMP.json")
    element.add_argument("index", type=int, help="the element ($SLURM_ARRAY_TASK_ID)")
    element.set_defaults(handler=main_element)


def _load(path):
    from evalsuite.sweeps.cells import cells_of
    from evalsuite.sweeps.spec import load_sweep

    sweep = load_sweep(path)
    return sweep, cells_of(sweep)


def main_run(args) -> None:
    from evalsuite.errors import EvalsuiteError, one_line
    from evalsuite.results.leaderboard import LEADERBOARD_FILE, check_appendable
    from evalsuite.storage.fsio import check_out_folder
    from evalsuite.sweeps.spec import check_models

    sweep, cells = _load(args.file)
    check_models(sweep)
    try:
        check_out_folder(sweep.out)
        check_appendable(sweep.out / LEADERBOARD_FILE)
    except EvalsuiteError as exc:  # the messages name --out, which the sweep file calls out:
        raise EvalsuiteError(f"sweep file {sweep.path}: out: {one_line(exc).replace('--out ', '')}") from None
    if args.executor == "slurm":
        _submit(sweep, cells, args.dry_run, args.reclaim)
    else:
        _run_here(sweep, cells, args.dry_run, args.reclaim)


def _run_here(sweep, cells, dry_run: bool, reclaim=()) -> None:
    from evalsuite.sweeps.local import dry_run_local, run_local

    if dry_run:  # what the run below would do, from the same cell states
        dry_run_local(sweep, cells, say=print, reclaim=reclaim)
        return
    run_local(sweep, cells, say=lambda line: print(line, flush=True), reclaim=reclaim)
    _finish(sweep, cells, reclaim, every_cell_done=True)


def _finish(sweep, cells, reclaim=(), every_cell_done: bool = False) -> None:
    """The grid; exit 4 when a cell failed; with `every_cell_done` (here), exit 5 while a cell runs elsewhere."""
    from evalsuite.sweeps.status import cell_states, grid_text, unfinished

    states = cell_states(sweep, cells, reclaim)
    print(grid_text(sweep, states), flush=True)
    error = unfinished(states, waiting_fails=every_cell_done)
    if error:
        raise error


def _submit(sweep, cells, dry_run: bool, reclaim=()) -> None:
    from evalsuite.sweeps.cells import missing_runs
    from evalsuite.sweeps.limits import read_limits
    from evalsuite.sweeps.spec import precision_line
    from evalsuite.sweeps.status import cell_states, unchecked_line
    from evalsuite.sweeps.submit import check_sbatch, check_warning_fits, memory_limit

    if not dry_run:
        check_sbatch()
    limits = read_limits(sweep.slurm, dry_run, say=print)  # before planning, which loads every model
    print(limits.describe())
    print(f"note: {precision_line(sweep)}")  # what every cell computes in, before anything is submitted
    check_warning_fits(sweep, limits)
    states = {s["cell"]: s for s in cell_states(sweep, cells, reclaim)}
    busy = [c for c in cells if states[c.id].get("active") and states[c.id]["state"] != "done"]
    wanted = [c for c in cells if states[c.id]["state"] != "done" and c not in busy]
    if busy:
        print(f"sweep {sweep.name}: {len(busy)} cells are queued or running already; not submitted again")
    for cell in busy if dry_run else ():  # a real run lists them under its grid
        if states[cell.id].get("unchecked"):
            print(unchecked_line(sweep, states[cell.id]))
    pending = [(cell, missing_runs(cell, _done(sweep, cell))) for cell in wanted]
    elements = _planned(sweep, [(cell, runs) for cell, runs in pending if runs], dry_run, memory_limit(sweep, limits))
    if elements:
        _submit_elements(sweep, elements, limits, dry_run)
    else:
        print(f"sweep {sweep.name}: nothing to submit")
    if not dry_run:
        _finish(sweep, cells, reclaim)


def _submit_elements(sweep, elements: list, limits, dry_run: bool) -> None:
    from evalsuite.sweeps.arrays import arrange
    from evalsuite.sweeps.submit import submit, write_files

    elements, arrays = arrange(elements, limits.tasks_per_array)
    paths = write_files(sweep, elements, arrays, dry_run)
    print(f"plan: {paths['plan']}")
    if dry_run:
        for name in ("array", "leaderboard"):
            print(f"--- {paths[name]} ---\n{paths[name].read_text()}")
    jobs = {}
    try:
        submit(sweep, arrays, paths, dry_run, say=print, jobs=jobs)
    finally:  # what went in before a refusal is recorded, so the next `sweep run` does not submit it twice
        if not dry_run:
            _mark_submitted(sweep, [e for e in elements if e["index"] in jobs], jobs)
    if not dry_run:
        print(f"sweep {sweep.name}: {len(elements)} elements submitted in {len(arrays)} arrays; `evalsuite sweep "
              f"status {sweep.path}` shows their progress")


def _done(sweep, cell):
    from evalsuite.sweeps.cells import done_pairs, leaderboard_rows, weights_ids

    return done_pairs(sweep, leaderboard_rows(sweep), cell, weights_ids(sweep))


def _planned(sweep, pending: list, dry_run: bool, limit) -> list:
    from evalsuite.sweeps.cells import weights_ids
    from evalsuite.sweeps.submit import plan_elements

    ids = weights_ids(sweep)
    elements = plan_elements(sweep, pending, say=print, record=not dry_run, limit=limit)
    for element, (cell, _) in ((e, next(p for p in pending if p[0].id == e["ref"]["cell"])) for e in elements):
        element["weights_id"] = ids.get(cell.model.weights) if cell.model.weights else None
    return elements


def _mark_submitted(sweep, elements: list, jobs: dict) -> None:
    from evalsuite.sweeps.cells import sweep_dir
    from evalsuite.sweeps.state import mark

    by_cell = {}
    for element in elements:
        by_cell.setdefault(element["ref"]["cell"], (element["ref"], []))[1].append(jobs[element["index"]])
    for ref, cell_jobs in by_cell.values():
        mark(sweep_dir(sweep), ref, "submitted", jobs=cell_jobs, job=None, error=None)


def main_status(args) -> None:
    from evalsuite.sweeps.status import cell_states, grid_text

    sweep, cells = _load(args.file)
    states = cell_states(sweep, cells)
    print(json.dumps(states, indent=1) if args.json else grid_text(sweep, states))


def main_element(args) -> None:
    from evalsuite.sweeps.element import run_element

    run_element(args.plan, args.index, say=lambda line: print(line, flush=True))
    sys.stdout.flush()
