"""Renderings of a WideTable: `leaderboard_wide.csv` (numbers, for pandas), a text table and Markdown (for people).

A cell shows its mean over seeds, the 95 % interval of that mean, and where the column's runs stored test
predictions its 95 % bootstrap rank interval and a trailing mark: `*` in the column's 95 % model confidence set
(cannot be told apart from the best), `?` the column could not be tested (a note says why); no mark: outside the
set. An interval with a note (metrics/shown_intervals.py: exact, bias-corrected, lopsided) carries NOTED, and the
legend says how many clusters each column's statements rest on, which columns the mean rank runs over (those with two
or more models) and what precision the cells' backbones computed in (`TASK_precision` in the CSV).
reporting/statistics/column_statistics.py computes them; docs/significance.md has the procedures."""

import csv
import io
import math
from pathlib import Path

from evalsuite.reporting.table.markdown import escape_markdown
from evalsuite.reporting.table.precisions import precision_legend
from evalsuite.reporting.table.published_columns import (
    published_fields,
    published_header,
    published_markdown,
    published_text,
)
from evalsuite.reporting.table.task_groups import left_out_text, mean_column_name, mean_groups
from evalsuite.reporting.table.text_table import format_table
from evalsuite.reporting.table.wide import Cell, WideTable, ranked_tasks
from evalsuite.storage.fsio import fs_errors, write_atomically

WIDE_FILE = "leaderboard_wide.csv"
# Per task, in this order after the task's mean column (named after the task itself).
TASK_FIELDS = ("std", "n_seeds", "rank", "probe", "metric", "rank_low", "rank_high", "ci_low", "ci_high",
               "in_best_set", "best_set_p", "clusters", "precision")
IN_SET, UNTESTED, NOTED = "*", "?", "†"


def wide_csv_text(table: WideTable) -> str:
    means = mean_columns(table)
    header = ["model", "split", "rank_sum", "mean_rank", "n_tasks", "mean_rank_low", "mean_rank_high", "ranked_tasks",
              *means]
    header += [name for task in table.tasks for name in [task] + [f"{task}_{f}" for f in TASK_FIELDS]]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header + ["weights_id", *published_header(table)])
    ranked = ";".join(ranked_tasks(table))  # the columns a rank sum runs over (two or more models)
    for row in table.rows:
        low, high = row.mean_rank_interval or (None, None)
        fields = [row.model, table.split, _number(row.rank_sum, "g"), _number(mean_rank(row, table)), len(row.cells),
                  _number(low, "g"), _number(high, "g"), ranked if row.rank_sum is not None else "",
                  *(_number(row.metric_means.get(m)) for m in means.values())]
        for task in table.tasks:
            fields += _cell_fields(row.cells.get(task), table.metrics[task], table.clusters.get(task))
        writer.writerow(fields + [";".join(row.weights_ids), *published_fields(table, row.model)])
    return buffer.getvalue()


def _cell_fields(cell: Cell | None, metric: str, clusters: tuple | None) -> list:
    count = "" if clusters is None else clusters[0]
    if cell is None:
        return ["", "", "", "", "", metric] + [""] * 6 + [count, ""]
    low, high = cell.rank_interval or (None, None)
    ci_low, ci_high = cell.interval or (None, None)
    in_set = "" if cell.best_set is None else int(cell.best_set)
    return [_number(cell.mean), _number(cell.std), len(cell.seeds), _number(cell.rank, "g"), cell.probe, metric,
            _number(low, "g"), _number(high, "g"), _number(ci_low), _number(ci_high), in_set,
            _number(cell.best_set_p, ".4g"), count, cell.precision]


def mean_rank(row, table: WideTable) -> float | None:
    """The model's mean rank over the ranked tasks: the one figure over tasks of different metrics (None: a task
    missing). Only columns with two or more models and a finite mean count (wide.ranked_tasks)."""
    return None if row.rank_sum is None else row.rank_sum / len(ranked_tasks(table))


def mean_columns(table: WideTable) -> dict:
    """{column name: ModelRow.metric_means key} of the means of scores, one per metric and task kind shown by two or
    more tasks, named for them (`mean_balanced_accuracy_over_3_tasks`, `..._over_2_slide_tasks` where the metric spans
    kinds): a mean never runs over two metrics or two kinds of task (task_groups.py)."""
    groups = mean_groups(table.tasks, table.metrics, table.kinds)
    return {mean_column_name(key, group): key for key, group in groups.items() if len(group[2]) > 1}


def _number(value: float | None, spec: str = ".6f") -> str:
    return "" if value is None else format(value, spec)


def write_wide_csv(table: WideTable, out_dir: Path) -> Path:
    """Written next to leaderboard.csv via a rename, so a concurrent reader never sees half a file;
    a file-system fault is a one-line error and leaves the previous file and no temp file."""
    path = Path(out_dir) / WIDE_FILE
    with fs_errors("write", path):
        write_atomically(path, wide_csv_text(table).encode())
    return path


def text_table(table: WideTable) -> str:
    return "\n".join(_legend(table) + [format_table(*_display_rows(table))]) + published_text(table)


def markdown_table(table: WideTable) -> str:
    header, body = _display_rows(table)
    fixed = len(header) - len(table.tasks)  # the fixed column names; the task names after them are labels
    header = [*map(_pipes, header[:fixed]), *map(escape_markdown, header[fixed:])]
    lines = [_markdown_line(header), "|" + "|".join(" --- " for _ in header) + "|"]
    lines += [_markdown_line([escape_markdown(row[0]), *map(_pipes, row[1:])]) for row in body]  # row[0]: a label
    return "\n".join([f"_{line}_" for line in _legend(table)] + [""] + lines) + published_markdown(table)


def _markdown_line(cells: list) -> str:
    return "| " + " | ".join(cells) + " |"


def _pipes(text) -> str:
    """A cell made here (numbers, probe, marks): only a `|` in it would end it."""
    return str(text).replace("|", "\\|")


def _legend(table: WideTable) -> list[str]:
    groups = {}
    for task in table.tasks:
        groups.setdefault(table.metrics[task], []).append(task)
    metrics = "; ".join(f"{metric} ({', '.join(tasks)})" for metric, tasks in groups.items())
    legend = [f"{table.split} split, {metrics}", _mean_rank_legend(table),
              "cell: mean ± sample std over seeds [95 % interval of the mean] [probe chosen on val, seeds, rank]; "
              "latest run per model/task/probe/seed"]
    cells = [cell for row in table.rows for cell in row.cells.values()]
    if any(cell.rank_interval for cell in cells):
        legend.append("#rank (low-high): 95 % bootstrap rank interval over test items")
    if any(cell.best_set is not None or cell.untested for cell in cells):
        legend.append(f"{IN_SET} in the column's 95 % model confidence set (cannot be told apart from the best; "
                      f"no mark: outside it); {UNTESTED} not tested (a note says why)")
    if any(cell.interval_note for cell in cells):
        legend.append(f"{NOTED} after an interval: a note says how to read it")
    if table.clusters:
        legend.append(f"clusters the intervals, ranks and marks rest on: {clusters_text(table)}")
    return legend + list(filter(None, [precision_legend(table)]))


def _mean_rank_legend(table: WideTable) -> str:
    """Which columns rank_sum and mean_rank run over (two or more models), and what the mean columns average."""
    used, left = ranked_tasks(table), left_out_text(table)
    over = f"over {', '.join(used)}" if used else "over no column (none has two models)"
    return (f"mean_rank: mean of the model's ranks (1 = best) {over}, the columns with two or more models"
            + (f" ({left})" if left else "")
            + "; a mean_<metric>_over_<n>_tasks column averages scores only over tasks of that metric and task kind")


def clusters_text(table: WideTable) -> str:
    """"demo 1000 tiles, demo_counts 5 blocks": each tested column's test-split cluster count."""
    return ", ".join(f"{task} {count} {unit}{'s' if count != 1 else ''}" for task, (count, unit) in
                     table.clusters.items())


def _display_rows(table: WideTable) -> tuple[list, list]:
    means = mean_columns(table)
    header = ["model", "rank_sum", "mean_rank", *means] + table.tasks
    body = [[row.model, _number(row.rank_sum, "g") or "-", _number(mean_rank(row, table), ".2f") or "-",
             *(_number(row.metric_means.get(metric), ".4f") or "-" for metric in means.values())]
            + [cell_text(row.cells.get(task)) for task in table.tasks] for row in table.rows]
    return header, body


def cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    spread = "" if cell.std is None else f" ± {cell.std:.4f}"
    bounds = f" [{cell.interval[0]:.4f}, {cell.interval[1]:.4f}]{NOTED if cell.interval_note else ''}" \
        if cell.interval else ""
    interval = f" ({cell.rank_interval[0]:g}-{cell.rank_interval[1]:g})" if cell.rank_interval else ""
    mark = UNTESTED if cell.untested else IN_SET if cell.best_set else ""
    rank = "-" if math.isnan(cell.rank) else f"{cell.rank:g}"  # a column without a finite mean is not ranked
    return f"{cell.mean:.4f}{spread}{bounds} [{cell.probe}, {len(cell.seeds)}, #{rank}{interval}]{mark}"
