"""Whether a slide split can be scored: checked on the manifest before any slide is tiled, and again on the slides
`--skip-bad-slides` keeps, as soon as tiling has found the bad ones (before any tile is embedded).

Why: a split that cannot be scored used to be found after its extraction, or not at all. Harrell's C counts
comparable pairs of patients (metrics/survival.py): a split of one patient has none, so its c_index is nan, and
that nan was written to the table and the leaderboard with exit 0. A classification split needs two classes; the
runner checks the manifest's labels (probes/_validate.py), and this module what is left of them after skipping.
"""

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.patients import first_slides

SHOWN = 5  # skipped slides named in a refusal


def check_manifest_splits(records: list, splits: list, source, survival: bool) -> None:
    """Every split of the card holds slides, and for survival, two patients with a comparable pair."""
    if survival and len({record.patient for record in records}) == 1:  # else said as a split without slides
        raise EvalsuiteError(f"slide manifest {source} lists {len(records)} slides of one patient "
                             f"('{records[0].patient}'); survival is scored by comparing patients (Harrell's C), so "
                             "every split needs two patients or more: add slides of other patients")
    for split in splits:
        in_split = [record for record in records if record.split == split]
        if not in_split:
            raise EvalsuiteError(f"slide manifest {source}: the {split} split has no slide: give every split slides "
                                 "(the split column, or more patients to deal into folds)")
        problem = _survival_problem(in_split) if survival else None
        if problem:
            raise EvalsuiteError(f"slide manifest {source}: the {split} split has {problem[0]}; {problem[1]}: give "
                                 "every split two patients or more, with events (the split column, or the time and "
                                 "event columns)")


def check_kept_split(records: list, split: str, skipped: list, survival: bool, classes: list) -> None:
    """`records`: the slides of `split` that tiling kept; `skipped`: the layout's [{"slide": id, ...}] it left out.
    The class wording is the runner's after extraction (probes/_validate.py), which still covers a cached layout."""
    problem = _survival_problem(records) if survival else _class_problem(records, classes)
    if problem:
        names = [str(s.get("slide", "?")) for s in skipped]
        shown = ", ".join(names[:SHOWN]) + (" ..." if len(names) > SHOWN else "")
        more = "slides of other patients" if survival else "slides of the other classes"
        raise EvalsuiteError(f"refusing to score the {split} split: --skip-bad-slides left out {len(names)} slide(s) "
                             f"({shown}) and {problem[0]} is left; {problem[1]}: fix those slides or add {more}")


def _class_problem(records: list, classes: list) -> tuple | None:
    present = sorted({record.target[0] for record in records})
    if len(present) >= 2:
        return None
    names = ", ".join(classes[c] for c in present)
    return f"only class {names} ({len(records)} items)", "one class cannot be scored (balanced accuracy would be 1.000)"


def _survival_problem(records: list) -> tuple | None:
    """(what the slides' patients are, why Harrell's C of them is undefined), or None where it is defined."""
    patients = first_slides(records)
    if len(patients) == 1:
        return (f"one patient ('{patients[0].patient}', {len(records)} slides)",
                "Harrell's C compares patients, so one patient has no concordance index")
    if not has_comparable_pair(np.array([p.target for p in patients], dtype=np.float64)):
        return (f"no comparable pair of its {len(patients)} patients",
                "Harrell's C needs a pair with an observed event before the other patient's time (or at a time the "
                "other is censored)")
    return None


def has_comparable_pair(targets: np.ndarray) -> bool:
    """Whether (time, event) rows hold a pair Harrell's C counts. The earliest event compares with any later time,
    or a censoring at its time; if it compares with none, no later event can (no time is later than it)."""
    times, events = targets[:, 0], targets[:, 1] == 1
    if not events.any():
        return False
    first = times[events].min()
    return bool(((times > first) | ((times == first) & ~events)).any())
