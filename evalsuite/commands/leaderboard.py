"""`evalsuite leaderboard`: the wide model x task table (ranks, mean over tasks) from the long CSV."""

import sys
from pathlib import Path

from evalsuite.config import DEFAULT_OUT

FORMATS = ("table", "csv", "markdown")


def add_parser(commands, common) -> None:
    board = commands.add_parser("leaderboard", parents=[common], help="the model x task table, ranks and a heatmap")
    board.add_argument("--out", default=DEFAULT_OUT, help=f"folder holding leaderboard.csv (default ./{DEFAULT_OUT})")
    board.add_argument("--metric", help="metric for every task (default: each task's headline, its card's selection_metric)")
    board.add_argument("--split", default="test", help="split to report (default test); probes are chosen on val")
    board.add_argument("--format", choices=FORMATS, default="table", help="stdout format (default table)")
    board.add_argument("--plot", metavar="FILE.png", help="also save a heatmap of the table")
    for name in ("task", "model", "probe"):
        board.add_argument(f"--{name}", action="append", default=[], metavar="NAME[,NAME]",
                           help=f"only these {name}s (repeat or comma-separate)")
    board.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.reporting.leaderboard import LEADERBOARD_FILE, read_rows
    from evalsuite.reporting.views import markdown_table, text_table, wide_csv_text, write_wide_csv
    from evalsuite.reporting.wide import Filters, build_wide_table

    source = Path(args.out) / LEADERBOARD_FILE
    filters = Filters(tasks=_names(args.task), models=_names(args.model), probes=_names(args.probe))
    table = build_wide_table(read_rows(source), args.split, args.metric, filters, source=str(source))
    written = [f"wide table: {write_wide_csv(table, args.out)}"]
    if args.plot:
        from evalsuite.reporting.heatmap import save_heatmap

        written.append(f"heatmap: {save_heatmap(table, Path(args.plot))}")
    # Printed only once every file is written, so a failure is the only line on stderr.
    render = {"table": text_table, "csv": wide_csv_text, "markdown": markdown_table}[args.format]
    print(render(table).rstrip("\n"))
    # Notes and file paths go to stderr so `--format csv > file` stays pure CSV.
    for line in [f"note: {note}" for note in table.notes] + written:
        print(line, file=sys.stderr)


def _names(values: list[str]) -> tuple:
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())
