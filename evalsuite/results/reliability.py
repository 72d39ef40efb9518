"""Reliability diagram PNG of one run's test probabilities (`evalsuite run --plots`).

Top panel: per confidence bin (the 15 bins of evalsuite.metrics.calibration, (lower, upper]) a bar up to
the accuracy of the items in it, a dot at their mean confidence, and the diagonal a calibrated probe
would follow; a bar below its dot is over-confidence, above it under-confidence. Bottom panel: how many
test items each bin holds, so a large gap in a near-empty bin is read as the noise it is. The title
carries the ECE and MCE that the leaderboard reports for the same probabilities.
matplotlib is imported inside the function and a bare Figure renders through Agg, as heatmap.py does,
so `evalsuite run` without --plots never imports it.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.calibration import N_BINS, CalibrationItems, bin_edges
from evalsuite.storage.fsio import fs_errors, staged


def save_reliability_diagram(y_true, proba, path, title: str) -> Path:
    """Write the reliability diagram of labels `y_true` [N] and probabilities `proba` [N, C] to `path`."""
    from matplotlib.figure import Figure

    items = CalibrationItems(y_true, proba)
    count, accuracy, confidence = items.bins()
    metrics = items.metrics()
    figure = Figure(figsize=(5.5, 6.5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    _draw_accuracy(top, count, accuracy, confidence)
    _draw_counts(bottom, count)
    top.set_title(f"{title}\nECE {metrics['ece']:.4f}, MCE {metrics['mce']:.4f} "
                  f"({N_BINS} bins, n={items.items})", fontsize=10)
    path = Path(path)
    with fs_errors("write the reliability diagram", path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged(path) as staging:  # a full disk leaves no half-written image
            try:
                # The format is named because the staging file's name ends in .tmp.
                figure.savefig(staging, format=path.suffix.lstrip(".") or "png", dpi=120)
            except ValueError as exc:  # an extension matplotlib cannot write
                raise EvalsuiteError(f"cannot write the reliability diagram {path}: {exc}; use a .png name") from None
    return path


def _draw_accuracy(axes, count, accuracy, confidence) -> None:
    edges = bin_edges(N_BINS)
    filled = count > 0
    axes.bar(edges[:-1][filled], accuracy[filled], width=1 / N_BINS, align="edge", color="tab:blue",
             edgecolor="black", linewidth=0.5, label="accuracy in bin")
    centres = (edges[:-1] + edges[1:]) / 2
    axes.plot(centres[filled], confidence[filled], "o", color="tab:red", markersize=4,
              label="mean confidence in bin")
    axes.plot([0, 1], [0, 1], "--", color="grey", linewidth=1, label="calibrated", zorder=3)
    axes.set(xlim=(0, 1), ylim=(0, 1.02), ylabel="accuracy")
    axes.legend(loc="best", fontsize=8)


def _draw_counts(axes, count) -> None:
    edges = bin_edges(N_BINS)
    axes.bar(edges[:-1], count, width=1 / N_BINS, align="edge", color="lightgrey", edgecolor="black", linewidth=0.5)
    for left, n in zip(edges[:-1], count):
        if n > 0:
            axes.text(left + 0.5 / N_BINS, n, f"{n:g}", ha="center", va="bottom", fontsize=6)
    axes.set(xlim=(0, 1), xlabel="confidence (largest class probability)", ylabel="items")
    axes.set_ylim(0, max(float(np.max(count)), 1.0) * 1.25)  # room for the count labels
