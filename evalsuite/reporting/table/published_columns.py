"""The peers' published figures in the leaderboard's renderings: three columns per task in the wide CSV (and so in
`load_wide`), and a block under the text and Markdown tables, one line per cell that has one.

The columns exist only for tasks where a shown cell has a figure (results/published.py), so a leaderboard of models
and tasks no peer published keeps its columns unchanged. They come after `weights_id`, the wide CSV's last column
before them, so a reader that takes columns by name is unaffected.
"""

from evalsuite.reporting.table.markdown import escape_markdown
from evalsuite.reporting.table.text_table import format_table

FIELDS = ("published", "published_source", "published_difference")
TITLE = ("published figures beside your rows: the peers' own runs under their own protocols, copied as published; "
         "not ranked, not in any mean or best set")
HEADER = ["model", "task", "metric", "yours", "published", "source", "how the peer's protocol differs"]


def published_tasks(table) -> list:
    """The tasks, in the table's order, where a shown cell has a published figure."""
    held = {task for _, task in getattr(table, "published", {})}
    return [task for task in table.tasks if task in held]


def published_header(table) -> list:
    return [f"{task}_{name}" for task in published_tasks(table) for name in FIELDS]


def published_fields(table, model: str) -> list:
    """The model's published columns: value as published, its source line and the protocol difference."""
    fields = []
    for task in published_tasks(table):
        figure = table.published.get((model, task))
        fields += [figure.value_text, figure.source(), figure.difference()] if figure else ["", "", ""]
    return fields


def _body(table) -> list:
    return [[row.model, task, table.metrics[task], f"{row.cells[task].mean:.4f}", figure.value_text, figure.source(),
             figure.difference()]
            for row in table.rows for task in table.tasks
            for figure in [getattr(table, "published", {}).get((row.model, task))] if figure]


def published_text(table) -> str:
    """The block under the text table ("" when no shown cell has a figure)."""
    body = _body(table)
    return f"\n\n{TITLE}\n{format_table(HEADER, body)}" if body else ""


def published_markdown(table) -> str:
    body = _body(table)
    if not body:
        return ""
    lines = [f"_{TITLE}_", "", "| " + " | ".join(HEADER) + " |", "|" + "|".join(" --- " for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(escape_markdown(cell) for cell in row) + " |" for row in body]
    return "\n\n" + "\n".join(lines)
