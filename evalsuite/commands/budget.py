"""`evalsuite budget`: what a run, or every cell of a sweep file, costs before anything is extracted.

Host RAM: the memory plan (ram, memmap or refuse), from the files under the data root, or without them from the
card's official split sizes. GPU memory and device-hours on a named reference GPU (features/cost_plan.py: the rules),
from the backbone's architecture. The backbone is loaded as `run` loads it where its weights are at hand (the
cache keys, which tell what is cached, hold the weights' hash); where they are not (a gated model, no hub), or with
`--no-weights`, and always for a sweep, its architecture is built on the meta device instead: no weights are read.

Exit code 0 for ram or memmap, EXIT_REFUSE (3) for refuse, so job scripts can gate on it (`decision:` is the first
line of the plan, which sbatch/_common.sh reads).
"""

import json
import sys

# Flags of one run that a sweep file sets per cell: refused beside --sweep rather than silently ignored.
_RUN_ONLY = ("task", "weights", "random_init", "pooling", "data_root", "no_count_check", "batch_size", "num_workers",
             "chunk_rows", "precision", "no_autocast", "skip_bad_slides", "no_weights")


def add_parser(commands, common) -> None:
    from evalsuite.commands._common import add_task_model_args

    budget = commands.add_parser("budget", parents=[common],
                                 help="plan host RAM, GPU memory and device-hours of a run or a sweep file before "
                                      "running it (exit 3 = refuse)")
    add_task_model_args(budget)
    for action in budget._actions:  # --task, or --sweep instead
        if action.dest == "task":
            action.required = False
            action.help += "; required unless --sweep is given"
    budget.add_argument("--sweep", metavar="FILE",
                        help="plan every cell of a sweep file (models x tasks) instead of one run, without weights: "
                             "per cell and in total")
    budget.add_argument("--no-weights", action="store_true",
                        help="plan from the architecture built on the meta device even where the weights could be "
                             "loaded or downloaded (then every split counts as still to extract)")
    budget.add_argument("--json", action="store_true", help="print the plan as JSON")
    budget.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.errors import EvalsuiteError, one_line

    if args.sweep:
        return _sweep(args)
    if args.task is None:
        raise EvalsuiteError("budget needs --task TASK (one run) or --sweep FILE (every cell of a sweep file)")
    from evalsuite.commands._common import run_config

    config = run_config(args)  # flags checked before the heavy imports
    from evalsuite.config import default_batch_size
    from evalsuite.features import cost_plan
    from evalsuite.features.budget import BudgetRefused, format_plan, with_limits
    from evalsuite.features.memory_limits import limit_sources
    from evalsuite.runtime.devices import resolve_device

    gpu_batch = config.batch_size or default_batch_size("cuda")
    device = resolve_device(config.device)
    config = config.for_device(device.type)
    plan, backbone = _plan(config, device, args.no_weights)
    plan = with_limits(plan, *limit_sources(config.mem, elsewhere=True), config.mem)  # --mem as given
    precision = cost_plan.reference_precision(config.precision, backbone.precision)
    try:
        cost = cost_plan.run_cost(cost_plan.backbone_cost(backbone), cost_plan.images_to_extract(plan), precision,
                                  gpu_batch)
    except Exception as exc:  # noqa: BLE001 - the RAM gate of the sbatch templates must not fail on an estimate
        cost = {"error": f"not estimated ({type(exc).__name__}: {one_line(exc)})"}
    assumptions = cost_plan.assumptions({precision}, {gpu_batch})
    if args.json:
        print(json.dumps({**plan.to_dict(), "cost": cost, "assumptions": assumptions}, indent=2, default=str))
    else:
        print("\n".join([format_plan(plan), ""] + cost_plan.format_cost(cost)
                        + cost_plan.format_assumptions(assumptions)))
    sys.stdout.flush()
    if plan.decision == "refuse":
        raise BudgetRefused(f"RAM budget: {plan.reason}")


def _plan(config, device, no_weights: bool):
    """(plan, backbone): from the files under the data root, or without one from the card's official split sizes (no
    download needed); the backbone loaded where its weights are at hand, else built on the meta device."""
    from evalsuite.features.card_plan import card_sizes, plan_from_card, plan_from_files
    from evalsuite.features.slide_embeddings import card_for_encoder
    from evalsuite.models.meta_build import is_meta
    from evalsuite.models.registry import slide_encoder
    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    card = load_card(config.task)
    encoder = slide_encoder(config.model)
    card = card_for_encoder(card, encoder) if encoder else card  # tiled as the slide encoder's run tiles
    if config.data_root is None and card.data_root is None:
        sizes = card_sizes(card)  # before the backbone: a card that cannot be planned is refused at once
        backbone, note = _backbone(config, card, no_weights)
        plan = plan_from_card(config, card, sizes, backbone, device)
    else:
        reader = build_reader(card, config.data_root, config.check_counts)
        backbone, note = _backbone(config, card, no_weights)
        if is_meta(backbone):
            plan = plan_from_files(config, card, backbone)
        else:
            from evalsuite.features.prepare import plan_splits

            plan = plan_splits(config, card, reader, backbone, device).plan
    if note:
        plan.notes.append(note)
    return plan, backbone


def _backbone(config, card, no_weights: bool):
    """(backbone, note): as `run` builds it; on the meta device with --no-weights, or when the weights cannot be had
    (nothing local given, and the hub refuses or is out of reach), with a note saying so."""
    from evalsuite.errors import EvalsuiteError, one_line
    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.meta_build import meta_backbone

    def meta(why: str):
        backbone = meta_backbone(config.model, config.weights, config.random_init, config.pooling, card.pooling)
        return backbone, (f"{why}: planned from {config.model}'s architecture built on the meta device, no weights "
                          "loaded; which caches exist is not known without the weights (their hash is in each cache "
                          "key), so every split counts as still to extract")

    if no_weights:
        return meta("--no-weights")
    try:
        return build_backbone(config.model, config.weights, config.random_init, config.pooling, card.pooling), ""
    except EvalsuiteError as exc:
        if config.weights or config.random_init or config.model.startswith("hf-hub:"):
            raise
        try:
            return meta(f"weights not available here ({one_line(exc).split('; ')[0]})")
        except EvalsuiteError:
            raise exc from None


def _sweep(args) -> None:
    from evalsuite.config import DEFAULT_MODEL
    from evalsuite.errors import EvalsuiteError, one_line
    from evalsuite.features import cost_plan
    from evalsuite.features.budget import BudgetRefused
    from evalsuite.features.cell_cost import CellCosts, cell_row, format_sweep, plan_cell, totals
    from evalsuite.features.memory_limits import limit_sources
    from evalsuite.sweeps.cells import cells_of
    from evalsuite.sweeps.spec import load_sweep
    from evalsuite.tasks.cards import load_card

    given = [name for name in _RUN_ONLY if getattr(args, name, None) not in (None, False)]
    given += ["model"] if args.model != DEFAULT_MODEL else []
    if given:
        raise EvalsuiteError(f"budget --sweep plans the sweep file's own models, tasks and settings: drop "
                             f"{', '.join('--' + name.replace('_', '-') for name in given)} (set them in the file)")
    sweep = load_sweep(args.sweep)
    cells = cells_of(sweep)
    sources = limit_sources(args.mem, elsewhere=True)[0] if args.mem else None
    gpu_batch = sweep.run_options.get("batch_size") or 64
    costs, rows, failed = CellCosts(), [], []
    for cell in cells:
        config = cell.config(sweep, device="cpu", mem=args.mem).for_device("cpu")
        try:
            planned = plan_cell(config, load_card(cell.task.task), costs, sources, gpu_batch)
        except EvalsuiteError as exc:
            failed.append({"model": cell.model.label, "task": cell.task_name, "error": one_line(exc)})
            continue
        rows.append(cell_row(cell.model.label, cell.task_name, planned, bool(args.mem)))
    total = totals(rows, failed)
    assumptions = cost_plan.assumptions({row["cost"]["precision"] for row in rows} or {"bf16"}, {gpu_batch})
    if args.json:
        print(json.dumps({"sweep": sweep.name, "path": str(sweep.path), "cells": rows, "not_planned": failed,
                          "total": total, "assumptions": assumptions}, indent=2, default=str))
    else:
        header = (f"sweep {sweep.name} ({sweep.path}): {len(sweep.models)} models x {len(sweep.tasks)} tasks = "
                  f"{len(cells)} cells, planned without weights (each architecture built on the meta device); host "
                  + (f"RAM against --mem {args.mem} as given" if args.mem else "RAM needed to hold the caches in RAM "
                     "(pass --mem to decide ram, memmap or refuse)"))
        print("\n".join(format_sweep(header, rows, failed, total, bool(args.mem))
                        + cost_plan.format_assumptions(assumptions)))
    sys.stdout.flush()
    refused = [row for row in rows if row["decision"] == "refuse"]
    if refused:
        raise BudgetRefused(f"RAM budget: {len(refused)} of {len(rows)} cells refused under --mem {args.mem}: "
                            + "; ".join(f"{row['model']} x {row['task']}" for row in refused[:5]))
