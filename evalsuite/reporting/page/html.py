"""`evalsuite report`'s HTML page: one self-contained file (inline style and SVG, no script, no network request) with
the overview, the overall ranking, a plot per task, calibration, cost and provenance of a `Report`.

Every rule the page states comes from evalsuite.reporting.page.data; this module only lays the numbers out.
All text goes through html.escape, and a missing or non-finite number prints as "–" (never "nan")."""

import html
from datetime import datetime, timezone

from evalsuite.reporting.page import svg
from evalsuite.reporting.page.cost import cost_section
from evalsuite.reporting.page.data import Report
from evalsuite.reporting.page.extras_html import beyond_sections, per_class_plot, reliability_section
from evalsuite.reporting.page.published_html import published_line, published_section
from evalsuite.reporting.page.words import NOTES_INTRO, SEEDS, floor_label, overall_gap_cell, overall_rule

CALIBRATION = ("ece", "mce", "brier", "nll")  # the calibration errors a classification run reports
PROVENANCE = (("evalsuite", "evalsuite version"), ("commit", "commit"), ("torch", "torch"), ("timm", "timm"),
              ("device", "device"), ("precision", "precision"), ("seeds", "seeds"), ("cache_keys", "cache keys"),
              ("card", "card"), ("card_sha256", "card sha256"), ("date", "date (UTC)"), ("runs", "run ids"))
DASH = "–"
LEGEND = (
    "Each cell: the mean over seeds of the task's headline metric on test (± sample std over seeds when there are "
    "several) for the probe chosen on val, whose name is shown small. <b>Bold</b>: the best mean of the column "
    "(rank 1). <span class=\"inset\">◆</span>: in the column's 95 % model confidence set, the models that cannot "
    "be told apart from the best (Hansen, Lunde &amp; Nason 2011, on the test items' bootstrap draws; the chance "
    "that a model as good as the best is left out is at most 5 %, the choice of the best included; hover the mark "
    "for the model's MCS p-value). No mark: outside the set. <span class=\"untested\">?</span>: the column could "
    "not be tested (the notes say why). [lo, hi]: the 95 % bootstrap interval of the mean shown (over the same draws "
    "as the marks; <span class=\"note\">†</span>: hover it or read the notes for how to read it). Under each task: "
    "how many clusters (patients, slides, images) its intervals, ranks and marks rest on. #r (lo–hi): the rank (1 = "
    "best, equal means share the average rank) and its 95 % bootstrap rank interval over the test items; after the "
    "probe, the precision the backbone computed in. Random-init floor (of X): the row of X's own "
    "<code>--random-init</code> network, the mean X's pretraining must beat on each task (X+random-init, else the "
    "one random-init model of X's architecture); a random-init model of no shown model's own is no floor.")
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d232a;
max-width:1200px;margin:0 auto;padding:1.5rem}
h1{font-size:1.6rem;margin:0 0 .3rem}h2{font-size:1.25rem;margin:2.2rem 0 .6rem;border-bottom:1px solid #d8dee4}
h3{font-size:1.05rem;margin:1.4rem 0 .4rem}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.3rem .55rem;border-bottom:1px solid #e5e8eb;text-align:left;vertical-align:top}
thead th{background:#eef1f4}tbody tr:nth-child(even){background:#f7f8fa}td.cell{white-space:nowrap}
#overview tbody th{position:sticky;left:0;background:#fff}#overview tbody tr:nth-child(even) th{background:#f7f8fa}
.scroll{overflow-x:auto}.sub,small,.muted{color:#68707a;font-size:.82em}.muted{font-size:.9em}
.inset{color:#08784f;font-weight:700}.untested{color:#a05a00;font-weight:700}.note{color:#a05a00;cursor:help}.missing{color:#aab;text-align:center}
tr.floor th,tr.floor td{border-top:2px solid #c9d0d8}
tr.floor th,tr.floor td,th[data-floor],th[data-floor]~td{font-style:italic;color:#68707a}
details{margin:.2rem 0}summary{cursor:pointer}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;margin:.4rem 0 .4rem 1rem}
dt{color:#68707a}dd{margin:0;overflow-wrap:anywhere}
pre{background:#eef1f4;padding:.5rem;white-space:pre-wrap;overflow-wrap:anywhere}
td.gap{color:#68707a;max-width:32rem}
svg.plot{display:block;max-width:100%;height:auto}svg text{font-size:11px;fill:#333}
svg .grid{stroke:#e5e8eb}svg .ci{stroke:#6f8fbf;stroke-width:2}svg .dot{fill:#1f4e8c}
svg .floor{stroke:#c0392b;stroke-dasharray:4 3}svg .front{fill:none;stroke:#08784f;stroke-width:1.5}
.figures{display:flex;flex-wrap:wrap;gap:.5rem}figure.reliability{margin:0}figcaption{font-size:.8em;color:#68707a}
svg .bar{fill:#6f8fbf}svg .count{fill:#aab4bf}svg text.n{font-size:8px}
svg .frame{stroke:#c9d0d8}svg .diagonal{stroke:#c0392b}
"""


def _esc(value) -> str:
    return html.escape(str(value))


def _num(value, digits: int = 4) -> str:
    """`value` to `digits` decimals; None, NaN and infinities print as a dash."""
    return f"{value:.{digits}f}" if svg.finite(value) else DASH


def _rank(value) -> str:
    return f"{value:g}" if svg.finite(value) else DASH


def _table(table_id: str, header: list, rows: list) -> str:
    """A table of already-escaped cell HTML: `rows` are lists of `<td>`/`<th>` strings."""
    head = "".join(f'<th scope="col">{cell}</th>' for cell in header)
    body = "".join(f"<tr>{''.join(row)}</tr>" for row in rows)
    ident = f' id="{table_id}"' if table_id else ""
    return f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def html_report(report: Report) -> str:
    sections = [_header(report), _overview(report), published_section(report, _table), _overall(report),
                _tasks(report), _calibration(report), reliability_section(report), beyond_sections(report),
                cost_section(report, _table), _provenance(report), _notes(report)]
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      "<title>evalsuite report</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
                      *filter(None, sections), "</body>", "</html>", ""])


def _header(report: Report) -> str:
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<header><h1>evalsuite report</h1><p class=\"muted\">source: <code>{_esc(report.source)}</code> · "
            f"generated {date} · {len(report.models)} models × {len(report.tasks)} tasks</p></header>")


def _best_rank(report: Report, task: str) -> float | None:
    """The column's best rank: 1, or the shared rank of models tied on the best mean."""
    ranks = [cell.rank for (_, name), cell in report.cells.items() if name == task and svg.finite(cell.mean)]
    return min(ranks, default=None)


def _overview(report: Report) -> str:
    best = {task: _best_rank(report, task) for task in report.tasks}
    header = ["model"] + [f'<a href="#task-{_esc(task)}">{_esc(task)}</a><br><span class="sub">'
                          f"{_esc(report.metrics[task])}{_clusters(report, task)}</span>" for task in report.tasks]
    # A random-init model's own row says whose floor it is, once: no second copy of its numbers.
    rows = [[_row_header(model, floor_label(report, model))]
            + [_overview_cell(report.cells.get((model, task)), best[task], report.published.get((model, task)))
               for task in report.tasks]
            for model in report.models]
    table = _table("overview", header, rows)
    return f'<h2 id="overview-title">Overview</h2>{table}<p class="muted legend">{LEGEND}</p>{SEEDS}'


def _clusters(report: Report, task: str) -> str:
    """" · 14 patients": what the column's intervals, ranks and marks rest on (docs/significance.md)."""
    if task not in report.clusters:
        return ""
    count, unit = report.clusters[task]
    return f" · {count} {_esc(unit)}{'s' if count != 1 else ''}"


def _row_header(model: str, label: str | None) -> str:
    """A model's row header; a random-init model's says whose floor it is (report_words.floor_label)."""
    if not label:
        return f'<th scope="row">{_esc(model)}</th>'
    floor = ' data-floor="1"' if label.startswith("random-init floor") else ""
    return f'<th scope="row"{floor}>{_esc(model)}<br><span class="sub">{_esc(label)}</span></th>'


def _overview_cell(cell, best_rank: float | None, figure=None) -> str:
    if cell is None:
        return f'<td class="missing">{DASH}</td>'
    is_best = best_rank is not None and cell.rank == best_rank
    mean = f"<b>{_num(cell.mean)}</b>" if is_best else _num(cell.mean)
    spread = f' <span class="sub">± {_num(cell.std)}</span>' if cell.std is not None and len(cell.seeds) > 1 else ""
    mark = _set_mark(cell)
    noted = f' <span class="note" title="{_esc(cell.interval_note)}">†</span>' if cell.interval_note else ""
    interval = f'<br><span class="sub">[{_num(cell.interval[0])}, {_num(cell.interval[1])}]{noted}</span>' \
        if cell.interval else ""
    rank_interval = f" ({_rank(cell.rank_interval[0])}–{_rank(cell.rank_interval[1])})" if cell.rank_interval else ""
    attributes = (f'class="cell{" best" if is_best else ""}" data-model="{_esc(cell.model)}" '
                  f'data-task="{_esc(cell.task)}" data-probe="{_esc(cell.probe)}" data-mean="{_num(cell.mean, 6)}"')
    precision = f" · {_esc(cell.precision)}" if cell.precision else ""
    return (f"<td {attributes}>{mean}{mark}{spread}{interval}<br><span class=\"sub\">#{_rank(cell.rank)}"
            f"{rank_interval}</span> <small>{_esc(cell.probe)}{precision}</small>{published_line(figure)}</td>")


def _set_mark(cell) -> str:
    if cell.best_set is True:
        return f' <span class="inset" title="in the 95 % best set; MCS p = {_num(cell.best_set_p, 3)}">◆</span>'
    if cell.untested:
        return f' <span class="untested" title="not tested: {_esc(cell.untested)}">?</span>'
    return ""


def _overall(report: Report) -> str:
    gap = not any(interval for _, _, interval in report.overall)  # no interval at all: why, said once
    rows = [[f"<td>{_esc(model)}</td>", f"<td>{_num(rank, 2)}</td>",
             f"<td>{_num(interval[0], 2)}–{_num(interval[1], 2)}</td>" if interval else "" if gap
             else f"<td>{DASH}</td>"]
            for model, rank, interval in report.overall]
    if gap and rows:
        rows[0][2] = overall_gap_cell(report, len(rows))  # one cell spanning every row
    ranked = {model for model, _, _ in report.overall}
    left_out = [model for model in report.models if model not in ranked]
    rule = (f"The mean of each model's rank (1 = best) {_esc(overall_rule(report))}, for models with every such "
            "column; its interval is the 95 % bootstrap interval of that mean rank: every such task re-ranked in each "
            "draw of its test items, the ranks averaged over them, when every one has draws (else the interval "
            "column says which task has none and why). ")
    rule += (f"Left out (missing a task): {', '.join(map(_esc, left_out))}." if left_out
             else "Every model has every ranked task.")
    return f"<h2>Overall ranking</h2><p>{rule}</p>" + _table("overall", ["model", "mean rank", "interval"], rows)


def _tasks(report: Report) -> str:
    return "<h2>Per task</h2>" + "".join(_task_section(report, task) for task in report.tasks)


def _task_section(report: Report, task: str) -> str:
    cells = [report.cells[(model, task)] for model in report.models if (model, task) in report.cells]
    floors = {cell.model: report.floors[(cell.model, task)] for cell in cells if (cell.model, task) in report.floors}
    plot = svg.dot_plot([(cell.model, cell.mean, cell.interval, floors.get(cell.model)) for cell in cells], None,
                        f"{task}: {report.metrics[task]} on test")
    names = sorted({name for cell in cells for name in cell.extra})
    extras = _table("", ["model", *map(_esc, names)],
                    [[f"<td>{_esc(cell.model)}</td>"] + [f"<td>{_num(cell.extra.get(name))}</td>" for name in names]
                     for cell in cells]) if names else ""
    owned = "; ".join(f"{_esc(model)}: {_esc(floor)}" for model, (floor, _) in floors.items())
    caption = (f'<p class="muted">Dot: mean over seeds; line: 95 % interval; dashed tick on a row: that model\'s own '
               f"random-init floor ({owned}).</p>" if floors else
               '<p class="muted">Dot: mean over seeds; line: 95 % interval.</p>')
    return (f'<section class="task" id="task-{_esc(task)}"><h3>{_esc(task)} <span class="sub">'
            f"{_esc(report.metrics[task])}</span></h3>{plot}{caption}{per_class_plot(cells, task)}{extras}</section>")


def _ordered_cells(report: Report) -> list:
    """Present cells, models in the report's order, then tasks in its order."""
    return [report.cells[(m, t)] for m in report.models for t in report.tasks if (m, t) in report.cells]


def _calibration(report: Report) -> str:
    cells = [cell for cell in _ordered_cells(report) if any(name in cell.extra for name in CALIBRATION)]
    if not cells:
        return ""
    rows = [[f"<td>{_esc(cell.model)}</td>", f"<td>{_esc(cell.task)}</td>"]
            + [f"<td>{_num(cell.extra.get(name))}</td>" for name in CALIBRATION] for cell in cells]
    return ("<h2>Calibration</h2><p class=\"muted\">Test calibration of the chosen probe, mean over seeds "
            "(lower is better).</p>" + _table("calibration", ["model", "task", *CALIBRATION], rows))


def _provenance_value(value) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{key}: {item}" for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        value = ", ".join(map(str, value))
    elif isinstance(value, float):
        value = _num(value)
    return DASH if value is None or value == "" else _esc(value)


def _provenance_entry(cell) -> str:
    known = dict(PROVENANCE)
    keys = [key for key, _ in PROVENANCE] + [k for k in cell.provenance if k not in known and k != "command"]
    terms = "".join(f"<dt>{_esc(known.get(key, key))}</dt><dd>{_provenance_value(cell.provenance.get(key))}</dd>"
                    for key in keys)
    command = cell.provenance.get("command")
    body = (f"<dl>{terms}</dl><pre><code>{_esc(command) if command else DASH}</code></pre>" if cell.provenance
            else '<p class="muted">No run JSON found for this cell.</p>')
    return f"<details><summary>{_esc(cell.model)} × {_esc(cell.task)}</summary>{body}</details>"


def _provenance(report: Report) -> str:
    return ("<h2>Provenance</h2><p class=\"muted\">Per cell: the versions, data and runs behind it, and the command "
            "that reproduces it.</p>" + "".join(_provenance_entry(cell) for cell in _ordered_cells(report)))


def _notes(report: Report) -> str:
    items = "".join(f"<li>{_esc(note)}</li>" for note in report.notes)
    return f"<h2>Notes</h2>{NOTES_INTRO}<ul>{items}</ul>" if items else "<h2>Notes</h2><p>None.</p>"
