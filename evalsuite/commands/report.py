"""`evalsuite report`: one self-contained HTML page (or a Markdown or LaTeX table) of everything under --out: the
models x tasks overview with intervals, ranks and ties, the overall ranking, per-task plots, calibration, cost and
provenance. A view: it reads the leaderboard, the run JSONs and the stored predictions and changes none of them."""

import sys
from pathlib import Path

from evalsuite.config import DEFAULT_OUT

FORMATS = ("html", "markdown", "latex")
REPORT_FILE = "report.html"


def add_parser(commands, common) -> None:
    report = commands.add_parser("report", parents=[common], help="an HTML report of the leaderboard (or Markdown, "
                                                                  "LaTeX): ranks, ties, costs, provenance")
    report.add_argument("--out", default=DEFAULT_OUT, help=f"folder holding leaderboard.csv (default ./{DEFAULT_OUT})")
    report.add_argument("--html", metavar="FILE", help=f"where the HTML page goes (default <out>/{REPORT_FILE})")
    report.add_argument("--format", choices=FORMATS, default="html",
                        help="html (a file), markdown or latex (printed): default html")
    for name in ("task", "model"):
        report.add_argument(f"--{name}", action="append", default=[], metavar="NAME[,NAME]",
                            help=f"only these {name}s (repeat or comma-separate)")
    report.set_defaults(handler=main)


def _names(values: list) -> tuple:
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


def main(args) -> None:
    from evalsuite.reporting.page.data import collect
    from evalsuite.reporting.table.wide import Filters
    from evalsuite.storage.fsio import check_file_destination

    target = Path(args.html) if args.html else Path(args.out) / REPORT_FILE
    if args.format == "html":
        check_file_destination(target, "--html")  # refused before any work
    report = collect(Path(args.out), Filters(tasks=_names(args.task), models=_names(args.model)))
    if args.format == "markdown":
        from evalsuite.reporting.page.text import markdown_report

        print(markdown_report(report))
    elif args.format == "latex":
        from evalsuite.reporting.page.text import latex_report

        print(latex_report(report))
    else:
        from evalsuite.reporting.page.html import html_report
        from evalsuite.storage.fsio import fs_errors, write_atomically

        page = html_report(report)
        with fs_errors("create", target.parent, "--html"):
            target.parent.mkdir(parents=True, exist_ok=True)
        with fs_errors("write", target, "--html"):  # a full disk: the old page stays, no temp file is left
            write_atomically(target, page.encode())
        print(f"report: {target}")
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
