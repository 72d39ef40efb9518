"""The cost of each cell of a sweep before anything runs: host RAM (the budget plan), GPU memory and device-hours.

A sweep of 30 models x 20 tasks is planned on a login node without any weights: each model is built once on the meta
device (models/meta_build.py) and its FLOPs counted once; each task's split sizes are counted once, from the files
when the data root is there, else from the card's official counts. A cell that cannot be planned (a task whose
sizes only its data tells, and no data yet) is listed with the reason; the others still are.
"""

import dataclasses

from evalsuite.errors import EvalsuiteError, one_line
from evalsuite.features.budget import human_bytes, make_plan
from evalsuite.features.card_plan import card_sizes, count_splits, meta_row_shape, plan_from_card, plan_from_files
from evalsuite.features.cost_plan import backbone_cost, images_to_extract, reference_precision, run_cost
from evalsuite.models.meta_build import meta_backbone
from evalsuite.readers import resolve_data_root
from evalsuite.tasks.cards import dense_layers
from evalsuite.tasks.kinds import KINDS

NO_LIMIT_BYTES = 1 << 62  # without --mem a sweep's cells get their own allocations: only the bytes are planned


@dataclasses.dataclass
class CellCosts:
    """What the cells of one sweep share: meta backbones and their figures, split counts per task."""
    backbones: dict = dataclasses.field(default_factory=dict)
    counts: dict = dataclasses.field(default_factory=dict)
    rows: dict = dataclasses.field(default_factory=dict)  # feature row shapes per model and kind of feature


def plan_cell(config, card, costs: CellCosts, sources: dict | None, batch_size: int) -> dict:
    """{plan, cost, planned_from, notes} of one cell; `sources` None: plan the bytes with no memory limit."""
    key = (config.model, config.weights, config.random_init, config.pooling, card.pooling)
    if key not in costs.backbones:
        backbone = meta_backbone(config.model, config.weights, config.random_init, config.pooling, card.pooling)
        costs.backbones[key] = (backbone, backbone_cost(backbone))
    backbone, figures = costs.backbones[key]
    counted, planned_from, note = _counts(config, card, backbone, costs)
    feature = (key, KINDS[card.kind].feature, dense_layers(card) if KINDS[card.kind].dense else None)
    if feature not in costs.rows:
        costs.rows[feature] = meta_row_shape(card, backbone)
    if counted is None:
        import torch

        plan = plan_from_card(config, card, card_sizes(card), backbone, torch.device("cpu"), costs.rows[feature])
        plan.notes = plan.notes[:0]  # the cell's `planned_from` and `notes` say it once, shorter
    else:
        plan = plan_from_files(config, card, backbone, counted, costs.rows[feature])
    plan = make_plan(plan.splits, sources or {"no --mem": NO_LIMIT_BYTES}, plan.model_bytes,
                     plan.probe_working_bytes, plan.extraction_working_bytes, plan.cache_dir, plan.requested,
                     plan.disk_free_bytes)
    if not sources:
        plan.limit_rule = "no --mem: the bytes only (each cell's job plans against its own allocation)"
    precision = reference_precision(config.precision, backbone.precision)
    cost = run_cost(figures, images_to_extract(plan), precision, batch_size)
    return {"plan": plan, "cost": cost, "planned_from": planned_from, "notes": [note] if note else []}


def _counts(config, card, backbone, costs: CellCosts):
    """(count_splits' answer or None for the card's sizes, where from, a note) for the cell's task, once per task."""
    key = (config.task, config.data_root, config.check_counts)
    if key not in costs.counts:
        costs.counts[key] = _count_task(config, card, backbone)
    found = costs.counts[key]
    if isinstance(found, EvalsuiteError):
        raise found
    return found


def _count_task(config, card, backbone):
    if config.data_root is None and card.data_root is None:
        card_sizes(card)  # refused here when the card cannot fix its sizes
        return None, "card", ""
    root = resolve_data_root(card, config.data_root)
    if not root.exists():
        card_sizes(card)
        return None, "card", f"data root {root} is not there yet: planned from the card's official counts"
    try:
        return count_splits(config, card, backbone.data_config), "files", ""
    except EvalsuiteError as exc:
        return EvalsuiteError(one_line(exc))


def cell_row(model: str, task: str, planned: dict, mem_given: bool) -> dict:
    """The JSON of one planned cell."""
    plan, cost = planned["plan"], planned["cost"]
    held = plan.memmap_needed_bytes if mem_given and plan.decision == "memmap" else plan.ram_needed_bytes
    return {"model": model, "task": task, "planned_from": planned["planned_from"], "notes": planned["notes"],
            "decision": plan.decision if mem_given else None, "host_ram_bytes": held, "plan": plan.to_dict(),
            "cost": cost}


def totals(rows: list, failed: list) -> dict:
    planned = [row for row in rows if "cost" in row]
    return {"cells": len(planned) + len(failed), "planned": len(planned), "not_planned": len(failed),
            "images": sum(row["cost"]["images"] for row in planned),
            "device_hours": round(sum(row["cost"]["device_hours"] for row in planned), 3),
            "largest_gpu_memory_bytes": max((row["cost"]["gpu_memory_bytes"] for row in planned), default=0),
            "largest_host_ram_bytes": max((row["host_ram_bytes"] for row in planned), default=0),
            "cache_disk_bytes": sum(row["plan"]["disk_needed_bytes"] for row in planned)}


def format_sweep(header: str, rows: list, failed: list, total: dict, mem_given: bool) -> list:
    width = max([len(row["model"]) for row in rows + failed] + [5]) + 2
    task_width = max([len(row["task"]) for row in rows + failed] + [4]) + 2
    lines = [header, "", (f"{'model':<{width}}{'task':<{task_width}}{'from':<7}{'images':>10}  {'row':<12}"
             f"{'host RAM':>11}{'  plan  ' if mem_given else ''}{'GPU memory':>12}  {'prec':<5}{'img/s':>7}"
             f"{'device-h':>10}")]
    for row in rows:
        plan, cost = row["plan"], row["cost"]
        shape = "x".join(map(str, plan["splits"][0]["row_shape"]))
        decision = f"  {row['decision']:<6}" if mem_given else ""
        lines.append(f"{row['model']:<{width}}{row['task']:<{task_width}}{row['planned_from']:<7}"
                     f"{cost['images']:>10,}  {shape:<12}{human_bytes(row['host_ram_bytes']):>11}{decision}"
                     f"{human_bytes(cost['gpu_memory_bytes']):>12}  {cost['precision']:<5}"
                     f"{cost['extraction_img_s']:>7,.0f}{cost['device_hours']:>10.3f}")
    errors = {}
    for item in failed:  # one line per reason: a task without data fails the same way for every model
        errors.setdefault(item["error"], []).append(f"{item['model']} x {item['task']}")
    for error, cells in errors.items():
        named = ", ".join(cells[:3]) + (", ..." if len(cells) > 3 else "")
        lines.append(f"not planned ({len(cells)} cell{'s' if len(cells) > 1 else ''}: {named}): {error}")
    lines += ["", (f"total: {total['planned']} of {total['cells']} cells planned, {total['images']:,} images, "
                  f"{total['device_hours']:.3f} device-hours on the reference GPU; largest host RAM "
                  f"{human_bytes(total['largest_host_ram_bytes'])}, largest GPU memory "
                  f"{human_bytes(total['largest_gpu_memory_bytes'])}; caches "
                  f"{human_bytes(total['cache_disk_bytes'])} on disk")]
    notes = sorted({f"{row['task']}: {note}" for row in rows for note in row["notes"]})
    return lines + [f"note: {note}" for note in notes]
