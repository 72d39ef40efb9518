"""The probe a wide-table cell shows when there is no genuine val to choose it on (reporting/table/wide.py).

A task whose val is another split's items (HEST-Benchmark: val is each fold's train, readers/spots/hest.py) has
in-sample val scores, on which the probe that fits its training data closest would win. Runs write no rows for such
a split (runner.py); runs written before that wrote val rows equal to their train rows, recognised here by that
equality. Such a cell shows the card's recipe when the task's card names exactly one of its probes; else the user
names one with --probe.
"""

import functools
from collections import defaultdict

from evalsuite.errors import EvalsuiteError
from evalsuite.tasks.cards import load_card


def in_sample_val(rows: list[dict]) -> frozenset:
    """(model, task, probe) with a run whose val rows are its train rows: every metric, value and n_samples equal."""
    per_run = defaultdict(lambda: {"train": set(), "val": set()})
    for row in rows:
        if row["split"] in ("train", "val"):
            run = (row["model"], row["task"], row["probe"], row["run_id"], row["seed"])
            # The stored 6 decimals: a NaN equals a NaN here, as both splits wrote the same "nan".
            per_run[run][row["split"]].add((row["metric"], f"{row['value']:.6f}", str(row.get("n_samples", ""))))
    return frozenset(run[:3] for run, splits in per_run.items() if splits["val"] and splits["val"] == splits["train"])


def probe_without_val(model: str, task: str, probes: list, in_sample: bool, source: str) -> str:
    """The card's recipe among `probes` (the cell's probes, two or more), or the one-line error naming the fix."""
    named = [probe for probe in _card_probes(task) if probe in probes]
    if len(named) == 1:
        return named[0]
    why = ("its val rows are its train scores (the task has no val split)" if in_sample
           else f"there are no val rows in {source}")
    raise EvalsuiteError(f"model '{model}' on task '{task}' has probes {', '.join(probes)} but {why}, so none can be "
                         "chosen between them; pass --probe NAME")


@functools.cache
def _card_probes(task: str) -> tuple:
    """The default recipes of the shipped card named `task`; none for a card run from a path of its own."""
    try:
        card = load_card(task)
    except EvalsuiteError:
        return ()
    return tuple(card.probes) if card.name == task else ()
