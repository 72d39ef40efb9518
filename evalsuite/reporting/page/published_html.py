"""The report page's published figures (results/published.py): a small line in each overview cell that has one,
and a table under the overview with each figure's source, commit and how the peer's protocol differs from ours.
Nothing is shown for a model or task without a user's cell: the page never adds rows the user did not run."""

import html

DIFFERENCE_NOTE = ("A peer's figure comes from the peer's own runs under its own protocol (head, training, splits, "
                   "pooling as noted), copied as published: it is not ranked, not averaged and not in any best set.")


def _esc(value) -> str:
    return html.escape(str(value))


def published_line(figure) -> str:
    """'published 0.785 · eva 0.4.5' under a cell, its source and protocol difference on hover; "" without one."""
    if figure is None:
        return ""
    title = f"{figure.source()}; differs: {figure.difference()}"
    return (f'<br><span class="sub published" title="{_esc(title)}">published {_esc(figure.value_text)} · '
            f"{_esc(figure.peer)} {_esc(figure.version)}</span>")


def published_section(report, table) -> str:
    """The figures beside the user's cells, one row each; "" when none of the shown cells has one."""
    rows = []
    for model in report.models:
        for task in report.tasks:
            figure, cell = report.published.get((model, task)), report.cells.get((model, task))
            if figure is None or cell is None:
                continue
            rows.append([f"<td>{_esc(model)}</td>", f"<td>{_esc(task)}</td>", f"<td>{_esc(figure.metric)}</td>",
                         f"<td>{cell.mean:.4f}</td>", f"<td>{_esc(figure.value_text)}</td>",
                         f"<td>{_esc(figure.source())} ({_esc(figure.peer_model)})</td>",
                         f"<td>{_esc(figure.protocol)}</td>", f'<td class="gap">{_esc(figure.difference())}</td>'])
    if not rows:
        return ""
    header = ["model", "task", "metric", "yours", "published", "source", "peer's protocol", "how it differs"]
    return (f'<h2 id="published">Published figures beside your rows</h2><p class="muted">{DIFFERENCE_NOTE}</p>'
            + table("published-figures", header, rows))
