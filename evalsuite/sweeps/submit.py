"""The Slurm executor: the cells not done become job arrays, one per memory class, each element with its plan's `--mem`.

Each cell's memory is planned here, before submission, by the RAM budget planner (its caches, labels, model and
working sets, from one real forward pass): the request is the plan's figure plus the room the job's own planner
keeps back (10 %, at least 256 MiB) plus `slurm.mem_margin_gb` (default 4 GB) for what the plan does not count (the
interpreter, torch's libraries, DataLoader workers). A cell over the memory limit (the smaller of the partition's
MaxMemPerNode and `slurm.max_mem_gb`) is planned with memory-mapped caches; a cell over it even so is refused before
anything is submitted. The requests are rounded up to memory classes and each class is submitted as its own array
(sweeps/arrays.py), split where MaxArraySize (sweeps/limits.py) allows fewer tasks. A task with `shards: K` becomes K
extraction elements and one probe element submitted after them (`--dependency=afterany` on those K tasks: a shard
that failed leaves its chunks to the probe element, which extracts what is missing itself). With
`slurm.array_parallelism` the arrays run one after another, each throttled to it, so no more elements than that run
at once. A last job, `--dependency=afterany` on everything, rebuilds the wide leaderboard.
"""

import dataclasses
import math
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass

from evalsuite.errors import EvalsuiteError, one_line
from evalsuite.features.budget import SAFETY_MARGIN_FRACTION, SAFETY_MARGIN_MIN_BYTES
from evalsuite.sweeps.arrays import class_mb
from evalsuite.sweeps.cells import write_json
from evalsuite.sweeps.limits import sbatch_option, time_limit_s
from evalsuite.sweeps.scripts import array_script, leaderboard_script
from evalsuite.sweeps.state import mark

MB = 1024**2


def check_sbatch() -> None:
    if shutil.which("sbatch") is None:
        raise EvalsuiteError("sbatch not found on PATH: this host cannot submit to Slurm; run the sweep here with "
                             "--executor local, or from a Slurm login node")


def check_warning_fits(sweep, limits) -> None:
    """The USR1 warning must come before the jobs' time limit: slurm.time (or a --time line of slurm.extra), else the
    partition's. A warning longer than the limit would stop every element at its first chunk."""
    named = sbatch_option(sweep.slurm, "time", "t")
    limit_s = time_limit_s(named) if named else limits.partition_time_s
    warn_s = sweep.slurm.warn_before_limit_s
    if limit_s and warn_s >= limit_s:
        where = f"the time limit {named}" if named else f"partition {limits.partition}'s time limit"
        raise EvalsuiteError(f"sweep file {sweep.path}: slurm.warn_before_limit_s ({warn_s} s) is not shorter than "
                             f"{where} ({limit_s} s); set a longer slurm.time or lower the warning")


@dataclass(frozen=True)
class MemoryLimit:
    mb: int  # the largest --mem a job of the sweep may ask for
    source: str  # what sets it, for the refusal: "partition gpu's MaxMemPerNode" or "slurm.max_mem_gb"


def memory_limit(sweep, limits) -> MemoryLimit | None:
    """The smaller of the partition's MaxMemPerNode and slurm.max_mem_gb; None when neither is set."""
    found = []
    if limits.max_mem_per_node_mb:
        found.append(MemoryLimit(limits.max_mem_per_node_mb, f"partition {limits.partition}'s MaxMemPerNode"))
    if sweep.slurm.max_mem_gb:
        found.append(MemoryLimit(math.floor(sweep.slurm.max_mem_gb * 1024), "slurm.max_mem_gb"))
    return min(found, key=lambda limit: limit.mb) if found else None


def cell_mem_mb(sweep, cell, builds, limit: MemoryLimit | None = None) -> int:
    """The cell's request in MB from the budget planner (module docstring): its RAM plan, or its memory-mapped plan
    when the RAM plan's request is above `limit`."""
    from evalsuite.features.prepare import plan_splits
    from evalsuite.runner import build_task_and_backbone
    from evalsuite.runtime.devices import resolve_device

    config = cell.config(sweep, mem="1024T", device="cpu")  # plan the bytes, whatever this login node has
    card, reader, backbone = build_task_and_backbone(config, builds)
    plan = plan_splits(config, card, reader, backbone, resolve_device("cpu")).plan
    request_mb = _request_mb(plan.ram_needed_bytes, sweep)
    if limit and request_mb > limit.mb:
        request_mb = _request_mb(plan.memmap_needed_bytes, sweep)
    return request_mb


def _request_mb(needed_bytes: int, sweep) -> int:
    # The job's own planner keeps back 10 % of its allocation (at least 256 MiB): the request leaves it that room.
    kept_back = max(needed_bytes * SAFETY_MARGIN_FRACTION / (1 - SAFETY_MARGIN_FRACTION), SAFETY_MARGIN_MIN_BYTES)
    return math.ceil((needed_bytes + kept_back) / MB + sweep.slurm.mem_margin_gb * 1024)


def check_within(sweep, cell, request_mb: int, limit: MemoryLimit | None) -> None:
    """A cell whose plan, memory-mapped, is still above the limit cannot run on the partition: refused, before any
    submission."""
    if limit and request_mb > limit.mb:
        raise EvalsuiteError(f"sweep file {sweep.path}: cell {cell.model.label} x {cell.task_name} plans --mem="
                             f"{request_mb}M even with memory-mapped caches, above {limit.source} ({limit.mb}M); "
                             "nothing was submitted: lower batch_size or slurm.mem_margin_gb, name a partition with "
                             "larger nodes in slurm.partition, or run that cell with --executor local")


def plan_elements(sweep, pending: list, say, record: bool = True, limit: MemoryLimit | None = None) -> list:
    """[{index, ref, config, runs, shard, request_mb, mem_mb, after}] for the pending (cell, runs); `mem_mb` is the
    request rounded up to its memory class. A cell that cannot be planned (a wrong data root, a missing file) is
    marked failed with its one-line error and left out; one above `limit` stops the submission (check_within)."""
    from evalsuite.models.reuse import ReusedBuilds

    builds, elements, folder = ReusedBuilds(), [], sweep_folder(sweep)
    planned_mb = {}  # cells that differ only in their label (one model under two names) plan the same bytes
    for cell, runs in pending:
        same_plan = repr({**dataclasses.asdict(cell.config(sweep)), "label": None})
        try:
            request_mb = planned_mb.get(same_plan) or cell_mem_mb(sweep, cell, builds, limit)
        except EvalsuiteError as exc:
            if record:
                mark(folder, cell.ref, "failed", error=one_line(exc), log=None, stage="planning on the submit host")
            say(f"cell {cell.model.label} x {cell.task_name} failed at planning: {one_line(exc)}")
            continue
        check_within(sweep, cell, request_mb, limit)
        planned_mb[same_plan] = request_mb
        config = {k: str(v) if k == "out_dir" else v for k, v in dataclasses.asdict(cell.config(sweep)).items()}
        base = {"ref": cell.ref, "config": config, "request_mb": request_mb,
                "mem_mb": class_mb(request_mb, limit.mb if limit else None), "weights_id": None,
                "precision": sweep.precision}
        shards = cell.task.shards if cell.task.shards > 1 else 0
        for shard in range(shards):
            elements.append({**base, "index": len(elements), "shard": [shard, shards], "runs": [], "after": []})
        after = [e["index"] for e in elements[len(elements) - shards:]] if shards else []
        elements.append({**base, "index": len(elements), "shard": None, "after": after,
                         "runs": [[probes, [cell.probe_names[cell.probes.index(p)] for p in probes], seeds]
                                  for probes, seeds in runs]})
    return elements


def sweep_folder(sweep):
    from evalsuite.sweeps.cells import sweep_dir

    return sweep_dir(sweep)


def write_files(sweep, elements: list, arrays: list, dry_run: bool) -> dict:
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
    write_json(paths["plan"], {"sweep": str(sweep.path), "folder": str(folder), "elements": elements,
                               "arrays": arrays})
    paths["array"].write_text(array_script(sweep, folder, paths["plan"]))
    paths["leaderboard"].write_text(leaderboard_script(sweep, folder))
    return paths


def submit(sweep, arrays: list, paths: dict, dry_run: bool, say, jobs: dict) -> None:
    """Submit (or, dry, print) the arrays and the leaderboard job, filling `jobs` {element index: job id ARRAY_TASK}
    as each array goes in, so a refusal half-way still leaves a record of what was submitted.

    Each array runs elements `first` .. `first + count - 1` (the script's argument is `first`). With
    slurm.array_parallelism every array waits for the one before (afterany), so at most that many elements run at
    once over all of them."""
    throttle = f"%{sweep.slurm.array_parallelism}" if sweep.slurm.array_parallelism else ""
    submitted = []
    for number, array in enumerate(arrays, 1):
        waits = [jobs[index] for index in array["after"]] or (submitted[-1:] if throttle else [])
        task_ids = f"0-{array['count'] - 1}{throttle}" if array["count"] > 1 else "0"
        job = _sbatch([f"--array={task_ids}", f"--mem={array['mem_mb']}M",
                       *([f"--dependency=afterany:{':'.join(waits)}"] if waits else []), str(paths["array"]),
                       str(array["first"])], dry_run, say, f"ARRAY{number}")
        jobs.update({array["first"] + task: f"{job}_{task}" for task in range(array["count"])})
        submitted.append(job)
        say(f"array {job}: elements {array['first']}-{array['first'] + array['count'] - 1} of the plan, "
            f"--mem={array['mem_mb']}M")
    _sbatch([f"--dependency=afterany:{':'.join(submitted)}", str(paths["leaderboard"])], dry_run, say, "LEADERBOARD")


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
