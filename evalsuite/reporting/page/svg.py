"""The HTML report's figures as inline SVG text: pure functions from numbers to markup, no plotting library, no
script, no external font or image, so the page reads the same offline and with scripts disabled.

Coordinates carry one decimal (a pixel is the finest step a reader sees), which keeps a 30-model x 20-task page
small; colours and fonts come from the page's stylesheet (classes `grid`, `ci`, `dot`, `floor`, `front`)."""

import html
import math

WIDTH = 640
ROW = 18  # px per model row of a dot plot
TOP, RIGHT, BOTTOM = 10, 16, 36
INSET = 8  # px between the axis ends and the plot's edges, so a dot on a bound is drawn whole
CHAR_PX = 6.5  # generous width of an 11 px system-font character, to size the label column
MAX_LABEL_PX = 280  # longer model names are cut with "…" (the full name is in the row's <title>)


def px(value: float) -> str:
    """A coordinate with one decimal and no trailing ".0"."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def tick_text(value: float) -> str:
    """A tick number without float noise (0.30000000000000004 -> 0.3) or a minus zero."""
    return f"{round(value, 10) + 0.0:.6g}"


def nice_axis(low: float, high: float, count: int = 5) -> tuple[float, float, list]:
    """(start, stop, ticks): about `count` steps of 1, 2 or 5 times a power of ten covering [low, high]."""
    if not (finite(low) and finite(high)):
        low, high = 0.0, 1.0
    if high <= low:  # one value: a window around it
        pad = abs(low) * 0.1 or 0.5
        low, high = low - pad, high + pad
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    start, stop = math.floor(low / step + 1e-9) * step, math.ceil(high / step - 1e-9) * step
    return start, stop, [start + i * step for i in range(round((stop - start) / step) + 1)]


def log_axis(low: float, high: float) -> tuple[float, float, list]:
    """(start, stop, ticks) at whole powers of ten around [low, high] (both > 0)."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    last = max(last, first + 1)
    return 10.0 ** first, 10.0 ** last, [10.0 ** power for power in range(first, last + 1)]


def _mapper(start: float, stop: float, left: float, right: float, log: bool = False):
    """value -> pixel between `left` and `right` (reversed when right < left, as a y axis is)."""
    convert = math.log10 if log else float
    low, span = convert(start), convert(stop) - convert(start)
    return lambda value: left + (convert(value) - low) / span * (right - left)


def _esc(text) -> str:
    return html.escape(str(text))


def _label(text: str, width: float) -> str:
    chars = max(4, int(width / CHAR_PX))
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _open(height: float, title: str) -> str:
    return (f'<svg class="plot" width="{WIDTH}" height="{px(height)}" viewBox="0 0 {WIDTH} {px(height)}" '
            f'role="img" aria-label="{_esc(title)}"><title>{_esc(title)}</title>')


def _x_ticks(ticks: list, to_x, top: float, bottom: float) -> list:
    """Vertical grid lines with their numbers under the plot."""
    parts = []
    for tick in ticks:
        x = px(to_x(tick))
        parts.append(f'<line class="grid" x1="{x}" y1="{px(top)}" x2="{x}" y2="{px(bottom)}"/>'
                     f'<text x="{x}" y="{px(bottom + 14)}" text-anchor="middle">{tick_text(tick)}</text>')
    return parts


def _y_ticks(ticks: list, to_y, left: float, right: float) -> list:
    parts = []
    for tick in ticks:
        y = px(to_y(tick))
        parts.append(f'<line class="grid" x1="{px(left)}" y1="{y}" x2="{px(right)}" y2="{y}"/>'
                     f'<text x="{px(left - 4)}" y="{y}" dy="4" text-anchor="end">{tick_text(tick)}</text>')
    return parts


def dot_plot(rows: list, floor: float | None, title: str) -> str:
    """One row per (label, mean, (low, high) or None[, (floor label, floor mean) or None]): a dot at the mean, a line
    over the interval, and the row's own floor (its model's random-init mean, issue 49) as a dashed tick across the
    row; `floor`, one value for every row, as a dashed vertical line. Non-finite numbers are left out (the row keeps
    its label)."""
    rows = [(*row, None)[:4] for row in rows]
    values = [v for _, mean, interval, own in rows for v in (mean, *(interval or ()), *(own or ())[1:]) if finite(v)]
    values += [floor] if finite(floor) else []
    start, stop, ticks = nice_axis(min(values, default=0.0), max(values, default=1.0))
    left = min(MAX_LABEL_PX, CHAR_PX * max((len(label) for label, _, _, _ in rows), default=4) + 16)
    bottom = TOP + ROW * len(rows)
    to_x = _mapper(start, stop, left + INSET, WIDTH - RIGHT - INSET)
    parts = [_open(bottom + BOTTOM, title), *_x_ticks(ticks, to_x, TOP, bottom)]
    for index, (label, mean, interval, own) in enumerate(rows):
        y = TOP + ROW * (index + 0.5)
        if own and finite(own[1]):  # under the dot: the model's own random-init floor, on its row only
            x = px(to_x(own[1]))
            parts.append(f'<line class="floor" x1="{x}" y1="{px(y - ROW / 2 + 1)}" x2="{x}" y2="{px(y + ROW / 2 - 1)}">'
                         f'<title>{_esc(label)}: random-init floor {_esc(own[0])} {own[1]:.4f}</title></line>')
        parts.append(_dot_row(label, mean, interval, y, left, to_x))
    if finite(floor):
        x = px(to_x(floor))
        parts.append(f'<line class="floor" x1="{x}" y1="{px(TOP - 4)}" x2="{x}" y2="{px(bottom)}">'
                     f'<title>random-init floor {floor:.4f}</title></line>')
    parts.append(f'<text x="{px((left + WIDTH - RIGHT) / 2)}" y="{px(bottom + 31)}" '
                 f'text-anchor="middle">{_esc(title)}</text></svg>')
    return "".join(parts)


def _dot_row(label: str, mean: float, interval: tuple | None, y: float, left: float, to_x) -> str:
    row = [f'<text x="{px(left - 6)}" y="{px(y)}" dy="4" text-anchor="end"><title>{_esc(label)}</title>'
           f'{_esc(_label(label, left - 16))}</text>']
    if interval and all(finite(v) for v in interval):
        row.append(f'<line class="ci" x1="{px(to_x(interval[0]))}" y1="{px(y)}" x2="{px(to_x(interval[1]))}" '
                   f'y2="{px(y)}"/>')
    if finite(mean):
        row.append(f'<circle class="dot" cx="{px(to_x(mean))}" cy="{px(y)}" r="4"><title>{_esc(label)}: '
                   f'{mean:.4f}</title></circle>')
    return "".join(row)


def pareto_front(points: list, higher_better: bool = True) -> list:
    """Names of the (name, cost, score) points no other point dominates (costs no more and scores no worse, one of
    them strictly), cheapest first."""
    sign = 1 if higher_better else -1

    def dominated(cost, score):
        return any(c <= cost and sign * s >= sign * score and (c < cost or sign * s > sign * score)
                   for _, c, s in points)

    return [name for name, cost, score in sorted(points, key=lambda p: (p[1], -sign * p[2], p[0]))
            if not dominated(cost, score)]


def uses_log_scale(costs: list) -> bool:
    """Costs spanning more than 100x are drawn on a log axis (all must be > 0 for that)."""
    return min(costs) > 0 and max(costs) / min(costs) > 100


def scatter(points: list, front: list, x_title: str, y_title: str, height: int = 400, higher_better: bool = True,
            x_unit: str = "") -> str:
    """Each (name, cost, score) point labelled with its name; the `front` names joined by a step line (cost right,
    better up: every point right of or below the line is dominated). A lower-is-better score (a mean rank) runs
    down the axis, its best at the top. `x_unit` follows the cost in a point's tooltip."""
    costs, scores = [p[1] for p in points], [p[2] for p in points]
    log = uses_log_scale(costs)
    x_start, x_stop, x_ticks = log_axis(min(costs), max(costs)) if log else nice_axis(min(costs), max(costs))
    y_start, y_stop, y_ticks = nice_axis(min(scores), max(scores))
    left, top, bottom = 56, TOP + 14, height - BOTTOM - 8  # room above the top point's label
    to_x = _mapper(x_start, x_stop, left + INSET, WIDTH - RIGHT - INSET, log)
    low_px, high_px = (bottom - INSET, top) if higher_better else (top, bottom - INSET)
    to_y = _mapper(y_start, y_stop, low_px, high_px)
    title = f"{y_title} against {x_title}{' (log scale)' if log else ''}"
    parts = [_open(height, title), *_x_ticks(x_ticks, to_x, top, bottom), *_y_ticks(y_ticks, to_y, left, WIDTH - RIGHT)]
    parts.append(_step_line([p for name in front for p in points if p[0] == name], to_x, to_y))
    parts += [_point(name, cost, score, to_x, to_y, x_unit) for name, cost, score in points]
    parts.append(f'<text x="{px((left + WIDTH - RIGHT) / 2)}" y="{px(height - 8)}" text-anchor="middle">'
                 f'{_esc(x_title)}{" (log scale)" if log else ""}</text>'
                 f'<text transform="translate(12 {px((top + bottom) / 2)}) rotate(-90)" text-anchor="middle">'
                 f"{_esc(y_title)}</text></svg>")
    return "".join(parts)


def _point(name: str, cost: float, score: float, to_x, to_y, unit: str) -> str:
    """A dot with its name beside it: right of the dot in the plot's left half, left of it in the right half, so a
    long name stays inside the figure."""
    x, y = to_x(cost), to_y(score)
    side = 'dx="6"' if x < WIDTH / 2 else 'dx="-6" text-anchor="end"'
    return (f'<circle class="dot" cx="{px(x)}" cy="{px(y)}" r="4"><title>{_esc(name)}: {cost:.4g}{_esc(unit)}, '
            f'{score:.4g}</title></circle><text x="{px(x)}" y="{px(y)}" {side} dy="-6">'
            f"{_esc(_label(name, WIDTH / 2 - 40))}</text>")


def _step_line(front: list, to_x, to_y) -> str:
    """Across to the next front point's cost, then up (or down) to its score."""
    if not front:
        return ""
    corners = [(to_x(front[0][1]), to_y(front[0][2]))]
    for _, cost, score in front[1:]:
        corners += [(to_x(cost), corners[-1][1]), (to_x(cost), to_y(score))]
    coordinates = " ".join(f"{px(x)},{px(y)}" for x, y in corners)
    return f'<polyline class="front" points="{coordinates}"/>'
