"""The report's beyond-accuracy parts that are not a cell of the overview: the probes that measure something other
than the headline (transformation invariance, retrieval, the group robustness index) and reliability diagrams."""

from collections import defaultdict

import numpy as np

from evalsuite.metrics.calibration import CalibrationItems

# probe (the leaderboard's column) -> the report's section
SECTIONS = {"invariance": "invariance", "retrieval": "retrieval", "knn_groups": "group robustness"}


def beyond_rows(rows: list, models: set, tasks: set) -> dict:
    """{section: [{model, task, probe, metrics: {metric: mean over seeds}}]} from the test rows of those probes, for
    the models and tasks the report shows."""
    values = defaultdict(list)
    for row in rows:
        if row["split"] == "test" and row["probe"] in SECTIONS and row["model"] in models and row["task"] in tasks:
            try:
                values[(row["probe"], row["model"], row["task"], row["metric"])].append(float(row["value"]))
            except ValueError:
                continue
    grouped = defaultdict(dict)
    for (probe, model, task, metric), found in values.items():
        grouped[(probe, model, task)][metric] = float(np.mean(found))
    sections = defaultdict(list)
    for (probe, model, task), metrics in sorted(grouped.items()):
        sections[SECTIONS[probe]].append({"model": model, "task": task, "probe": probe, "metrics": metrics})
    return dict(sections)


def reliability_bins(labels, proba) -> dict:
    """{count, accuracy, confidence}: per confidence bin (the calibration module's bins), for a diagram."""
    count, accuracy, confidence = CalibrationItems(np.asarray(labels), np.asarray(proba)).bins()
    return {"count": [int(c) for c in count], "accuracy": [float(a) for a in np.nan_to_num(accuracy, nan=-1.0)],
            "confidence": [float(c) for c in np.nan_to_num(confidence, nan=-1.0)]}
