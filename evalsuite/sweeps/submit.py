"""The Slurm executor: the cells not done become one job array, each element with its own `--mem`.

Each cell's memory is planned here, before submission, by the RAM budget planner (its caches, labels, model and
working sets, from one real forward pass): the request is the plan's figure plus the room the job's own planner
keeps back (10 %, at least 256 MiB) plus `slurm.mem_margin_gb` (default 4 GB) for what the plan does not count (the
interpreter, torch's libraries, DataLoader workers). A cell over `slurm.max_mem_gb` is planned with memory-mapped
caches. Slurm gives every task of an array the same options, so the array is submitted held with the largest
request, each smaller task is lowered with `scontrol update JobId=ARRAY_TASK MinMemoryNode=MB`, then the array is
released. A task with `shards: K` becomes K extraction elements in the array and one probe element submitted after
them (`--dependency=afterany` on those K tasks: a shard that failed leaves its chunks to the probe element, which
extracts what is missing itself). A last job, `--dependency=afterany` on everything, rebuilds the wide leaderboard.
"""

import dataclasses
import math
import shlex
import shutil
import subprocess
import time

from evalsuite.errors import EvalsuiteError, one_line
from evalsuite.features.budget import SAFETY_MARGIN_FRACTION, SAFETY_MARGIN_MIN_BYTES
from evalsuite.sweeps.cells import write_json
from evalsuite.sweeps.scripts import array_script, leaderboard_script
from evalsuite.sweeps.state import mark

MB = 1024**2


def check_sbatch() -> None:
    if shutil.which("sbatch") is None:
        raise EvalsuiteError("sbatch not found on PATH: this host cannot submit to Slurm; run the sweep here with "
                             "--executor local, or from a Slurm login node")


def cell_mem_mb(sweep, cell, builds) -> int:
    """The cell's --mem in MB from the budget planner (module docstring)."""
    from evalsuite.features.prepare import plan_splits
    from evalsuite.runner import build_task_and_backbone
    from evalsuite.runtime.devices import resolve_device

    config = cell.config(sweep, mem="1024T", device="cpu")  # plan the bytes, whatever this login node has
    card, reader, backbone = build_task_and_backbone(config, builds)
    plan = plan_splits(config, card, reader, backbone, resolve_device("cpu")).plan
    needed = plan.ram_needed_bytes
    if sweep.slurm.max_mem_gb and _request_mb(needed, sweep) > sweep.slurm.max_mem_gb * 1024:
        needed = plan.memmap_needed_bytes
    return _request_mb(needed, sweep)


def _request_mb(needed_bytes: int, sweep) -> int:
    # The job's own planner keeps back 10 % of its allocation (at least 256 MiB): the request leaves it that room.
    kept_back = max(needed_bytes * SAFETY_MARGIN_FRACTION / (1 - SAFETY_MARGIN_FRACTION), SAFETY_MARGIN_MIN_BYTES)
    return math.ceil((needed_bytes + kept_back) / MB + sweep.slurm.mem_margin_gb * 1024)


def plan_elements(sweep, pending: list, say, record: bool = True) -> list:
    """[{index, ref, config, runs, shard, mem_mb, after}] for the pending (cell, runs); a cell that cannot be
    planned (a wrong data root, a missing file) is marked failed with its one-line error and left out."""
    from evalsuite.models.reuse import ReusedBuilds

    builds, elements, folder = ReusedBuilds(), [], sweep_folder(sweep)
    for cell, runs in pending:
        try:
            mem_mb = cell_mem_mb(sweep, cell, builds)
        except EvalsuiteError as exc:
            if record:
                mark(folder, cell.ref, "failed", error=one_line(exc), log=None, stage="planning on the submit host")
            say(f"cell {cell.model.label} x {cell.task_name} failed at planning: {one_line(exc)}")
            continue
        config = {k: str(v) if k == "out_dir" else v for k, v in dataclasses.asdict(cell.config(sweep)).items()}
        base = {"ref": cell.ref, "config": config, "mem_mb": mem_mb, "weights_id": None, "precision": sweep.precision}
        shards = cell.task.shards
        for shard in range(shards if shards > 1 else 0):
            elements.append({**base, "index": len(elements), "shard": [shard, shards], "runs": []})
        after = [e["index"] for e in elements[len(elements) - (shards if shards > 1 else 0):]] if shards > 1 else []
        elements.append({**base, "index": len(elements), "shard": None, "after": after,
                         "runs": [[probes, [cell.probe_names[cell.probes.index(p)] for p in probes], seeds]
                                  for probes, seeds in runs]})
    return elements


def sweep_folder(sweep):
    from evalsuite.sweeps.cells import sweep_dir

    return sweep_dir(sweep)


def write_files(sweep, elements: list, dry_run: bool) -> dict:
    """plan-STAMP.json, array-STAMP.sbatch and leaderboard-STAMP.sbatch in the sweep's folder: one set per
    submission, because the elements of an earlier one may still be queued and read their own plan (a dry run
    writes its set under STAMP `dry-run`)."""
    folder = sweep_folder(sweep)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    stamp = "dry-run" if dry_run else time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    while not dry_run and (folder / f"plan-{stamp}.json").exists():  # two submissions within one second
        stamp += "+"
    paths = {"plan": folder / f"plan-{stamp}.json", "array": folder / f"array-{stamp}.sbatch",
             "leaderboard": folder / f"leaderboard-{stamp}.sbatch"}
    write_json(paths["plan"], {"sweep": str(sweep.path), "folder": str(folder), "elements": elements})
    paths["array"].write_text(array_script(sweep, folder, paths["plan"]))
    paths["leaderboard"].write_text(leaderboard_script(sweep, folder))
    return paths


def submit(sweep, elements: list, paths: dict, dry_run: bool, say) -> dict:
    """Submit (or, dry, print) the array, the sharded cells' probe elements and the leaderboard job; returns
    {element index: job id}."""
    direct = [e for e in elements if not e.get("after")]
    chained = [e for e in elements if e.get("after")]
    top_mb = max(e["mem_mb"] for e in direct)
    throttle = f"%{sweep.slurm.array_parallelism}" if sweep.slurm.array_parallelism else ""
    indexes = ",".join(str(e["index"]) for e in direct)
    array = _sbatch(["--hold", f"--array={indexes}{throttle}", f"--mem={top_mb}M", str(paths["array"])], dry_run,
                    say, "ARRAY")
    jobs = {e["index"]: f"{array}_{e['index']}" for e in direct}
    try:
        _lower_memory(direct, jobs, top_mb, dry_run, say)
        for element in chained:
            after = ":".join(jobs[i] for i in element["after"])
            job = _sbatch([f"--array={element['index']}", f"--mem={element['mem_mb']}M",
                           f"--dependency=afterany:{after}", str(paths["array"])], dry_run, say,
                          f"CELL{element['index']}")
            jobs[element["index"]] = f"{job}_{element['index']}"
    finally:  # never leave the array held: whatever was submitted runs
        _run(["scontrol", "release", array], dry_run, say)
    waits = sorted({job.split("_")[0] for job in jobs.values()})
    _sbatch([f"--dependency=afterany:{':'.join(waits)}", str(paths["leaderboard"])], dry_run, say, "LEADERBOARD")
    return jobs


def _lower_memory(direct: list, jobs: dict, top_mb: int, dry_run: bool, say) -> None:
    """Each task's own --mem; a task Slurm will not change keeps the array's (the largest), said in one line."""
    for element in direct:
        if element["mem_mb"] < top_mb:
            try:
                _run(["scontrol", "update", f"JobId={jobs[element['index']]}", f"MinMemoryNode={element['mem_mb']}"],
                     dry_run, say)
            except EvalsuiteError as exc:
                say(f"note: {jobs[element['index']]} keeps --mem={top_mb}M: {exc}")


def _sbatch(args: list, dry_run: bool, say, placeholder: str) -> str:
    output = _run(["sbatch", "--parsable", *args], dry_run, say)
    return f"<{placeholder}>" if dry_run else output.split(";")[0].strip()


def _run(command: list, dry_run: bool, say) -> str:
    say(("would run: " if dry_run else "running: ") + shlex.join(command))
    if dry_run:
        return ""
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise EvalsuiteError(f"{command[0]} failed (exit {result.returncode}): "
                             f"{one_line(Exception(result.stderr.strip() or result.stdout.strip()))}")
    return result.stdout.strip()
