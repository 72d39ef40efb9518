"""What `sweep run` says about its cells: the plan before the first one, each finished cell's headline score, and
the time left, estimated per task from the cells that finished.

One estimate for every cell was wrong by the ratio of the tasks' costs: a segmentation cell (dense features,
masks) costs many times a tile cell, so a sweep that started with a cheap cell promised minutes and took hours.
A cell not yet seen is estimated from finished cells of its task, else of its task kind, else of all of them.
"""

import collections
import functools
import statistics

from evalsuite.errors import EvalsuiteError


@functools.lru_cache(maxsize=None)
def task_kind(task: str) -> str:
    """The card's kind (tile, segmentation, slide, ...); "unknown" for a card that does not load (its cell fails
    with the card's own error)."""
    from evalsuite.tasks.cards import load_card

    try:
        return load_card(task).kind
    except (EvalsuiteError, OSError):
        return "unknown"


def plan_line(sweep, cells: list, busy: set, done: set, pending: list) -> str:
    """`sweep NAME: N cells (M models x T tasks, S seeds): D done, B queued or running elsewhere, R to run (by
    kind: ...)`, said before the first cell."""
    kinds = collections.Counter(task_kind(cell.task.task) for cell in pending)
    by_kind = f" ({', '.join(f'{kind} {count}' for kind, count in sorted(kinds.items()))})" if kinds else ""
    return (f"sweep {sweep.name}: {len(cells)} cells ({len(sweep.models)} models x {len(sweep.tasks)} tasks, "
            f"{len(sweep.seeds)} seed(s)): {len(done)} done, {len(busy)} queued or running elsewhere, "
            f"{len(pending)} to run{by_kind}")


def headline(record: dict) -> str:
    """The test headline of a run, per probe (the mean over its seeds): `test balanced_accuracy: knn 0.7173`."""
    metric = record["task"]["selection_metric"]
    values = {}
    for probe in record.get("probes") or []:
        value = ((probe.get("metrics") or {}).get("test") or {}).get(metric)
        if isinstance(value, (int, float)):
            values.setdefault(probe["probe"], []).append(value)
    scores = ", ".join(f"{name} {statistics.fmean(found):.4f}" for name, found in values.items())
    return f"test {metric}: {scores}" if scores else f"test {metric}: none scored"


class TimeLeft:
    """Seconds of the cells not run yet, each estimated from finished cells like it (module docstring)."""

    def __init__(self):
        self.by_task, self.by_kind, self.all = {}, {}, []

    def finished(self, cell, seconds: float) -> None:
        self.by_task.setdefault(cell.task.task, []).append(seconds)
        self.by_kind.setdefault(task_kind(cell.task.task), []).append(seconds)
        self.all.append(seconds)

    def seconds(self, rest: list) -> float:
        return sum(self._estimate(cell) for cell in rest)

    def _estimate(self, cell) -> float:
        seen = self.by_task.get(cell.task.task) or self.by_kind.get(task_kind(cell.task.task)) or self.all
        return statistics.fmean(seen) if seen else 0.0
