"""Numeric reader arguments of a task card (`reader.args`), checked before any file is read.

Why: readers passed them to int() and numpy unchecked, so `folds: .inf` or `folds: 100000000000000000000` was an
internal OverflowError, `val_fraction: .nan` a ValueError deep in the val carving, `val_fraction: 1.5` was accepted
(carve_val then moves all but one unit of each class to val), and `folds: 1` blamed a split column the manifest
does not have. Each error names the card, the argument and the range a reader accepts.
"""

import math

from evalsuite.errors import EvalsuiteError

MIN_FOLDS = 2  # fold `test_fold` is test and the others train: one fold leaves nothing to train on


def _where(card, name: str) -> str:
    return f"task card {card.path}: reader.args.{name}"


def checked_integer(card, name: str, value, minimum: int, maximum: int | None = None, why: str = "") -> int:
    """`value` when it is an integer in minimum..maximum (no upper bound when None); else one line naming the card.
    YAML's `3.0`, `.inf` and `'3'` are not integers, nor is `true`."""
    upper = f" and at most {maximum}" if maximum is not None else ""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or \
            (maximum is not None and value > maximum):
        raise EvalsuiteError(f"{_where(card, name)} must be an integer of at least {minimum}{upper}{why}, "
                             f"got {value!r}")
    return value


def checked_fraction(card, name: str, value) -> float:
    """`value` when it is a number strictly between 0 and 1 (a share of units moved to val); NaN is not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value < 1:
        raise EvalsuiteError(f"{_where(card, name)} must be a number between 0 and 1, exclusive (the share of "
                             f"train's units moved to val, e.g. 0.2), got {value!r}")
    return float(value)


def checked_seed(card, name: str, value) -> int:
    """A seed numpy's default_rng takes: a non-negative integer."""
    return checked_integer(card, name, value, 0)


def checked_fold_args(card, folds, test_fold, val_fraction, seed) -> tuple[int, int, float, int]:
    """(folds, test_fold, val_fraction, seed) of the manifest readers (tile_csv, slide_csv) that deal patients into
    seeded folds and carve val from train (slides/slide_manifest.py `assign_splits`)."""
    folds = checked_integer(card, "folds", folds, MIN_FOLDS,
                            why=" (fold test_fold is test, the others train: one fold leaves no train)")
    test_fold = checked_integer(card, "test_fold", test_fold, 0, folds - 1, why=f" (folds: {folds})")
    return folds, test_fold, checked_fraction(card, "val_fraction", val_fraction), checked_seed(card, "seed", seed)
