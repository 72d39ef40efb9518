"""The report page's beyond-accuracy sections that are not the calibration table: reliability diagrams (inline SVG,
one small figure per cell with stored probabilities) and the invariance, retrieval and group-robustness tables."""

import html

from evalsuite.metrics.segmentation import MEAN_METRICS as PER_CLASS_MEANS
from evalsuite.reporting.page.data import Report
from evalsuite.reporting.page.svg import dot_plot, px

SIZE_PX = 260  # one reliability diagram's width: readable ticks and counts (issue 41); a 30 x 20 report draws 600
LEFT, TOP, INNER = 40, 8, 204  # the accuracy panel: INNER px square, its left edge after the y tick labels
STRIP, BAR_PX = 44, 16  # the count strip under the panel: bars up to BAR_PX, each count written above its bar
HEIGHT_PX = TOP + INNER + 6 + STRIP + 34  # + x tick labels and the axis title
TICKS = (0.0, 0.5, 1.0)


def _esc(value) -> str:
    return html.escape(str(value))


def _axes() -> str:
    """The panel's frame, the diagonal a calibrated probe follows, tick values on both axes and the axis titles."""
    bottom, strip_bottom = TOP + INNER, TOP + INNER + 6 + STRIP
    parts = [f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{INNER}" height="{INNER}" fill="none"/>',
             f'<line class="diagonal" x1="{LEFT}" y1="{bottom}" x2="{LEFT + INNER}" y2="{TOP}" '
             'stroke-dasharray="4 3"/>']
    for tick in TICKS:
        x, y = px(LEFT + tick * INNER), px(bottom - tick * INNER)
        parts.append(f'<text x="{LEFT - 4}" y="{y}" dy="4" text-anchor="end">{tick:g}</text>'
                     f'<text x="{x}" y="{strip_bottom + 13}" text-anchor="middle">{tick:g}</text>')
    parts.append(f'<text x="{LEFT + INNER / 2:g}" y="{HEIGHT_PX - 4}" text-anchor="middle">confidence</text>'
                 f'<text transform="translate(11 {TOP + INNER / 2:g}) rotate(-90)" text-anchor="middle">accuracy'
                 f'</text><text x="{LEFT - 4}" y="{strip_bottom}" text-anchor="end">n</text>')
    return "".join(parts)


def _bins(bins: dict) -> str:
    """Per bin: a bar up to its accuracy in the panel, and in the strip a bar of its item count with the count."""
    counts = bins["count"]
    width, most = INNER / max(len(counts), 1), max(max(counts, default=0), 1)
    strip_bottom, parts = TOP + INNER + 6 + STRIP, []
    for index, (count, accuracy) in enumerate(zip(counts, bins["accuracy"])):
        if not count:
            continue
        x, centre = LEFT + index * width, LEFT + (index + 0.5) * width
        if accuracy >= 0:
            parts.append(f'<rect class="bar" x="{px(x + 0.5)}" y="{px(TOP + INNER - accuracy * INNER)}" '
                         f'width="{px(width - 1)}" height="{px(accuracy * INNER)}"/>')
        height = max(1.0, count / most * BAR_PX)
        parts.append(f'<rect class="count" x="{px(x + 0.5)}" y="{px(strip_bottom - height)}" width="{px(width - 1)}" '
                     f'height="{px(height)}"/><text class="n" transform="translate({px(centre + 3)} '
                     f'{px(strip_bottom - height - 2)}) rotate(-90)">{count}</text>')
    return "".join(parts)


def reliability_svg(bins: dict, title: str) -> str:
    """Accuracy per confidence bin (bars) against the dashed diagonal, ticks at 0, 0.5 and 1, and under the panel
    each bin's number of test items, so a gap in a near-empty bin reads as the noise it is."""
    return (f'<svg class="reliability" width="{SIZE_PX}" height="{HEIGHT_PX}" viewBox="0 0 {SIZE_PX} {HEIGHT_PX}" '
            f'role="img" aria-label="{_esc(title)}"><title>{_esc(title)}</title>{_axes()}{_bins(bins)}</svg>')


def reliability_section(report: Report) -> str:
    cells = [report.cells[(m, t)] for m in report.models for t in report.tasks
             if (m, t) in report.cells and report.cells[(m, t)].reliability]
    if not cells:
        return ""
    figures = "".join(f'<figure class="reliability">{reliability_svg(c.reliability, f"{c.model} × {c.task}")}'
                      f"<figcaption>{_esc(c.model)} × {_esc(c.task)}</figcaption></figure>" for c in cells)
    return ("<h2>Reliability diagrams</h2><p class=\"muted\">Test accuracy per confidence bin of the chosen probe "
            "(first seed; 15 equal-width bins as in docs/calibration.md); the dashed diagonal is perfect "
            "calibration. Under each panel (n): the number of test items in each bin, so a gap in a bin of few items "
            f"reads as the noise it is.</p><div class=\"figures\">{figures}</div>")


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
