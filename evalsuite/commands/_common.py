"""Arguments and defaults shared by the commands that build a task + backbone (run, budget)."""

import re
from pathlib import Path

from evalsuite.config import DEFAULT_MODEL, DEFAULT_OUT, RunConfig
from evalsuite.errors import EvalsuiteError
from evalsuite.models.pooling import check_token_rule
from evalsuite.runtime.precision import PRECISIONS
from evalsuite.storage.names import check_weights_label
from evalsuite.tasks.resources import cards_dir, find_yaml, recipes_dir

HUB_NAME = re.compile(r"hf-hub:[^/\s]+/[^/\s]+")


def add_task_model_args(parser) -> None:
    parser.add_argument("--task", required=True, help="task card name (see `evalsuite list`) or path to a card .yaml")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                     help=f"built-in name, timm architecture, or hf-hub:ORG/NAME (default {DEFAULT_MODEL})")
    parser.add_argument("--weights", help="local checkpoint (.safetensors, .pth, .bin) for --model's architecture")
    parser.add_argument("--random-init", action="store_true", help="randomly initialised backbone (null baseline)")
    parser.add_argument("--pooling", help="classification embedding of a ViT: cls, cls+mean_patch or mean_patch "
                                          "(default: the task card's, else the model card's; eva's leaderboard "
                                          "uses cls)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    parser.add_argument("--data-root", help="folder holding the task's data (overrides the card)")
    parser.add_argument("--no-count-check", action="store_true",
                     help="do not compare split sizes with the dataset's official counts (for subsets)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="extraction batch size (default 64 on a GPU, 16 on the CPU)")
    parser.add_argument("--num-workers", type=int, default=None,
                        help="DataLoader workers for extraction (default: beside a GPU, the process's CPUs - 1, at "
                             "most 12; beside a CPU forward min(4, CPUs - 1), and 0 with 2 or fewer CPUs per process, "
                             "where a worker would slow the forward more than decoding in the main process costs)")
    parser.add_argument("--cache", choices=["auto", "ram", "memmap"], default="auto",
                     help="hold feature caches in host RAM or memory-mapped from disk (default auto: the RAM "
                          "budget planner decides; forcing ram over budget is refused)")
    parser.add_argument("--mem", help="memory limit to plan for, e.g. 85G (default: the smallest of the Slurm "
                                   "allocation, the cgroup limit and MemAvailable)")
    parser.add_argument("--chunk-rows", type=int, help="samples per extraction chunk, the unit of resume "
                                                    "(default: up to 4096, at most 256 MiB)")
    parser.add_argument("--precision", choices=PRECISIONS, default=None,
                        help="compute precision of the backbone (default auto: bf16 autocast on GPUs and CPUs with "
                             "native bf16, fp16 on GPUs without it, float32 elsewhere or where the model pins it; "
                             "device: the same without the model's pin); features are cached as float16 whatever "
                             "this is")
    parser.add_argument("--no-autocast", action="store_true", help="same as --precision fp32")
    parser.add_argument("--skip-bad-slides", action="store_true",
                        help="slide tasks: leave out a slide that is missing, unreadable, without MPP or without "
                             "tissue (listed in the run JSON) instead of stopping")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads for the forward pass and the probes (default 0: every CPU "
                             "this process may use, e.g. the Slurm allocation's)")


def _precision(args) -> str:
    if args.no_autocast and args.precision not in (None, "fp32"):
        raise EvalsuiteError(f"--no-autocast means --precision fp32; it contradicts --precision {args.precision}")
    return "fp32" if args.no_autocast else (args.precision or "auto")


def check_names(args, probes: list) -> None:
    """Task, recipe and model names that a file lookup or a pattern can refute, checked before the runner's
    imports (torch, timm, scikit-learn: seconds), so a typo is answered at once. A timm architecture name
    needs timm itself and is checked when the backbone is built."""
    find_yaml(args.task, cards_dir(), "task card", "task")
    for name in probes:
        find_yaml(name, recipes_dir(), "probe recipe", "probe")
    if args.weights and args.random_init:
        raise EvalsuiteError("--weights and --random-init exclude each other; pass one")
    if args.model.startswith("hf-hub:") and not HUB_NAME.fullmatch(args.model):
        raise EvalsuiteError(f"--model {args.model}: a hub model is named hf-hub:ORG/NAME, e.g. "
                             f"hf-hub:bioptimus/H-optimus-0")
    if args.model.startswith("hf-hub:") and (args.weights or args.random_init):
        raise EvalsuiteError(f"'{args.model}' is resolved on the hub; with --weights or --random-init pass its timm "
                             f"architecture name instead")
    if args.weights and getattr(args, "label", None) is None:  # the label is a cell of every table
        check_weights_label(args.model, args.weights, label_flag=hasattr(args, "label"))


def run_config(args, **extra):
    """A RunConfig from parsed task/model arguments (plus command-specific fields).

    The arguments are checked before the runner (torch, timm, scikit-learn: seconds of imports)
    is loaded, so a mistyped flag is answered at once."""
    at_least_one = (args.batch_size, args.chunk_rows)
    if any(v is not None and v < 1 for v in at_least_one) or (args.num_workers or 0) < 0 or args.threads < 0:
        raise EvalsuiteError("--batch-size and --chunk-rows must be >= 1, --num-workers and --threads >= 0")
    if args.pooling is not None:
        check_token_rule(args.pooling, "--pooling")
    precision = _precision(args)
    check_names(args, extra.get("probes") or [])
    return RunConfig(
        task=args.task, model=args.model, weights=args.weights, random_init=args.random_init, pooling=args.pooling,
        out_dir=Path(args.out), device=args.device, batch_size=args.batch_size, num_workers=args.num_workers,
        precision=precision, threads=args.threads, data_root=args.data_root, check_counts=not args.no_count_check,
        cache=args.cache, mem=args.mem, chunk_rows=args.chunk_rows, skip_bad_slides=args.skip_bad_slides,
        **extra,
    )
