"""The one rule that carves a validation split out of train, for every reader whose dataset has none."""

import numpy as np


def carve_val(labels: np.ndarray, fraction: float, seed: int, groups=None) -> np.ndarray:
    """Boolean mask of the samples moved to val: a seeded, class-stratified share of units.

    A unit is one sample, or one group (e.g. a patient) when `groups` is given, so a group
    never straddles train and val. In each class (a group's class is that of its first sample)
    round(fraction * units) units go to val, at least one and never all of them when the
    class has two or more units. The choice depends only on the sorted unit ids and the seed.
    """
    labels = np.asarray(labels)
    units = np.arange(len(labels)) if groups is None else np.asarray(groups)
    unit_ids, first = np.unique(units, return_index=True)
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = unit_ids[labels[first] == label]
        n_val = min(max(int(round(fraction * len(members))), 1), len(members) - 1)
        if n_val > 0:
            chosen += list(rng.permutation(members)[:n_val])
    return np.isin(units, np.array(chosen, dtype=units.dtype))


def carve_val_units(units: list, fraction: float, seed: int) -> set:
    """The names among `units` (images or patients; repeats allowed) that `carve_val` sends to val, all of one
    class: round(fraction x count), at least one and never all of two or more."""
    ordered = np.array(sorted(set(units)))
    if not len(ordered):
        return set()
    return set(ordered[carve_val(np.zeros(len(ordered), dtype=np.int64), fraction, seed, groups=ordered)].tolist())
