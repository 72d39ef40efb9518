"""The report page's words that are not a number: what a seed varies and why a cell can show ± 0, what the notes are,
why the overall ranking has no interval and which columns it runs over, and whose random-init floor a row is (issue
41, issue 49: each model's own floor, reporting/table/floors.py).

What a seed varies is read off the probes (evalsuite/probes/): the seed reaches the probe only. Features are
extracted once per (backbone, split) and cached, and a `--random-init` backbone draws its weights from one fixed seed
(models/backbones.py, RANDOM_INIT_SEED), so two seeds of a run score the same features."""

import html

from evalsuite.reporting.page.data import Report

SEEDS = (
    "<p class=\"muted\" id=\"seeds\"><b>What a seed varies.</b> The probe, never the backbone: the frozen backbone's "
    "features are extracted once and cached (a <code>--random-init</code> backbone's weights come from one fixed "
    "seed, whatever the run's seeds), and each seed fits the probe again on the same features. In the linear and "
    "mean-pool probes the seed sets the heads' initial weights and the order of the mini-batches; in ABMIL the "
    "initial weights, dropout masks, bag order and tile subsets; in the segmentation heads the initial weights and "
    "batch order; in the few-shot probe the support sets drawn. kNN (ties broken by summed similarity, not by "
    "chance), ridge (solved in closed form), the mean-pool Cox model (zero start, whole split per step) and retrieval "
    "use no randomness. <b>Why a cell can show ± 0.</b> The ± is the spread over seeds of the probe alone. A probe "
    "without randomness gives the same number for every seed, and a linear probe trained to convergence on features "
    "that separate the classes well reaches the same test predictions from any start and batch order. ± 0 is not a "
    "broken seed, nor a claim of certainty: the uncertainty of the test set is the [lo, hi] interval (the test "
    "items resampled).</p>")

NOTES_INTRO = (
    "<p class=\"muted\">What the page could not compute, and why: a column marked <span class=\"untested\">?</span> "
    "(the task and why it could not be tested: no stored test predictions, a damaged predictions file, seeds tested "
    "on other items, a test split of one cluster, or a metric not scored per item), intervals that treat test items "
    "as independent (no patient or slide ids known), a task without the draws the overall ranking's interval "
    "needs, columns whose models computed in different precisions, and a model whose random-init floor is "
    "ambiguous.</p>")


def _column_gap(report: Report, task: str) -> str:
    """Why `task` has no bootstrap draws: the column's untested reason, else the rule that left it out."""
    cells = [cell for (_, name), cell in report.cells.items() if name == task]
    reason = next((cell.untested for cell in cells if cell.untested), "")
    if reason:
        return reason
    return "one model: nothing to rank it against" if len(cells) < 2 else "no bootstrap draws"


def overall_gap(report: Report) -> str:
    """Why the overall ranking shows no interval: each task whose column has no rank intervals, and why."""
    tasks = report.tasks if report.ranked_tasks is None else report.ranked_tasks  # the columns the ranking counts
    lacking = [task for task in tasks if not any(cell.rank_interval for (_, name), cell in report.cells.items()
                                                 if name == task)]
    return "; ".join(f"{task}: {_column_gap(report, task)}" for task in lacking) or "no bootstrap draws"


def overall_gap_cell(report: Report, rows: int) -> str:
    """One cell beside every model's mean rank (rowspan): which task lacks an interval and why, said once."""
    return (f'<td rowspan="{rows}" class="gap">none: the interval needs every task\'s draws, and '
            f"{html.escape(overall_gap(report))}</td>")


def floor_label(report: Report, model: str) -> str | None:
    """What a random-init model's row says, once: `random-init floor` (of the model its label extends, X+random-init),
    `random-init floor of X, Y` (paired by architecture), with the tasks where it is one if not all of the page's;
    `random-init (no model of its own here)` for one that is no shown model's floor. None: not a random-init model."""
    if model not in report.random_init:
        return None
    owners = report.random_init[model]
    if not owners:
        return "random-init (no model of its own here)"
    tasks = sorted({task for (owner, task), (floor, _) in report.floors.items() if floor == model and owner in owners},
                   key=report.tasks.index)
    where = "" if len(tasks) == len(report.tasks) else f" ({', '.join(tasks)})"
    whose = "" if owners == [model.replace("+random-init", "", 1)] else f" of {', '.join(owners)}"
    return f"random-init floor{whose}{where}"


def overall_rule(report: Report) -> str:
    """Which columns the overall ranking runs over (two or more models) and which it leaves out."""
    used = report.tasks if report.ranked_tasks is None else report.ranked_tasks
    reasons = {}
    for task in (task for task in report.tasks if task not in used):
        models = sum(name == task for _, name in report.cells)
        reasons.setdefault("one model, whose rank there ranks nothing" if models < 2 else "no finite mean",
                           []).append(task)
    left = "; ".join(f"{', '.join(tasks)} left out: {why}" for why, tasks in reasons.items())
    over = f"over {', '.join(used) or 'no column'}, the columns with two or more models"
    return over + (f" ({left})" if left else "")
