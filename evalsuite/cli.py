"""Command line: `evalsuite run | list | leaderboard` (also `python -m evalsuite ...`).

User errors are one line on stderr and exit code 2; unexpected errors are one line and exit
code 1; `--debug` shows the traceback instead.
"""

import argparse
import os
import sys
from pathlib import Path

from evalsuite.errors import EvalsuiteError

DEFAULT_OUT = "evalsuite_out"
DEFAULT_MODEL = "efficientnet_lite0_imagenet"


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    parser = argparse.ArgumentParser(prog="evalsuite", parents=[common],
                                     description="Frozen-backbone probe evaluation for pathology foundation models.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", parents=[common], help="extract features (cached) and run probes on a task")
    run.add_argument("--task", required=True, help="task card name (see `evalsuite list`) or path to a card .yaml")
    run.add_argument("--model", default=DEFAULT_MODEL,
                     help=f"built-in name, timm architecture, or hf-hub:ORG/NAME (default {DEFAULT_MODEL})")
    run.add_argument("--weights", help="local checkpoint (.safetensors, .pth, .bin) for --model's architecture")
    run.add_argument("--random-init", action="store_true", help="randomly initialised backbone (null baseline)")
    run.add_argument("--probes", help="comma-separated probe recipes (default: the card's probes)")
    run.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    run.add_argument("--data-root", help="folder holding the task's data (overrides the card)")
    run.add_argument("--seed", type=int, default=0, help="probe seed (default 0)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    run.add_argument("--batch-size", type=int, default=64, help="extraction batch size (default 64)")
    run.add_argument("--num-workers", type=int, default=min(4, os.cpu_count() or 1),
                     help="DataLoader workers for extraction (default min(4, CPUs))")
    run.add_argument("--no-autocast", action="store_true", help="extract in float32 instead of bf16 autocast")

    listing = commands.add_parser("list", parents=[common], help="list tasks, probes and built-in models")
    listing.add_argument("what", nargs="?", choices=["tasks", "probes", "models"], help="only this kind")

    board = commands.add_parser("leaderboard", parents=[common], help="print the model x task table")
    board.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    board.add_argument("--metric", default="balanced_accuracy", help="metric to show (default balanced_accuracy)")
    board.add_argument("--split", default="test", help="split to show (default test)")
    return parser


def _cmd_run(args) -> None:
    from evalsuite.leaderboard import format_table
    from evalsuite.runner import RunConfig, run

    if args.batch_size < 1 or args.num_workers < 0:
        raise EvalsuiteError("--batch-size must be >= 1 and --num-workers >= 0")
    config = RunConfig(
        task=args.task, model=args.model, weights=args.weights, random_init=args.random_init,
        probes=[p.strip() for p in args.probes.split(",") if p.strip()] if args.probes else [],
        out_dir=Path(args.out), seed=args.seed, device=args.device, batch_size=args.batch_size,
        num_workers=args.num_workers, autocast=not args.no_autocast, data_root=args.data_root,
    )
    record = run(config)
    header = ["probe", "split", "balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr"]
    body = [[r["probe"], split] + [f"{m[name]:.4f}" for name in header[2:]]
            for r in record["probes"] for split, m in r["metrics"].items()]
    print(f"task {record['task']['name']}  model {record['model']['name']}  run {record['run_id']}")
    print(format_table(header, body))
    print(f"results: {record['results_path']}")
    print(f"leaderboard: {Path(args.out) / 'leaderboard.csv'}")


def _cmd_list(args) -> None:
    from evalsuite.model_registry import MODELS
    from evalsuite.resources import cards_dir, recipes_dir, yaml_names

    sections = {
        "tasks": yaml_names(cards_dir()),
        "probes": yaml_names(recipes_dir()),
        "models": [f"{name}  ({entry.architecture}, {entry.source}; {entry.licence})" for name, entry in MODELS.items()]
        + ["any timm architecture name, hf-hub:ORG/NAME, or ARCH --weights FILE"],
    }
    for section, names in sections.items():
        if args.what in (None, section):
            print(f"{section}:")
            print("\n".join(f"  {name}" for name in names))


def _cmd_leaderboard(args) -> None:
    from evalsuite.leaderboard import LEADERBOARD_FILE, format_table, read_rows, summary_table

    header, body = summary_table(read_rows(Path(args.out) / LEADERBOARD_FILE), args.metric, args.split)
    print(f"{args.metric} on {args.split} (mean over seeds; latest run per model/task/probe/seed)")
    print(format_table(header, body))


COMMANDS = {"run": _cmd_run, "list": _cmd_list, "leaderboard": _cmd_leaderboard}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        COMMANDS[args.command](args)
    except EvalsuiteError as exc:
        if args.debug:
            raise
        print(f"evalsuite: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("evalsuite: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for users; --debug shows the traceback
        if args.debug:
            raise
        print(f"evalsuite: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1
    return 0
