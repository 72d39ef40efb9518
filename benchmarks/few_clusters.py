"""Are intervals and best sets honest when the test split has few clusters (patients, slides, tissue types)?

What is simulated
-----------------
A column of k models scored by accuracy on K clusters of 50 test items each (issue 47's design: a per-cluster effect
on the difference between models). On the logit scale an item's chance of being right is 1 + u_c + v_mc + e_i:
u_c ~ N(0, 0.5^2) the cluster's difficulty, shared by the models; v_mc ~ N(0, 0.3^2) the model's own effect in that
cluster (so models differ patient by patient, equal on average); e_i ~ N(0, 1) the item's difficulty, shared. Each
model is right on an item with that chance (its own coin). The draws are the suite's own (`draw_blocks`: 1000
cluster-bootstrap draws), a model's score in a draw is its accuracy under the draw's item weights.

- coverage: the share of columns whose 95 % interval of model 0's accuracy holds the true expected accuracy (over
  clusters, items and coins: Monte Carlo with 2 million items);
- error: all k models equal on average; the share of columns in which the 95 % model confidence set leaves any out;
- power: the last model 0.3 lower on the logit scale (about 0.05 in accuracy); the share of columns leaving it out.

Two rules: "before" is the percentile interval and the MCS on the draws as they are (any K >= 2); "now" is
evalsuite.metrics.few_clusters: the interval of the draws read through the t(K - 1) map, the MCS from the wild
cluster bootstrap-t of the models' leave-one-cluster-out accuracies (K <= WILD_MAX_CLUSTERS), and nothing shown below
MIN_CLUSTERS: those rows are labelled "not shown" and give what the rule would have shown (why it is not). Each share
is printed with its binomial standard error. The figures depend on this design, not on the machine; the time per
column does (host beside it).

Run: ``python benchmarks/few_clusters.py`` (about 10 minutes on 2 cores), ``--columns N`` for fewer columns.
"""

import argparse
import math
import sys
import time

import numpy as np
from _shared import format_table, host_tag, machine_line

from evalsuite.metrics.draw_scores import draw_blocks
from evalsuite.metrics.few_clusters import MIN_CLUSTERS, WILD_MAX_CLUSTERS, leave_one_out_weights, widened
from evalsuite.metrics.multiple_comparisons import model_confidence_set

ITEMS_PER_CLUSTER, DRAWS = 50, 1000
CLUSTER_SD, MODEL_SD, ITEM_SD, LOGIT_MEAN, GAP_LOGIT = 0.5, 0.3, 1.0, 1.0, 0.3
CLUSTER_COUNTS = (3, 4, 5, 10, 20, 30)
MODEL_COUNTS = (2, 5, 10)


def true_accuracy(seed: int = 1, samples: int = 2_000_000) -> float:
    """The expected accuracy of a model over new clusters, items and coins (every model's, when they are equal)."""
    logits = np.random.default_rng(seed).normal(LOGIT_MEAN, math.hypot(CLUSTER_SD, MODEL_SD, ITEM_SD), samples)
    return float(np.mean(1 / (1 + np.exp(-logits))))


class Design:
    """One cluster count's test split: the cluster of each item and the bootstrap's item weights [draws, items]."""

    def __init__(self, clusters: int, seed: int = 0):
        self.clusters = clusters
        self.of_item = np.repeat(np.arange(clusters), ITEMS_PER_CLUSTER)
        self.weights = np.concatenate(list(draw_blocks(self.of_item, len(self.of_item), DRAWS, seed)))
        self.left_out = leave_one_out_weights(self.of_item, len(self.of_item))  # [K, items]

    def column(self, rng, models: int, lowered: bool = False) -> tuple:
        """(observed accuracies [models], per-draw accuracies [draws, models], accuracies with each cluster left
        out [K, models]); with `lowered`, the last model is GAP_LOGIT worse on every item."""
        items = len(self.of_item)
        cluster = rng.normal(0, CLUSTER_SD, self.clusters)[self.of_item]
        own = rng.normal(0, MODEL_SD, (models, self.clusters))[:, self.of_item].T  # [items, models]
        logits = LOGIT_MEAN + cluster[:, None] + own + rng.normal(0, ITEM_SD, items)[:, None]
        if lowered:
            logits[:, -1] -= GAP_LOGIT
        correct = (rng.random((items, models)) < 1 / (1 + np.exp(-logits))).astype(np.float64)
        return (correct.mean(axis=0), self.weights @ correct / self.weights.sum(axis=1, keepdims=True),
                self.left_out @ correct / self.left_out.sum(axis=1, keepdims=True))


def covers(observed: float, draws: np.ndarray, truth: float, clusters: int | None) -> bool:
    shown = draws if clusters is None else widened(draws, observed, clusters)
    low, high = np.percentile(shown, [2.5, 97.5])
    return bool(low <= truth <= high)


def leaves_out(observed: np.ndarray, draws: np.ndarray, left_out: np.ndarray, clusters: int | None,
               seed: int = 0) -> set:
    """The models the 95 % set leaves out: before (`clusters` None) from the draws as they are; now as the column
    statistics do (reporting/statistics/column_statistics.py), the wild bootstrap-t up to WILD_MAX_CLUSTERS."""
    wild = clusters is not None and clusters <= WILD_MAX_CLUSTERS
    found = model_confidence_set(dict(enumerate(observed)), dict(enumerate(draws.T)), until_alpha=True,
                                 clusters=clusters, left_out=dict(enumerate(left_out.T)) if wild else None, seed=seed)
    return set(range(len(observed))) - set(found.members)


def share(hits: int, total: int) -> str:
    rate = hits / total
    return f"{rate:.3f} ± {math.sqrt(max(rate * (1 - rate), 1e-12) / total):.3f}"


def rule_rows(clusters: int, models: int, columns: int, truth: float) -> list:
    """One row per rule: K, k, rule, coverage, error, power, ms per column."""
    design, rows = Design(clusters), []
    now = "now" if clusters >= MIN_CLUSTERS else "now: not shown"
    for rule, corrected in (("before", None), (now, clusters)):
        rng = np.random.default_rng(1000 * clusters + models)
        started = time.perf_counter()
        equal = [design.column(rng, models) for _ in range(columns)]
        covered = sum(covers(o[0], d[:, 0], truth, corrected) for o, d, _ in equal)
        wrong = sum(bool(leaves_out(*column, corrected, seed)) for seed, column in enumerate(equal))
        found = sum(models - 1 in leaves_out(*design.column(rng, models, True), corrected, seed)
                    for seed in range(columns))
        per_column_ms = (time.perf_counter() - started) / (2 * columns) * 1e3
        rows.append([clusters, models, rule, share(covered, columns), share(wrong, columns), share(found, columns),
                     f"{per_column_ms:.1f}"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", type=int, default=1000, help="simulated columns per row (default 1000)")
    args = parser.parse_args(argv)
    if args.columns < 10:
        parser.error("--columns >= 10")
    print(machine_line(), flush=True)
    truth = true_accuracy()
    print(f"{args.columns} columns per row, {ITEMS_PER_CLUSTER} items per cluster, {DRAWS} draws, true accuracy "
          f"{truth:.4f}, MIN_CLUSTERS {MIN_CLUSTERS} ({host_tag()})")
    rows = [row for clusters in CLUSTER_COUNTS for models in MODEL_COUNTS
            for row in rule_rows(clusters, models, args.columns, truth)]
    print(format_table(["clusters K", "models k", "rule", "coverage (95 % interval)", "error (equal models)",
                        "power (one 0.3 logit below)", "ms per column"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
