"""The wide leaderboard as a heatmap PNG: models (best rank sum on top) x tasks, each cell annotated.

Bright is better in every column. A table of one metric is coloured on that metric's scale, reversed for an error
(`--metric ece`, mse: lower is better, metrics/directions.py); a table of several metrics, whose scales do not
compare, is coloured per task from its worst score to its best.

matplotlib is imported inside the function so `evalsuite run` never pays for it, and a bare
Figure renders through the Agg canvas without pyplot, so no GUI backend or global state is touched.
"""

import math
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.directions import higher_is_better
from evalsuite.reporting.table.wide import WideTable
from evalsuite.storage.fsio import fs_errors, staged


def save_heatmap(table: WideTable, path: Path) -> Path:
    from matplotlib.figure import Figure

    shades, scale_label = _shades(table)
    figure = Figure(figsize=_figure_size(table), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(shades, cmap=_colormap(reversed_=_one_error_metric(table)), aspect="auto",
                        **_colour_range(shades))
    _annotate(axes, image, table, shades)
    _label_axes(axes, table)
    figure.colorbar(image, ax=axes, shrink=0.8).set_label(scale_label)
    path = Path(path)
    with fs_errors("write the heatmap", path, "--plot"):
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged(path) as staging:  # a full disk leaves no half-written image
            try:
                # The format is named because the staging file's name ends in .tmp.
                figure.savefig(staging, format=path.suffix.lstrip(".") or "png", dpi=150,
                               bbox_inches="tight")  # a narrow table must not clip the title
            except ValueError as exc:  # an extension matplotlib cannot write
                raise EvalsuiteError(f"cannot write the heatmap {path}: {exc}; use a .png name") from None
    return path


def _mean(cell) -> float:
    return math.nan if cell is None else cell.mean


def _figure_size(table: WideTable) -> tuple:
    longest_model = max(len(row.model) for row in table.rows)
    return 2.5 + 0.07 * longest_model + 1.5 * len(table.tasks), 1.3 + 0.55 * len(table.rows)


def _shades(table: WideTable) -> tuple[list, str]:
    """(the value each cell is coloured by, the colour bar's label)."""
    means = [[_mean(row.cells.get(task)) for task in table.tasks] for row in table.rows]
    metrics = sorted(set(table.metrics.values()))
    if len(metrics) == 1:
        direction = "" if higher_is_better(metrics[0]) else " (lower is better)"
        return means, metrics[0] + direction
    columns = [_worst_to_best([line[x] for line in means], table.metrics[task]) for x, task in enumerate(table.tasks)]
    return [list(line) for line in zip(*columns)], "within each task: 0 worst, 1 best (metric under each task)"


def _worst_to_best(values: list, metric: str) -> list:
    """A task's scores on 0 (its worst) .. 1 (its best); one distinct score is 1 for every model that has it."""
    present = [v for v in values if not math.isnan(v)]
    if not present:
        return values
    worst, best = (min(present), max(present)) if higher_is_better(metric) else (max(present), min(present))
    if worst == best:
        return [v if math.isnan(v) else 1.0 for v in values]
    return [(v - worst) / (best - worst) for v in values]


def _one_error_metric(table: WideTable) -> bool:
    metrics = set(table.metrics.values())
    return len(metrics) == 1 and not higher_is_better(metrics.pop())


def _colormap(reversed_: bool = False):
    import matplotlib

    colormap = matplotlib.colormaps["viridis_r" if reversed_ else "viridis"]
    return colormap.with_extremes(bad="lightgrey")  # a task the model has no result for


def _colour_range(means: list) -> dict:
    """Span the observed scores so close models still differ in colour (a fixed 0..1 would flatten them)."""
    values = [v for line in means for v in line if not math.isnan(v)]
    if not values:
        return {}
    low, high = min(values), max(values)
    margin = 0.05 if high - low < 1e-9 else 0.0
    return {"vmin": low - margin, "vmax": high + margin}


def _annotate(axes, image, table: WideTable, shades: list) -> None:
    for y, row in enumerate(table.rows):
        for x, task in enumerate(table.tasks):
            cell = row.cells.get(task)
            if cell is None:
                axes.text(x, y, "no result", ha="center", va="center", fontsize=8, color="dimgrey")
                continue
            spread = "" if cell.std is None else f" ± {cell.std:.3f}"
            text = f"{cell.mean:.3f}{spread}\n{cell.probe}, seeds={len(cell.seeds)}, #{cell.rank:g}"
            axes.text(x, y, text, ha="center", va="center", fontsize=8, color=_text_colour(image, shades[y][x]))


def _text_colour(image, value: float) -> str:
    """Black on light cells, white on dark ones (perceived luminance of the cell colour)."""
    red, green, blue, _ = image.cmap(image.norm(value))
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _label_axes(axes, table: WideTable) -> None:
    axes.set_xticks(range(len(table.tasks)), [f"{t}\n({table.metrics[t]})" for t in table.tasks], fontsize=9)
    axes.set_yticks(range(len(table.rows)), [_row_label(r, len(table.tasks)) for r in table.rows], fontsize=9)
    axes.xaxis.tick_top()
    axes.set_title(f"{table.split} split: mean ± std over seeds  (probe, seeds, rank per task)", fontsize=10)


def _row_label(row, n_tasks: int) -> str:
    if row.rank_sum is None:  # no rank sum: it would not be comparable with the complete rows
        return f"{row.model}  [{len(row.cells)}/{n_tasks} tasks]"
    return f"{row.model}  [rank sum {row.rank_sum:g}]"
