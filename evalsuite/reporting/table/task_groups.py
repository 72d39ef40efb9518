"""Which columns a figure over tasks may run over (issue 49 item 5).

- The overall ranking (rank sum, mean rank, its interval, the report's overall ranking) counts only the columns
  where a rank says something: ranked (some finite mean) and shown by two or more models. A model alone in a
  column is "#1" there whatever its score, so demo_seg and demo_slide with one model each gave that model a mean
  rank of 1.00 before.
- A mean of scores (`mean_<metric>_over_<n>_tasks`) runs over tasks of one metric *and one task kind*: a tile
  task's balanced accuracy over test tiles and a slide task's over test slides are different quantities. A metric
  shown by tasks of several kinds gets one mean per kind, named for it (`mean_balanced_accuracy_over_2_slide_tasks`).

A task's kind is its card's (tasks/kinds.py): the card the task's run JSON names (`task.path`), else the shipped
card of that name; "" when neither can be read (a leaderboard written elsewhere, a card since removed). Tasks of
an unknown kind are grouped only with each other.
"""

import functools
import json
import math
from collections import Counter
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.results.run_json import RUNS_FOLDER

MIN_MODELS = 2  # a column ranks something only with two or more models
UNKNOWN_KIND = "unknown-kind"  # in a mean column's name, for tasks whose card could not be read


def overall_columns(columns: dict) -> list:
    """The tasks of {task: [Cell]} (in its order) that the overall ranking runs over: two or more models and at
    least one rank (a column without a finite mean is not ranked)."""
    return [task for task, cells in columns.items()
            if len(cells) >= MIN_MODELS and any(not math.isnan(cell.rank) for cell in cells)]


def left_out_text(table) -> str:
    """"t3, t4 left out: one model; t5: no finite mean" for the columns of a WideTable the ranking does not count
    ("" when it counts every column)."""
    used, reasons = overall_columns(_columns(table)), {}
    for task, cells in _columns(table).items():
        if task not in used:
            reasons.setdefault("one model, whose rank there ranks nothing" if len(cells) < MIN_MODELS
                               else "no finite mean", []).append(task)
    return "; ".join(f"{', '.join(tasks)} left out: {why}" for why, tasks in reasons.items())


def _columns(table) -> dict:
    return {task: [row.cells[task] for row in table.rows if task in row.cells] for task in table.tasks}


def mean_groups(tasks: list, metrics: dict, kinds: dict) -> dict:
    """{key: (metric, kind, [tasks])}: the groups a mean of scores may run over, one metric and one kind each, tasks
    in `tasks` order. The key is the metric, or "KIND METRIC" where tasks of several kinds show that metric."""
    groups = {}
    for task in tasks:
        groups.setdefault((metrics[task], kinds.get(task, "")), []).append(task)
    kinds_of = Counter(metric for metric, _ in groups)
    return {(metric if kinds_of[metric] == 1 else f"{kind or UNKNOWN_KIND} {metric}"): (metric, kind, found)
            for (metric, kind), found in groups.items()}


def mean_column_name(key: str, group: tuple) -> str:
    """`mean_balanced_accuracy_over_3_tasks`; with the kind where the metric spans kinds:
    `mean_balanced_accuracy_over_2_slide_tasks`."""
    metric, kind, tasks = group
    where = "" if key == metric else f"{kind or UNKNOWN_KIND}_"
    return f"mean_{metric}_over_{len(tasks)}_{where}tasks"


def task_kinds(rows: list, metrics: dict, out_dir=None) -> dict:
    """{task: kind} of the tasks whose metric another task shows too (the only ones a mean could mix); the others
    are never averaged with anything, so their cards are not read."""
    shown = Counter(metrics.values())
    wanted = {task for task, metric in metrics.items() if shown[metric] > 1}
    runs = {}
    for row in rows:
        if row["task"] in wanted:
            runs.setdefault(row["task"], row["run_id"])
    return {task: _kind(task, runs.get(task), out_dir) for task in sorted(wanted)}


def _kind(task: str, run_id: str | None, out_dir) -> str:
    card = _card_path(Path(out_dir) / RUNS_FOLDER / f"{run_id}.json") if out_dir and run_id else None
    return (_card_kind(card, None) if card else "") or _card_kind(task, task)


def _card_path(path: Path) -> str | None:
    try:
        task = json.loads(path.read_text()).get("task")
    except (OSError, ValueError, AttributeError):  # no run JSON (rows written elsewhere), or a damaged one
        return None
    card = task.get("path") if isinstance(task, dict) else None
    return card if isinstance(card, str) and card else None


@functools.lru_cache(maxsize=256)
def _card_kind(card: str, name: str | None) -> str:
    """The kind of the card at path or name `card` ("" when it cannot be read; with `name`, also when the card
    found has another name)."""
    from evalsuite.tasks.cards import load_card

    try:
        loaded = load_card(card)
    except (EvalsuiteError, OSError, ValueError):
        return ""
    return loaded.kind if name is None or loaded.name == name else ""
