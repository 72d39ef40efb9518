"""`evalsuite leaderboard`: the model x task table from the long leaderboard CSV."""

from pathlib import Path

from evalsuite.commands._common import DEFAULT_OUT


def add_parser(commands, common) -> None:
    board = commands.add_parser("leaderboard", parents=[common], help="print the model x task table")
    board.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    board.add_argument("--metric", default="balanced_accuracy", help="metric to show (default balanced_accuracy)")
    board.add_argument("--split", default="test", help="split to show (default test)")
    board.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.leaderboard import LEADERBOARD_FILE, format_table, read_rows, summary_table

    header, body = summary_table(read_rows(Path(args.out) / LEADERBOARD_FILE), args.metric, args.split)
    print(f"{args.metric} on {args.split} (mean over seeds; latest run per model/task/probe/seed)")
    print(format_table(header, body))
