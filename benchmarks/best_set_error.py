"""How often the best set and `--compare` are wrong where the truth is known, and how often they find a real gap.

What is simulated
-----------------
Columns of k models scored on 1,000 test items (accuracy). Every item has a chance of being right drawn once per
column from Beta(4, 1) (mean 0.8) and shared by all models, so the models are correlated as real backbones are; each
model is right on an item with that chance (its own coin). The draws are the suite's own (`draw_blocks`: the item
bootstrap, 1000 draws, seed 0), and a model's score in a draw is its accuracy under the draw's item weights.

- error: all k models equal; the share of columns in which any model is left out of the 95 % model confidence set
  (must be at most 0.05, within the simulation's error), beside the procedure the report used before issue 38: the
  best chosen from the observed scores, then the paired bootstrap p of the best against each other model,
  Holm-adjusted over the k - 1 comparisons, "worse" when p_holm < 0.05.
- power: one model's chance of being right lowered by 0.05 on every item (its accuracy about 0.05 below the others);
  the share of columns in which that model is left out of the set.
- `--compare` over 30 tasks: A and B equal on every task (error: any task's verdict says one is better), and A 0.05
  better on 5 of the 30 (power: the share of those 5 found), with the step-down max-t adjustment.
Each share is printed with its binomial standard error. The figures depend on this simulation's design (item
difficulty, 1,000 items, accuracy), not on the machine; the time per column does (host beside it).

Run: ``python benchmarks/best_set_error.py`` (a few minutes on 2 cores), ``--columns N`` for fewer columns.
"""

import argparse
import math
import sys
import time

import numpy as np
from _shared import format_table, host_tag, machine_line

from evalsuite.metrics.draw_scores import draw_blocks
from evalsuite.metrics.multiple_comparisons import ALPHA, model_confidence_set, stepdown_max_t
from evalsuite.metrics.significance import bootstrap_p_value

ITEMS, DRAWS, GAP = 1000, 1000, 0.05
MODELS = (2, 5, 10, 30)


def scored_models(rng, weights: np.ndarray, models: int, lowered: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(observed accuracies [models], per-draw accuracies [draws, models]); the last `lowered` models are GAP worse."""
    chance = rng.beta(4, 1, size=ITEMS)[:, None] - np.r_[np.zeros(models - lowered), np.full(lowered, GAP)]
    correct = (rng.random((ITEMS, models)) < chance).astype(np.float64)
    return correct.mean(axis=0), weights @ correct / ITEMS


def left_out(observed: np.ndarray, per_draw: np.ndarray) -> set:
    found = model_confidence_set(dict(enumerate(observed)), dict(enumerate(per_draw.T)), until_alpha=True)
    return set(range(len(observed))) - set(found.members)


def holm_worse(observed: np.ndarray, per_draw: np.ndarray) -> bool:
    """The pre-issue-38 rule: any model Holm-significantly worse than the observed best."""
    best = int(np.argmax(observed))
    p = np.sort([bootstrap_p_value(per_draw[:, best] - per_draw[:, j]) for j in range(len(observed)) if j != best])
    holm = np.maximum.accumulate(np.minimum(1.0, p * np.arange(len(p), 0, -1)))
    return bool((holm < ALPHA).any())


def share(hits: int, total: int) -> str:
    rate = hits / total
    return f"{rate:.3f} ± {math.sqrt(max(rate * (1 - rate), 1e-12) / total):.3f}"


def best_set_rows(weights: np.ndarray, columns: int) -> list:
    rows = []
    for models in MODELS:
        rng = np.random.default_rng(models)
        started = time.perf_counter()
        equal = [scored_models(rng, weights, models) for _ in range(columns)]
        wrong = sum(bool(left_out(*column)) for column in equal)
        holm = sum(holm_worse(*column) for column in equal)
        found = sum(models - 1 in left_out(*scored_models(rng, weights, models, 1)) for _ in range(columns))
        per_column_ms = (time.perf_counter() - started) / (3 * columns) * 1e3
        rows.append([models, share(wrong, columns), share(holm, columns), share(found, columns),
                     f"{per_column_ms:.1f}"])
    return rows


def compare_rows(weights: np.ndarray, columns: int, tasks: int = 30, better: int = 5) -> list:
    rng = np.random.default_rng(99)
    wrong, found = 0, 0
    for _ in range(columns):
        for lowered, tally in ((0, "wrong"), (better, "found")):
            differences, draws = [], []
            for task in range(tasks):
                observed, per_draw = scored_models(rng, weights, 2, 1 if task < lowered else 0)
                differences.append(observed[1] - observed[0])  # B - A: negative where A is better
                draws.append(per_draw[:, 1] - per_draw[:, 0])
            significant = stepdown_max_t(np.array(differences), np.stack(draws, axis=1)) < ALPHA
            if tally == "wrong":
                wrong += bool(significant.any())
            else:
                found += int(significant[:better].sum())
    return [[tasks, share(wrong, columns), share(found, columns * better)]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", type=int, default=1000, help="simulated columns per row (default 1000)")
    args = parser.parse_args(argv)
    if args.columns < 10:
        parser.error("--columns >= 10")
    print(machine_line(), flush=True)
    weights = np.concatenate(list(draw_blocks(None, ITEMS, DRAWS, 0)))
    print(f"best set at 95 %, {args.columns} columns per row, {ITEMS} items, {DRAWS} draws ({host_tag()})")
    print(format_table(["models", "error (equal models)", "error, Holm vs observed best", f"power ({GAP} below)",
                        "ms per column"], best_set_rows(weights, args.columns)))
    print(f"\n--compare A B, step-down max-t at {ALPHA}, {args.columns // 10} simulated sweeps ({host_tag()})")
    print(format_table(["tasks", "error (A = B everywhere)", f"power (A {GAP} better on 5 tasks)"],
                       compare_rows(weights, max(10, args.columns // 10))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
