"""`evalsuite run`: extract features (cached) and run probes on one task."""

import os
from pathlib import Path

from evalsuite.commands._common import DEFAULT_OUT
from evalsuite.errors import EvalsuiteError

DEFAULT_MODEL = "efficientnet_lite0_imagenet"


def add_parser(commands, common) -> None:
    run = commands.add_parser("run", parents=[common], help="extract features (cached) and run probes on a task")
    run.add_argument("--task", required=True, help="task card name (see `evalsuite list`) or path to a card .yaml")
    run.add_argument("--model", default=DEFAULT_MODEL,
                     help=f"built-in name, timm architecture, or hf-hub:ORG/NAME (default {DEFAULT_MODEL})")
    run.add_argument("--weights", help="local checkpoint (.safetensors, .pth, .bin) for --model's architecture")
    run.add_argument("--random-init", action="store_true", help="randomly initialised backbone (null baseline)")
    run.add_argument("--probes", help="comma-separated probe recipes (default: the card's probes)")
    run.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    run.add_argument("--data-root", help="folder holding the task's data (overrides the card)")
    run.add_argument("--no-count-check", action="store_true",
                     help="do not compare split sizes with the dataset's official counts (for subsets)")
    run.add_argument("--seed", type=int, default=0, help="probe seed (default 0)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    run.add_argument("--batch-size", type=int, default=64, help="extraction batch size (default 64)")
    run.add_argument("--num-workers", type=int, default=min(4, os.cpu_count() or 1),
                     help="DataLoader workers for extraction (default min(4, CPUs))")
    run.add_argument("--no-autocast", action="store_true", help="extract in float32 instead of bf16 autocast")
    run.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.leaderboard import format_table
    from evalsuite.runner import RunConfig, run

    if args.batch_size < 1 or args.num_workers < 0:
        raise EvalsuiteError("--batch-size must be >= 1 and --num-workers >= 0")
    config = RunConfig(
        task=args.task, model=args.model, weights=args.weights, random_init=args.random_init,
        probes=[p.strip() for p in args.probes.split(",") if p.strip()] if args.probes else [],
        out_dir=Path(args.out), seed=args.seed, device=args.device, batch_size=args.batch_size,
        num_workers=args.num_workers, autocast=not args.no_autocast, data_root=args.data_root,
        check_counts=not args.no_count_check,
    )
    record = run(config)
    header = ["probe", "split", "balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr"]
    body = [[r["probe"], split] + [f"{m[name]:.4f}" for name in header[2:]]
            for r in record["probes"] for split, m in r["metrics"].items()]
    print(f"task {record['task']['name']}  model {record['model']['name']}  run {record['run_id']}")
    print(format_table(header, body))
    print(f"results: {record['results_path']}")
    print(f"leaderboard: {Path(args.out) / 'leaderboard.csv'}")
