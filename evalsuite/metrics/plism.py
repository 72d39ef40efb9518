"""PLISM robustness metrics as plismbench computes them: per slide pair, then aggregated over pair groups.

PLISM (Ochi et al. 2024, Sci Data 11:330) is one tissue microarray stained 13 ways and scanned on 7 devices; its
slides are registered to GMH_S60, so tile t of every slide shows the same tissue. For each unordered pair of slides
(A, B) with the same tiles, in the same order:

- cosine similarity: the mean over tiles t of cos(a_t, b_t);
- top-k accuracy: every tile of A and of B is a query; the candidates are the other 2n - 1 tiles of A and B (the
  query itself excluded); a hit when b_t (for a_t; a_t for b_t) is among the k candidates most cosine-similar to
  the query. The two directions' accuracies are averaged (k = 1, 3, 5, 10).

Pairs are grouped by what differs between the two slides: all pairs; cross-scanner (same staining, so another
scanner); cross-staining (same scanner, so another staining); cross-scanner-and-staining (both differ). Each
group's metric is summarised over its pairs as mean, std (population, ddof 0), median and IQR (numpy's linear
quantiles 0.75 - 0.25). The leaderboard metric is the mean of four medians: cosine similarity over all pairs and
top-10 accuracy over each of the three other groups.

Read from owkin/plism-benchmark at b4f32b7c233e0f5ba8340da89ef65803cfc2ce49: plismbench/metrics/
cosine_similarity.py, plismbench/metrics/retrieval.py, plismbench/utils/aggregate.py (groups and statistics),
plismbench/utils/metrics.py (get_leaderboard_results) and README.md. Differences, on purpose:
- plismbench casts features to float16 and multiplies in float16; here the cached float16 features are multiplied
  in float32 (last-digit differences);
- plismbench takes neighbours 1..k of numpy's argpartition, so it drops the query only when the query is strictly
  its own nearest candidate and breaks ties arbitrarily; here the query is always excluded and a tie with the match
  counts for the match (a hit when fewer than k candidates are strictly closer than it);
- plismbench rounds each statistic to 3 decimals before averaging them into the leaderboard metric; here nothing is
  rounded.
"""

from itertools import combinations

import numpy as np

from evalsuite.errors import EvalsuiteError

TOP_K = (1, 3, 5, 10)  # plismbench's default k
ALL, CROSS_SCANNER, CROSS_STAINING, CROSS_BOTH = "all", "cross_scanner", "cross_staining", "cross_scanner_staining"
GROUPS = (ALL, CROSS_SCANNER, CROSS_STAINING, CROSS_BOTH)
STATISTICS = ("mean", "std", "median", "iqr")
HEADLINE = "plism_leaderboard_metric"  # every leaderboard metric here starts with plism_
# (group, metric) whose medians plismbench's leaderboard metric averages.
LEADERBOARD_PARTS = ((ALL, "cosine_similarity"), (CROSS_SCANNER, "top_10_accuracy"),
                     (CROSS_STAINING, "top_10_accuracy"), (CROSS_BOTH, "top_10_accuracy"))


def metric_names(top_k=TOP_K) -> list[str]:
    return ["cosine_similarity"] + [f"top_{k}_accuracy" for k in top_k]


def _unit_rows(features) -> np.ndarray:
    """float32 rows scaled to unit length; a zero row stays zero (its cosine with anything is 0, not NaN)."""
    rows = np.asarray(features, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


def _hits(query_self: np.ndarray, query_other: np.ndarray, top_k) -> np.ndarray:
    """[len(top_k)] fraction of queries (rows) whose match is within the k nearest candidates.

    `query_self` [n, n]: the queries' cosines with their own slide's tiles (the diagonal is the query itself);
    `query_other` [n, n]: with the other slide's tiles (the diagonal is the match)."""
    match = np.diagonal(query_other)[:, None]
    closer = (query_other > match).sum(axis=1) + (query_self > match).sum(axis=1)
    closer -= np.diagonal(query_self) > match[:, 0]  # the query is not its own candidate
    return np.array([(closer < k).mean() for k in top_k])


def pair_metrics(features_a, features_b, top_k=TOP_K) -> dict:
    """{metric: value} for two slides' [n, D] features of the same n tiles in the same order."""
    a, b = _unit_rows(features_a), _unit_rows(features_b)
    if a.shape != b.shape or a.ndim != 2:
        raise EvalsuiteError(f"plism metrics: the two slides' features must both be [tiles, dim], got {a.shape} "
                             f"and {b.shape}")
    ab = a @ b.T
    hits = (_hits(a @ a.T, ab, top_k) + _hits(b @ b.T, ab.T, top_k)) / 2  # both directions, averaged
    return dict(zip(metric_names(top_k), [float(np.diagonal(ab).mean()), *map(float, hits)]))


def pair_groups(slide_a: tuple, slide_b: tuple) -> list[str]:
    """The groups a pair of (staining, scanner) slides belongs to (plismbench utils/aggregate.py get_results)."""
    same_staining, same_scanner = slide_a[0] == slide_b[0], slide_a[1] == slide_b[1]
    groups = [ALL]
    if same_staining:
        groups.append(CROSS_SCANNER)
    if same_scanner:
        groups.append(CROSS_STAINING)
    if not same_staining and not same_scanner:
        groups.append(CROSS_BOTH)
    return groups


def all_pair_metrics(features_by_slide: list, slides: list, top_k=TOP_K) -> list[dict]:
    """One dict per unordered slide pair: {"a", "b" (slide indices), "groups", metric: value...}."""
    if len(features_by_slide) != len(slides) or len(slides) < 2:
        raise EvalsuiteError(f"plism metrics: need at least two slides with one (staining, scanner) each, got "
                             f"{len(features_by_slide)} feature sets and {len(slides)} slides")
    if len(set(map(tuple, slides))) != len(slides):
        raise EvalsuiteError("plism metrics: two slides share one (staining, scanner); each pair must be one slide")
    return [{"a": i, "b": j, "groups": pair_groups(slides[i], slides[j]),
             **pair_metrics(features_by_slide[i], features_by_slide[j], top_k)}
            for i, j in combinations(range(len(slides)), 2)]


def _statistics(values: list) -> dict:
    values = np.asarray(values, dtype=np.float64)
    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "median": float(np.median(values)),
            "iqr": float(np.quantile(values, 0.75) - np.quantile(values, 0.25))}


def aggregate(pairs: list[dict], top_k=TOP_K) -> dict:
    """{group: {"pairs": n, metric: {statistic: value}}}; a group without pairs is left out."""
    summary = {}
    for group in GROUPS:
        members = [pair for pair in pairs if group in pair["groups"]]
        if members:
            summary[group] = {"pairs": len(members),
                              **{name: _statistics([p[name] for p in members]) for name in metric_names(top_k)}}
    return summary


def leaderboard_metric(summary: dict) -> float | None:
    """The mean of plismbench's four medians; None when a group has no pairs (e.g. one scanner only)."""
    parts = [summary.get(group, {}).get(name, {}).get("median") for group, name in LEADERBOARD_PARTS]
    return None if None in parts else float(np.mean(parts))


def flat_metrics(summary: dict, statistics=("mean", "median")) -> dict:
    """{"plism_leaderboard_metric": v, "plism_<metric>_<statistic>_<group>": v}: the leaderboard rows' metrics."""
    flat = {}
    headline = leaderboard_metric(summary)
    if headline is not None:
        flat[HEADLINE] = headline
    for group, values in summary.items():
        for name, stats in values.items():
            if name != "pairs":
                flat.update({f"plism_{name}_{statistic}_{group}": stats[statistic] for statistic in statistics})
    return flat


def per_slide(rows, labels, slides: int) -> list[np.ndarray]:
    """The rows of each slide (label = slide index), in the reader's tile order, which is every slide's."""
    labels = np.asarray(labels)
    return [np.asarray(rows[np.flatnonzero(labels == slide)]) for slide in range(slides)]


def consistency_metrics(card, reader, features, labels) -> tuple[dict, dict]:
    """A consistency kind's score (tasks/kinds.py): ({metric: value} for the leaderboard, the run JSON's details).

    `reader` gives `slides` ({name, staining, scanner} in label order) and `tile_ids` (readers/tiles/plism.py)."""
    facts = [(slide["staining"], slide["scanner"]) for slide in reader.slides]
    pairs = all_pair_metrics(per_slide(features, labels, len(facts)), facts, TOP_K)
    summary = aggregate(pairs, TOP_K)
    names = [slide["name"] for slide in reader.slides]
    details = {"slides": reader.slides, "tiles_per_slide": len(reader.tile_ids), "top_k": list(TOP_K),
               "groups": summary, "pairs": [{**p, "a": names[p["a"]], "b": names[p["b"]]} for p in pairs]}
    return flat_metrics(summary), details
