"""`evalsuite budget`: plan a run's memory (ram, memmap or refuse) without extracting anything.

Exit code 0 for ram or memmap, EXIT_REFUSE (3) for refuse, so job scripts can gate on it.
"""

import json
import sys


def add_parser(commands, common) -> None:
    from evalsuite.commands._common import add_task_model_args

    budget = commands.add_parser("budget", parents=[common],
                                 help="plan the feature caches against the host RAM budget (exit 3 = refuse)")
    add_task_model_args(budget)
    budget.add_argument("--json", action="store_true", help="print the plan as JSON")
    budget.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.commands._common import run_config

    config = run_config(args)  # flags checked before the heavy imports
    from evalsuite.features.budget import BudgetRefused, format_plan
    from evalsuite.features.prepare import plan_splits
    from evalsuite.runner import build_task_and_backbone
    from evalsuite.runtime.devices import resolve_device

    device = resolve_device(config.device)
    config = config.for_device(device.type)
    card, reader, backbone = build_task_and_backbone(config)
    plan = plan_splits(config, card, reader, backbone, device).plan
    print(json.dumps(plan.to_dict(), indent=2, default=str) if args.json else format_plan(plan))
    sys.stdout.flush()
    if plan.decision == "refuse":
        raise BudgetRefused(f"RAM budget: {plan.reason}")
