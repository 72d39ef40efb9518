"""Renderings of a WideTable: `leaderboard_wide.csv` (numbers, for pandas), a text table and Markdown (for people).

Where the runs stored test predictions, a cell also shows its 95 % bootstrap rank interval, and a trailing `~`
marks a model whose interval overlaps the task leader's: on these test items it is not separable from the best
(evalsuite.reporting.compare.overlaps_leader, docs/significance.md)."""

import csv
import io
from collections import defaultdict
from pathlib import Path

from evalsuite.reporting.compare import overlaps_leader
from evalsuite.reporting.leaderboard import format_table
from evalsuite.reporting.wide import Cell, WideTable
from evalsuite.storage.fsio import fs_errors, write_atomically

WIDE_FILE = "leaderboard_wide.csv"
# Per task, in this order after the task's mean column (named after the task itself).
TASK_FIELDS = ("std", "n_seeds", "rank", "probe", "metric", "rank_low", "rank_high")


def wide_csv_text(table: WideTable) -> str:
    header = ["model", "split", "rank_sum", "mean_over_tasks", "n_tasks"]
    header += [name for task in table.tasks for name in [task] + [f"{task}_{f}" for f in TASK_FIELDS]]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header + ["weights_id"])
    for row in table.rows:
        fields = [row.model, table.split, _number(row.rank_sum, "g"), _number(row.mean_over_tasks), len(row.cells)]
        for task in table.tasks:
            fields += _cell_fields(row.cells.get(task), table.metrics[task])
        writer.writerow(fields + [";".join(row.weights_ids)])
    return buffer.getvalue()


def _cell_fields(cell: Cell | None, metric: str) -> list:
    if cell is None:
        return ["", "", "", "", "", metric, "", ""]
    low, high = cell.rank_interval or (None, None)
    return [_number(cell.mean), _number(cell.std), len(cell.seeds), _number(cell.rank, "g"), cell.probe, metric,
            _number(low, "g"), _number(high, "g")]


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
    return "\n".join(_legend(table) + [format_table(*_display_rows(table))])


def markdown_table(table: WideTable) -> str:
    header, body = _display_rows(table)
    lines = [_markdown_line(header), "|" + "|".join(" --- " for _ in header) + "|"]
    lines += [_markdown_line(row) for row in body]
    return "\n".join([f"_{line}_" for line in _legend(table)] + [""] + lines)


def _markdown_line(cells: list) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _legend(table: WideTable) -> list[str]:
    tasks_by_metric = defaultdict(list)
    for task in table.tasks:
        tasks_by_metric[table.metrics[task]].append(task)
    metrics = "; ".join(f"{metric} ({', '.join(tasks)})" for metric, tasks in tasks_by_metric.items())
    legend = [f"{table.split} split, {metrics}",
              "cell: mean ± sample std over seeds [probe chosen on val, seeds, rank]; "
              "latest run per model/task/probe/seed"]
    if any(cell.rank_interval for row in table.rows for cell in row.cells.values()):
        legend.append("#rank (low-high): 95 % bootstrap rank interval over test items; "
                      "~ its interval overlaps the task leader's (not separable from the best)")
    return legend


def _display_rows(table: WideTable) -> tuple[list, list]:
    header = ["model", "rank_sum", "mean_over_tasks"] + table.tasks
    body = [[row.model, _number(row.rank_sum, "g") or "-", _number(row.mean_over_tasks, ".4f") or "-"]
            + [_cell_text(table, task, row.model, row.cells.get(task)) for task in table.tasks] for row in table.rows]
    return header, body


def _cell_text(table: WideTable, task: str, model: str, cell: Cell | None) -> str:
    if cell is None:
        return "-"
    spread = "" if cell.std is None else f" ± {cell.std:.4f}"
    interval = f" ({cell.rank_interval[0]:g}-{cell.rank_interval[1]:g})" if cell.rank_interval else ""
    mark = "~" if overlaps_leader(table, task, model) else ""
    return f"{cell.mean:.4f}{spread} [{cell.probe}, {len(cell.seeds)}, #{cell.rank:g}{interval}]{mark}"
