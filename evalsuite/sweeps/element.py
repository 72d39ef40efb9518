"""One element of a submitted sweep (`evalsuite sweep element PLAN INDEX`, run by the array script): a cell's
probe runs, or one extraction shard of a cell with `shards:`.

The element reads everything from its submission's plan-STAMP.json. Before running a cell it reads the leaderboard
again and runs only the (probe, seed) pairs still missing, so a requeued element whose rows were appended before
it stopped adds none twice. It records its state for `sweep status`; its exit code is the run's (75 on a stop
signal, which the array script turns into a requeue).
"""

import os
import sys
from pathlib import Path

from evalsuite.config import RunConfig
from evalsuite.errors import EvalsuiteError, one_line
from evalsuite.features.extract import Preempted
from evalsuite.results.commit import repair_half_commits
from evalsuite.results.leaderboard import LEADERBOARD_FILE, read_rows
from evalsuite.sweeps.cells import pairs_present, read_json, runs_for
from evalsuite.sweeps.state import mark


def run_element(plan_path: Path, index: int, say=print) -> None:
    plan = _read_plan(Path(plan_path))
    if not 0 <= index < len(plan["elements"]):
        raise EvalsuiteError(f"sweep plan {plan_path}: no element {index} (it has {len(plan['elements'])}); "
                             "submit the sweep again with `evalsuite sweep run FILE --executor slurm`")
    element, folder = plan["elements"][index], Path(plan["folder"])
    config = RunConfig(**{**element["config"], "out_dir": Path(element["config"]["out_dir"])})
    suffix = f".shard{element['shard'][0]}" if element["shard"] else ""
    mark(folder, element["ref"], "running", suffix, log=_log_path(folder))
    try:
        if element["shard"]:
            _extract_shard(config, *element["shard"], say)
        else:
            _run_cell(config, element, say)
    except Preempted:
        mark(folder, element["ref"], "submitted", suffix, note="stopped by a signal; requeued to resume")
        raise
    except Exception as exc:
        internal = "" if isinstance(exc, EvalsuiteError) else f"internal error: {type(exc).__name__}: "
        mark(folder, element["ref"], "failed", suffix, error=internal + one_line(exc), log=_log_path(folder))
        raise
    mark(folder, element["ref"], "done", suffix, log=_log_path(folder))


def _read_plan(plan_path: Path) -> dict:
    """The plan's JSON object; a missing file or one that is no plan is said as such, not as "no element N"."""
    where = "the plan-STAMP.json that `evalsuite sweep run FILE --executor slurm` wrote in <out>/sweeps/<name>/"
    if not plan_path.is_file():
        found = "is a folder" if plan_path.is_dir() else "not found"
        raise EvalsuiteError(f"sweep plan {plan_path}: {found}; pass {where}")
    plan = read_json(plan_path)
    if not isinstance(plan, dict) or not isinstance(plan.get("elements"), list) or not plan["elements"] \
            or "folder" not in plan:
        raise EvalsuiteError(f"{plan_path} is not a sweep plan (no elements, or not JSON); pass {where}")
    return plan


def _log_path(folder: Path) -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return str(folder / "logs" / f"{array}_{task}.out") if array and task else None


def _run_cell(config: RunConfig, element: dict, say) -> None:
    from evalsuite.runner import run

    for note in repair_half_commits(config.out_dir):  # an element killed while committing, finished or undone
        print(f"note: {note}", file=sys.stderr)
    path = config.out_dir / LEADERBOARD_FILE
    done = pairs_present(read_rows(path) if path.is_file() else [], element["ref"], element.get("weights_id"),
                         element["precision"])
    for probes, names, seeds in element["runs"]:
        for chosen, chosen_seeds in runs_for(probes, names, seeds, done):
            record = run(RunConfig(**{**config.__dict__, "probes": chosen, "seeds": chosen_seeds}))
            say(f"{element['ref']['model']} x {element['ref']['task']}: run {record['run_id']} "
                f"(seeds {','.join(map(str, chosen_seeds))}; {', '.join(chosen)}) -> {record['results_path']}")


def _extract_shard(config: RunConfig, shard_index: int, shard_count: int, say) -> None:
    from evalsuite.features.shards import extract_shard
    from evalsuite.runner import build_task_and_backbone
    from evalsuite.runtime.cpus import use_threads
    from evalsuite.runtime.devices import resolve_device

    device = resolve_device(config.device)
    use_threads(config.threads)
    card, reader, backbone = build_task_and_backbone(config)
    forwarded = extract_shard(config, card, reader, backbone, device, shard_index, shard_count)
    say(f"shard {shard_index + 1}/{shard_count} of {card.name}: {sum(forwarded.values())} samples extracted "
        f"({', '.join(f'{split} {n}' for split, n in forwarded.items())})")
