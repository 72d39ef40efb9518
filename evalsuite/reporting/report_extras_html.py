"""The report page's beyond-accuracy sections that are not the calibration table: reliability diagrams (inline SVG,
one small figure per cell with stored probabilities) and the invariance, retrieval and group-robustness tables."""

import html

from evalsuite.metrics.segmentation import MEAN_METRICS as PER_CLASS_MEANS
from evalsuite.reporting.report_data import Report
from evalsuite.reporting.svg import dot_plot

SIZE_PX = 180  # one reliability diagram; a 30 x 20 report draws 600 of them, so they stay small
PAD_PX = 24


def _esc(value) -> str:
    return html.escape(str(value))


def reliability_svg(bins: dict, title: str) -> str:
    """Accuracy against mean confidence per bin (bars from the diagonal's foot), the diagonal dashed."""
    inner = SIZE_PX - 2 * PAD_PX
    bars, width = [], inner / max(len(bins["count"]), 1)
    for index, (count, accuracy) in enumerate(zip(bins["count"], bins["accuracy"])):
        if count and accuracy >= 0:
            height = accuracy * inner
            bars.append(f'<rect class="bar" x="{PAD_PX + index * width:.1f}" y="{PAD_PX + inner - height:.1f}" '
                        f'width="{width * 0.9:.1f}" height="{height:.1f}"/>')
    frame = (f'<rect class="frame" x="{PAD_PX}" y="{PAD_PX}" width="{inner}" height="{inner}" fill="none"/>'
             f'<line class="diagonal" x1="{PAD_PX}" y1="{PAD_PX + inner}" x2="{PAD_PX + inner}" y2="{PAD_PX}" '
             'stroke-dasharray="4 3"/>')
    labels = (f'<text x="{SIZE_PX / 2}" y="{SIZE_PX - 6}" text-anchor="middle" class="axis">confidence</text>'
              f'<text x="10" y="{SIZE_PX / 2}" transform="rotate(-90 10 {SIZE_PX / 2})" text-anchor="middle" '
              'class="axis">accuracy</text>')
    return (f'<svg class="reliability" width="{SIZE_PX}" height="{SIZE_PX}" viewBox="0 0 {SIZE_PX} {SIZE_PX}" '
            f'role="img" aria-label="{_esc(title)}"><title>{_esc(title)}</title>{frame}{"".join(bars)}{labels}</svg>')


def reliability_section(report: Report) -> str:
    cells = [report.cells[(m, t)] for m in report.models for t in report.tasks
             if (m, t) in report.cells and report.cells[(m, t)].reliability]
    if not cells:
        return ""
    figures = "".join(f'<figure class="reliability">{reliability_svg(c.reliability, f"{c.model} × {c.task}")}'
                      f"<figcaption>{_esc(c.model)} × {_esc(c.task)}</figcaption></figure>" for c in cells)
    return ("<h2>Reliability diagrams</h2><p class=\"muted\">Test accuracy per confidence bin of the chosen probe "
            "(first seed; 15 equal-width bins as in docs/calibration.md); the dashed diagonal is perfect "
            f"calibration.</p><div class=\"figures\">{figures}</div>")


def per_class_plot(cells: list, task: str) -> str:
    """Segmentation: each class's Dice (`dice_<class>` of the cell's other metrics) per model, one dot each."""
    rows = [(f"{name[len('dice_'):]} · {cell.model}", value, None) for cell in cells  # the class survives a cut
            for name, value in sorted(cell.extra.items())
            if name.startswith("dice_") and name not in PER_CLASS_MEANS]
    if not rows:
        return ""
    return dot_plot(rows, None, f"{task}: Dice per class on test") + \
        '<p class="muted">Per-class Dice of the chosen probe, mean over seeds.</p>'


def beyond_sections(report: Report) -> str:
    """One table per section (invariance, retrieval, group robustness): model, task, probe, then each metric."""
    parts = []
    for section, rows in report.beyond.items():
        metrics = sorted({name for row in rows for name in row["metrics"]})
        head = "".join(f"<th>{_esc(name)}</th>" for name in ["model", "task", "probe", *metrics])
        body = "".join("<tr>" + "".join(f"<td>{_esc(row[key])}</td>" for key in ("model", "task", "probe"))
                       + "".join(f"<td>{_format(row['metrics'].get(name))}</td>" for name in metrics) + "</tr>"
                       for row in rows)
        ident = section.replace(" ", "-")
        parts.append(f'<h2>{_esc(section.capitalize())}</h2><p class="muted">Test metrics, mean over seeds.</p>'
                     f'<div class="scroll"><table id="{ident}"><thead><tr>{head}</tr></thead>'
                     f"<tbody>{body}</tbody></table></div>")
    return "".join(parts)


def _format(value) -> str:
    return "–" if value is None or value != value else f"{value:.4f}"
