"""The report page's cost section: what each model costs whatever machine or load ran it, the rates its runs
measured (with what they were measured under), and accuracy against cost.

The cost a model is compared on is its backbone's forward GFLOPs per image at its input size (models/flops.py):
it depends on the architecture and the input size alone, so a pretrained and a random-init EfficientNet cost the
same. Measured rates are not: one loaded host ran those two at 4.6 and 8.1 img/s (issue 41), and a cost axis built
on them called the random-init model cheaper. The rates stay, in their own table beside the device and the host's
load average, as facts about those runs.

The plot's score is the mean rank over tasks (1 = best), the one figure over tasks of different metrics: a mean of
balanced accuracy and Pearson r is no score (reporting/table/wide.py).
"""

import html

from evalsuite.reporting.page import svg
from evalsuite.reporting.page.data import Report

# The rates a run measured and what they were measured under, as ReportCell.cost holds them.
MEASURED_FIELDS = (("throughput_img_s", "extraction img/s"), ("forward_img_s", "forward img/s"),
                   ("device_hours_est", "device-hours (est.)"), ("device_name", "measured on"),
                   ("host_load_1m", "host load (1 min)"))
MILLION = 1e6


def _esc(value) -> str:
    return html.escape(str(value))


def model_costs(report: Report) -> dict:
    """model -> (GFLOPs per image, parameters) when its cells agree; (None, None) without a count (runs made
    before evalsuite counted FLOPs) or when its cells' counts differ (one name, several architectures)."""
    costs = {}
    for model in report.models:
        found = {(c.cost.get("gflops_per_image"), c.cost.get("params")) for (m, _), c in report.cells.items()
                 if m == model and svg.finite(c.cost.get("gflops_per_image"))}
        costs[model] = found.pop() if len(found) == 1 else (None, None)
    return costs


def cost_points(report: Report) -> list:
    """(model, GFLOPs per image, mean rank) of the models with every task (the overall ranking) and a FLOP count."""
    costs = model_costs(report)
    return [(model, costs[model][0], rank) for model, rank, _ in report.overall if costs.get(model, (None,))[0]]


def cost_section(report: Report, table) -> str:
    """The section's HTML; `table(id, header, rows)` lays out a table as the rest of the page does."""
    costs = model_costs(report)
    rows = [[f"<td>{_esc(model)}</td>", f"<td>{_text(gflops)}</td>", f"<td>{_millions(params)}</td>"]
            for model, (gflops, params) in costs.items()]
    intro = ("<h2>Cost</h2><p class=\"muted\">What each model's backbone costs per image whatever ran it: the FLOPs "
             "of one forward pass at the model's input size (matrix products and convolutions, a multiply-add "
             "counted as 2; torch's FlopCounterMode) and its parameters. Models of one architecture and input size "
             "cost the same. – : runs made before evalsuite counted FLOPs.</p>")
    return (intro + table("cost", ["model", "GFLOPs per image", "parameters (M)"], rows)
            + _measured(report, table) + _scatter(report))


def _measured(report: Report, table) -> str:
    cells = [report.cells[(m, t)] for m in report.models for t in report.tasks if (m, t) in report.cells]
    rows = [[f"<td>{_esc(cell.model)}</td>", f"<td>{_esc(cell.task)}</td>"]
            + [f"<td>{_text(cell.cost.get(name))}</td>" for name, _ in MEASURED_FIELDS] for cell in cells]
    note = ("<h3>Measured rates</h3><p class=\"muted\">What each cell's run (its first seed's) measured while "
            "extracting features: images per second end to end and for the forward pass alone, and the "
            "device-hours the task's extraction takes at that rate, on the device named, while the host's "
            "1-minute load average was as shown (a cached run repeats the figures of the run that extracted). They "
            "vary with the device and with whatever else the host runs, so they are not the models' cost.</p>")
    return note + table("measured", ["model", "task", *(title for _, title in MEASURED_FIELDS)], rows)


def _scatter(report: Report) -> str:
    points = cost_points(report)
    if len(points) < 2:
        return ("<p>No accuracy-versus-cost plot: fewer than 2 models have every task and a FLOP count (runs made "
                "before evalsuite counted FLOPs have none: rerun them).</p>")
    front = svg.pareto_front(points, higher_better=False)
    tasks = len(report.tasks if report.ranked_tasks is None else report.ranked_tasks)  # columns of two or more models
    y_title = f"mean rank over {tasks} task{'s' if tasks > 1 else ''} (1 = best)"
    figure = svg.scatter(points, front, "GFLOPs per image (backbone forward)", y_title, higher_better=False,
                         x_unit=" GFLOPs")
    return (f'<h3>Accuracy against cost</h3>{figure}<p id="pareto">Pareto front (no other model needs as few GFLOPs '
            "per image or fewer and ranks as well or better on average, one of them strictly): "
            f"{', '.join(map(_esc, front))}.</p>")


def _text(value) -> str:
    """A cost number at 4 significant digits, a name as it is; missing: a dash."""
    if isinstance(value, str):
        return _esc(value) if value else "–"
    return f"{value:.4g}" if svg.finite(value) else "–"


def _millions(params) -> str:
    return f"{params / MILLION:.3f}" if svg.finite(params) else "–"
