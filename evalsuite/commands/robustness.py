"""`evalsuite robustness`: embedding invariance to stain, blur, JPEG, rotation/flip and scale on a tile task."""

from pathlib import Path

from evalsuite.commands._common import add_task_model_args, run_config
from evalsuite.config import MAX_SEED
from evalsuite.errors import EvalsuiteError
from evalsuite.robustness import DEFAULT_TRANSFORMS, TRANSFORM_NAMES, check_task_kind, parse_transforms


def add_parser(commands, common) -> None:
    robustness = commands.add_parser(
        "robustness", parents=[common],
        help="cosine similarity of clean vs transformed tile embeddings, and the linear probe's metric drop")
    add_task_model_args(robustness)
    robustness.add_argument("--transforms", default="all",
                            help=f"comma-separated transformations out of {', '.join(TRANSFORM_NAMES)}, or all "
                                 f"(default: all = {','.join(DEFAULT_TRANSFORMS)})")
    robustness.add_argument("--seed", type=int, default=0,
                            help="seed of the linear probe and of the transformations' random parameters, 0 to "
                                 f"{MAX_SEED} (default 0)")
    robustness.set_defaults(handler=main)


def main(args) -> None:
    transforms = parse_transforms(args.transforms)  # checked before the heavy imports, like every flag
    if not 0 <= args.seed <= MAX_SEED:  # run's bound: numpy and torch seeds are 32-bit
        raise EvalsuiteError(f"--seed must be a non-negative integer up to {MAX_SEED}, got {args.seed}")
    config = run_config(args, probes=["linear"], seeds=[args.seed])
    from evalsuite.tasks.cards import load_card

    check_task_kind(load_card(args.task))  # a segmentation or slide task is refused before torch loads
    from evalsuite.reporting.table.text_table import format_table
    from evalsuite.robustness.invariance import evaluate, table_rows

    record = evaluate(config, transforms, args.seed)
    if record is None:  # a torchrun rank other than 0: rank 0 reports
        return
    print(f"task {record['task']['name']}  model {record['model']['name']}  run {record['run_id']}  "
          f"precision {record['precision']}  seed {args.seed}  test tiles {record['robustness']['samples']}")
    print(format_table(*table_rows(record)))
    print(f"results: {record['results_path']}")
    print(f"leaderboard: {Path(args.out) / 'leaderboard.csv'}  (probe invariance; "
          f"`evalsuite leaderboard --metric cosine_{transforms[0]}` for the model table)")
