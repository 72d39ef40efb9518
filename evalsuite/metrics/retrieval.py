"""Retrieval metrics from the labels of each query's k nearest database items, and their bootstrap interval.

Input: `neighbour_labels` [queries, K] (the labels of each query's nearest database items, nearest
first) and `query_labels` [queries]. For every k in `ks` (k <= K) and query q with hits
h_j = [label of neighbour j == label of q], j = 1..k:

- `retrieval_acc@k`   = mean_q max_j h_j: a query is correct if ANY of its k nearest shares its label.
- `retrieval_mvacc@k` = mean_q [label of q is a most frequent label among its k nearest]; a tie
  between modes counts as correct when the query's label is one of them.
- `retrieval_map@k`   = mean_q (1/k) sum_j h_j * P@j, with P@j = (h_1 + ... + h_j) / j. The
  denominator is k, not the number of hits nor min(k, relevant items in the database): a query
  whose only hit is at rank 1 scores 1/k, one whose k nearest are all hits scores 1, one with
  no hit 0.

These are exactly Patho-Bench's `top{k}_acc`, `mv@{k}_acc` and `mAP@{k}`: mahmoodlab/Patho-Bench,
patho_bench/experiments/utils/RetrievalMixin.py (acc_at_k, mv_acc_at_k, map_at_k), commit
660e77044640e3d7d2f1150cc6721e97454993bf. THUNDER (MICS-Lab/thunder,
src/thunder/tasks/image_retrieval.py, topk_retrieval, commit 6fe47e0975411bb692263217a816b62a0c809a39)
reports only the majority vote, with a tie going to the smallest label (np.bincount(...).argmax()),
scored as accuracy, balanced accuracy, F1 and Jaccard of that prediction; it has no any-hit
accuracy and no mAP. docs/retrieval.md lists the differences.

Every metric is a mean of per-query values, so a bootstrap draw is a weighted mean of them: the
draws are those of evalsuite.metrics.bootstrap (1000, seeded, clusters resampled with replacement,
2.5 / 97.5 percentiles), query by query unless clusters are given.
"""

import numpy as np

from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, cluster_index, draw_weights

METRIC_PREFIX = "retrieval_"
KINDS = ("acc", "mvacc", "map")


def metric_name(kind: str, k: int) -> str:
    """`retrieval_acc@5`: letters, digits, `_` and `@` only, safe in a CSV cell and a file name."""
    return f"{METRIC_PREFIX}{kind}@{k}"


def _check(neighbour_labels, query_labels, ks) -> tuple[np.ndarray, np.ndarray, list]:
    neighbour_labels = np.asarray(neighbour_labels, dtype=np.int64)
    query_labels = np.asarray(query_labels, dtype=np.int64).reshape(-1)
    if neighbour_labels.ndim != 2 or len(neighbour_labels) != len(query_labels):
        raise ValueError(f"neighbour labels of shape {neighbour_labels.shape} for {len(query_labels)} queries; "
                         "need [queries, k]")
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1 or max(ks) > neighbour_labels.shape[1]:
        raise ValueError(f"ks {ks} must be >= 1 and at most the {neighbour_labels.shape[1]} neighbours given")
    if neighbour_labels.size and min(neighbour_labels.min(), query_labels.min()) < 0:
        raise ValueError("labels must be >= 0")
    return neighbour_labels, query_labels, ks


def _mode_counts(labels: np.ndarray) -> np.ndarray:
    """Per row of [queries, k] labels: how often its most frequent label occurs."""
    queries, _ = labels.shape
    width = int(labels.max()) + 1 if labels.size else 1
    cells = (np.arange(queries)[:, None] * width + labels).reshape(-1)
    return np.bincount(cells, minlength=queries * width).reshape(queries, width).max(axis=1)


def per_query_scores(neighbour_labels, query_labels, ks) -> dict:
    """{metric name: float64 [queries]} for every k in `ks` and every kind, in the module's definitions."""
    neighbour_labels, query_labels, ks = _check(neighbour_labels, query_labels, ks)
    hits_all = neighbour_labels == query_labels[:, None]
    scores = {}
    for k in ks:
        hits = hits_all[:, :k]
        own_count = hits.sum(axis=1)
        precision_at_rank = np.cumsum(hits, axis=1) / np.arange(1, k + 1)
        scores[metric_name("acc", k)] = hits.any(axis=1).astype(np.float64)
        scores[metric_name("mvacc", k)] = (own_count == _mode_counts(neighbour_labels[:, :k])).astype(np.float64)
        scores[metric_name("map", k)] = (precision_at_rank * hits).sum(axis=1) / k
    return scores


def retrieval_metrics(neighbour_labels, query_labels, ks) -> dict:
    """{metric name: mean over queries}; nan when there are no queries."""
    return {name: float(values.mean()) if len(values) else np.nan
            for name, values in per_query_scores(neighbour_labels, query_labels, ks).items()}


def retrieval_draws(scores: dict, draws: int = BOOTSTRAP_DRAWS, seed: int = 0, groups=None) -> dict:
    """{metric: float64 [draws]}: the mean of each per-query score in `scores` in each bootstrap draw.

    `groups`: a cluster id per query (e.g. its patient) to resample clusters instead of queries. The draws
    are evalsuite.metrics.bootstrap's for the same seed; fewer than two clusters give none."""
    names = list(scores)
    values = np.stack([np.asarray(scores[n], dtype=np.float64) for n in names], axis=1) if names else np.zeros((0, 0))
    if cluster_index(groups, len(values))[1] < 2:
        return {name: np.zeros(0) for name in names}
    means = np.stack([weights @ values / weights.sum() for weights in draw_weights(groups, len(values), draws, seed)])
    return {name: means[:, i] for i, name in enumerate(names)}
