"""`evalsuite leaderboard`: the wide model x task table (intervals, ranks, rank intervals, best sets, mean over
tasks) from the long CSV, or with `--compare A B` the per-task paired significance test of two models."""

import sys
from pathlib import Path

from evalsuite.config import DEFAULT_OUT
from evalsuite.errors import EvalsuiteError

FORMATS = ("table", "csv", "markdown")


def add_parser(commands, common) -> None:
    board = commands.add_parser("leaderboard", parents=[common], help="the model x task table, ranks and a heatmap")
    board.add_argument("--out", default=DEFAULT_OUT, help=f"folder holding leaderboard.csv (default ./{DEFAULT_OUT})")
    board.add_argument("--metric", help="metric for every task (default: each task's headline, its card's "
                                        "selection_metric); throughput_img_s or forward_img_s show extraction speed")
    board.add_argument("--split", default="test", help="split to report (default test); probes are chosen on val")
    board.add_argument("--format", choices=FORMATS, default="table", help="stdout format (default table)")
    board.add_argument("--plot", metavar="FILE.png", help="also save a heatmap of the table")
    board.add_argument("--compare", nargs=2, metavar=("A", "B"),
                       help="instead of the table: per task, a paired test of models A and B on the same test items "
                            "(step-down max-t adjusted over the tasks; docs/significance.md); MODEL@PROBE compares "
                            "one probe's runs, e.g. two probes of one model")
    for name in ("task", "model", "probe"):
        board.add_argument(f"--{name}", action="append", default=[], metavar="NAME[,NAME]",
                           help=f"only these {name}s (repeat or comma-separate)")
    board.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.reporting.statistics.column_statistics import add_column_statistics
    from evalsuite.reporting.table.precisions import mixed_precision_note
    from evalsuite.reporting.table.wide import Filters, build_wide_table
    from evalsuite.reporting.views.formats import markdown_table, text_table, wide_csv_text
    from evalsuite.results.commit import repair_half_commits
    from evalsuite.results.leaderboard import LEADERBOARD_FILE, read_rows
    from evalsuite.results.published import add_published
    from evalsuite.storage.fsio import check_file_destination

    source = Path(args.out) / LEADERBOARD_FILE
    for note in repair_half_commits(args.out):  # rows of a run killed while committing name a run JSON not in place
        print(f"note: {note}", file=sys.stderr)
    if args.compare:
        _compare(args, source)
        return
    filters = Filters(tasks=_names(args.task), models=_names(args.model), probes=_names(args.probe))
    rows = read_rows(source)
    table = build_wide_table(rows, args.split, args.metric, filters, source=str(source), out_dir=args.out)
    table.notes += _left_out_probe_notes(rows, table, filters, args.metric)
    table.notes += filter(None, [mixed_precision_note(table)])  # one line: which columns mix precisions
    if args.split == "test":  # predictions are stored for the test split only
        table = add_column_statistics(table, args.out)
    add_published(table)  # the peers' figures beside the user's cells of the same model and task (test only)
    if args.plot:  # before the wide CSV is written: a refused --plot leaves nothing behind
        check_file_destination(Path(args.plot), "--plot")
    written = [_write_wide(table, args.out)]
    if args.plot:
        from evalsuite.reporting.views.heatmap import save_heatmap

        written.append(f"heatmap: {save_heatmap(table, Path(args.plot))}")
    # Printed only once every file is written, so a failure is the only line on stderr.
    render = {"table": text_table, "csv": wide_csv_text, "markdown": markdown_table}[args.format]
    print(render(table).rstrip("\n"))
    # Notes and file paths go to stderr so `--format csv > file` stays pure CSV.
    for line in [f"note: {note}" for note in table.notes] + written:
        print(line, file=sys.stderr)


def _left_out_probe_notes(rows: list, table, filters, metric: str | None) -> list[str]:
    """Why a probe has no cell: none of its rows holds the metric shown (`invariance` rows hold cosine_* and
    *_delta_*, not the headline), so an empty table says what to pass instead of printing nothing."""
    from evalsuite.reporting.table.wide import RUN_COLUMN_METRICS

    if metric in RUN_COLUMN_METRICS:  # a run's column, present on every row of the run
        return []
    wanted = (("task", filters.tasks), ("model", filters.models), ("probe", filters.probes))
    kept = [r for r in rows if all(not names or r[column] in names for column, names in wanted)]
    shown = ", ".join(sorted(set(table.metrics.values())))
    notes = []
    for probe in sorted({r["probe"] for r in kept}):
        mine = [r for r in kept if r["probe"] == probe and r["split"] == table.split]
        if any(r["metric"] == table.metrics.get(r["task"]) for r in mine):
            continue
        held = sorted({r["metric"] for r in mine})
        where = f"its {table.split} rows hold {_some(held)}; pass --metric {held[0]}" if held else \
            f"it has no {table.split} rows; pass --split with one it has"
        empty = "the table is empty: " if not table.rows else ""
        notes.append(f"{empty}probe '{probe}' has no {shown} rows on the {table.split} split, so it has no cell; "
                     f"{where} --probe {probe}")
    return notes


def _some(names: list, most: int = 4) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _write_wide(table, out: str) -> str:
    """Where the wide CSV went, or why not: a read-only results folder still has a table to print."""
    from evalsuite.reporting.views.formats import WIDE_FILE, write_wide_csv

    try:
        return f"wide table: {write_wide_csv(table, out)}"
    except EvalsuiteError as exc:
        return f"note: {WIDE_FILE} not written ({exc})"


def _compare(args, source: Path) -> None:
    from evalsuite.reporting.statistics.compare import compare_models, comparison_text
    from evalsuite.reporting.table.wide import Filters, build_wide_table
    from evalsuite.results.leaderboard import read_rows

    if args.split != "test" or args.plot or args.format != "table" or _names(args.model):
        raise EvalsuiteError("--compare A B prints one table on the test split; drop --split, --plot, --format "
                             "and --model")
    a, b = args.compare
    rows = read_rows(source)
    rows = [row for name in dict.fromkeys((a, b)) for row in _side_rows(rows, name, source)]  # A A: no difference
    filters = Filters(tasks=_names(args.task), models=(a, b), probes=_names(args.probe))
    table = build_wide_table(rows, "test", args.metric, filters, source=str(source), out_dir=args.out)
    for name in dict.fromkeys((a, b)):
        _check_side_shown(name, table, [row for row in rows if row["model"] == name], source)
    comparison = compare_models(table, args.out, a, b, source=str(source))
    print(comparison_text(comparison))
    for note in table.notes + comparison.notes:
        print(f"note: {note}", file=sys.stderr)


def _side_rows(rows: list, name: str, source: Path) -> list:
    """The rows one side of --compare reads: a model's, or with MODEL@PROBE that probe's, named `name` so that two
    probes of one model are two rows of the table. Checked before the filters, which would report a filter problem."""
    known = {row["model"] for row in rows}
    model, _, probe = name.rpartition("@") if name not in known and "@" in name else (name, "", "")
    if name not in known and "@" in name and not (model and probe):  # 'MODEL@' would compare the plain model
        raise EvalsuiteError(f"--compare '{name}' names no {'probe' if model else 'model'}; pass MODEL@PROBE or "
                             "MODEL")
    if model not in known:
        raise EvalsuiteError(f"unknown model '{model}' in {source}; it has: {', '.join(sorted(known))}")
    mine = [row for row in rows if row["model"] == model]
    chosen = [row for row in mine if row["probe"] == probe] if probe else mine
    if not chosen:
        probes = ", ".join(sorted({row["probe"] for row in mine}))
        raise EvalsuiteError(f"model '{model}' has no '{probe}' runs in {source}; its probes: {probes}")
    return [{**row, "model": name} for row in chosen]


def _check_side_shown(name: str, table, side_rows: list, source: Path) -> None:
    """One side of --compare with no cell in the table: its test rows hold other metrics than the one compared (a
    text_retrieval probe holds text_retrieval_* only), so say which, and --metric, rather than 'unknown model'."""
    if any(row.model == name for row in table.rows):
        return
    shown = ", ".join(sorted(set(table.metrics.values()))) or "the compared metric"
    held = sorted({row["metric"] for row in side_rows if row["split"] == "test"
                   and (not table.tasks or row["task"] in table.tasks)})
    where = f"its test rows hold {_some(held)}; pass --metric {held[0]} (or another of them)" if held else \
        "it has no test rows on these tasks"
    raise EvalsuiteError(f"--compare '{name}' has no {shown} rows on the test split in {source}: {where}")


def _names(values: list[str]) -> tuple:
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())
