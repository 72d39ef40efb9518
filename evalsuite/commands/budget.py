"""`evalsuite budget`: plan a run's memory (ram, memmap or refuse) without extracting anything; a card with
official split sizes is planned from them when its data is not on disk yet.

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


def _plan(config, device):
    """From the files under the data root; without one, from the card's official split sizes (no download needed)."""
    from evalsuite.tasks.cards import load_card

    card = load_card(config.task)
    if config.data_root is None and card.data_root is None:
        from evalsuite.features.card_plan import card_sizes, plan_from_card
        from evalsuite.models.backbones import build_backbone

        sizes = card_sizes(card)
        backbone = build_backbone(config.model, config.weights, config.random_init, config.pooling, card.pooling)
        return plan_from_card(config, card, sizes, backbone, device)
    from evalsuite.features.prepare import plan_splits
    from evalsuite.runner import build_task_and_backbone

    card, reader, backbone = build_task_and_backbone(config)
    return plan_splits(config, card, reader, backbone, device).plan


def main(args) -> None:
    from evalsuite.commands._common import run_config

    config = run_config(args)  # flags checked before the heavy imports
    from evalsuite.features.budget import BudgetRefused, format_plan
    from evalsuite.runtime.devices import resolve_device

    device = resolve_device(config.device)
    config = config.for_device(device.type)
    plan = _plan(config, device)
    print(json.dumps(plan.to_dict(), indent=2, default=str) if args.json else format_plan(plan))
    sys.stdout.flush()
    if plan.decision == "refuse":
        raise BudgetRefused(f"RAM budget: {plan.reason}")
