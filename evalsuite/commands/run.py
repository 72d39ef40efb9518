"""`evalsuite run`: extract features (cached) and run probes on one task."""

import sys
from pathlib import Path

from evalsuite.commands._common import add_task_model_args, run_config


def add_parser(commands, common) -> None:
    run = commands.add_parser("run", parents=[common], help="extract features (cached) and run probes on a task")
    add_task_model_args(run)
    # Repeating the flag adds to the list (argparse would keep only the last one, silently dropping the others).
    run.add_argument("--probes", action="append", help="comma-separated probe recipes (default: the card's probes); "
                     "may be repeated")
    run.add_argument("--seed", type=int, default=0, help="probe seed, 0 to 4294967295 (default 0)")
    run.add_argument("--seeds", help="comma-separated probe seeds, e.g. 0,1,2,3,4: probes are trained and scored "
                                     "once per seed, one set of leaderboard rows each (overrides --seed)")
    run.add_argument("--label", help="the leaderboard's model column, up to 100 letters, digits, '_', '.', '+' or '-' "
                                      "(default: the model's name, with +random-init or +<weights file stem>); tells "
                                      "checkpoints of one architecture apart")
    run.add_argument("--plots", action="store_true",
                     help="classification tasks: also save a reliability diagram (calibration) PNG per probe and "
                          "seed beside the run JSON")
    run.set_defaults(handler=main)


def _seeds(args) -> list[int]:
    from evalsuite.config import MAX_SEED
    from evalsuite.errors import EvalsuiteError

    if args.seeds is None:
        if not 0 <= args.seed <= MAX_SEED:
            raise EvalsuiteError(f"--seed must be a non-negative integer up to {MAX_SEED}, got {args.seed}")
        return [args.seed]
    items = [part.strip() for part in args.seeds.split(",")]
    # An empty item (0,,1) or a sign (-1) is a typo; `²` is a digit to isdigit() but not to int().
    if not all(item.isascii() and item.isdigit() and len(item) <= len(str(MAX_SEED)) and int(item) <= MAX_SEED
               for item in items):
        raise EvalsuiteError(f"--seeds takes comma-separated non-negative integers up to {MAX_SEED} such as 0,1,2, "
                             f"got '{args.seeds}'")
    seeds = [int(item) for item in items]
    if len(set(seeds)) != len(seeds):
        raise EvalsuiteError(f"--seeds needs distinct integers, got '{args.seeds}'")
    return seeds


def main(args) -> None:
    from evalsuite.storage.names import check_identifier

    named = [p.strip() for value in args.probes or [] for p in value.split(",") if p.strip()]
    probes = list(dict.fromkeys(named))  # a recipe named twice runs once
    if args.label is not None:  # a cell of every table: a line break or comma would break them
        check_identifier(args.label, "--label", "uni2-h-ft", label=True)
    # Flags are checked before the heavy imports.
    config = run_config(args, probes=probes, seeds=_seeds(args), plots=args.plots, label=args.label)
    from evalsuite.runtime.stages import say

    say(f"run: task {config.task}, model {config.model}: importing torch, building the task and the backbone")
    from evalsuite.reporting.views.summary import summary_lines
    from evalsuite.results.commit import repair_half_commits
    from evalsuite.runner import run

    for note in repair_half_commits(config.out_dir):  # a run killed while committing, said before hours of work
        print(f"note: {note}", file=sys.stderr)
    record = run(config)
    if record is None:  # a torchrun rank other than 0: rank 0 reports
        return
    print(f"task {record['task']['name']}  model {record['model']['name']}  run {record['run_id']}  "
          f"device {record['device']}  precision {record['precision']}  cache {record['cache']['mode']}")
    print("\n".join(summary_lines(record)))  # one table for all seeds: mean ± std and the test interval
    if record.get("intervals_note"):
        print(f"note: {record['intervals_note']}")
    from evalsuite.probes.texts.zeroshot import chance_level_note

    if chance_level_note(record):  # a random-init zero-shot run must not read as a model's score
        print(f"note: {chance_level_note(record)}")
    if record["model"].get("tile_encoder") and str(record["model"]["weights_id"]).startswith("random-init"):
        print(f"note: {record['model']['name']} ran with random weights (--random-init): its tile encoder and slide "
              "encoder are untrained, so its numbers are chance level (they test the pipeline, not the model); for "
              "real numbers pass --weights with the slide encoder's checkpoint (docs/slide_encoders.md)")
    print(f"results: {record['results_path']}")
    for plot in record.get("plots", []):
        print(f"reliability diagram: {plot}")
    print(f"leaderboard: {Path(args.out) / 'leaderboard.csv'}")
