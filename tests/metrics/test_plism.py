"""PLISM metrics (evalsuite/metrics/plism.py) against hand-computed numbers and plismbench's algorithm.

Hand example: two slides A and B of three tiles, unit 2-D vectors given by their angle in degrees.
    A: a1 = 0, a2 = 90, a3 = 45        B: b1 = 30, b2 = 100, b3 = 75
Cosine similarity: mean of cos(a_t, b_t) = (cos 30 + cos 10 + cos 30) / 3 = (0.866025 + 0.984808 + 0.866025) / 3
= 0.905619.
Retrieval: a query's candidates are the other five tiles of the pair; its rank is how many are closer (a smaller
angle) than its twin.
    query a1: twin b1 at 30; others a2 90, a3 45, b2 100, b3 80      -> rank 0
    query a2: twin b2 at 10; others a1 90, a3 45, b1 60, b3 15       -> rank 0
    query a3: twin b3 at 30; others a1 45, a2 45, b1 15, b2 55       -> rank 1 (b1)
    query b1: twin a1 at 30; others b2 70, b3 45, a2 60, a3 15       -> rank 1 (a3)
    query b2: twin a2 at 10; others b1 70, b3 25, a1 100, a3 55      -> rank 0
    query b3: twin a3 at 30; others b1 45, b2 25, a1 75, a2 15       -> rank 2 (a2, b2)
top-1: A 2/3, B 1/3 -> (2/3 + 1/3) / 2 = 0.5;  top-2: A 3/3, B 2/3 -> 5/6;  top-3: A 1, B 1 -> 1.

Groups and leaderboard metric: slides (GM, AT2), (GM, P), (HR, AT2), (HR, P) give 6 pairs: (1,2) and (3,4) share
a staining (cross-scanner), (1,3) and (2,4) a scanner (cross-staining), (1,4) and (2,3) differ in both.
"""

import numpy as np
import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.plism import (
    CROSS_BOTH,
    CROSS_SCANNER,
    CROSS_STAINING,
    HEADLINE,
    aggregate,
    all_pair_metrics,
    flat_metrics,
    leaderboard_metric,
    pair_groups,
    pair_metrics,
)


def _unit(*degrees) -> np.ndarray:
    radians = np.deg2rad(degrees)
    return np.stack([np.cos(radians), np.sin(radians)], axis=1)


A, B = _unit(0, 90, 45), _unit(30, 100, 75)


def test_hand_example_cosine_and_top_k():
    metrics = pair_metrics(A, B, top_k=(1, 2, 3))
    assert metrics["cosine_similarity"] == pytest.approx(0.905619, abs=1e-6)
    assert metrics["top_1_accuracy"] == pytest.approx(0.5)
    assert metrics["top_2_accuracy"] == pytest.approx(5 / 6)
    assert metrics["top_3_accuracy"] == pytest.approx(1.0)


def test_scale_and_float16_do_not_change_the_hand_example():
    """Cosine ignores length; the cache's float16 rows give the same ranks."""
    metrics = pair_metrics((A * 7).astype(np.float16), (B * 0.5).astype(np.float16), top_k=(1, 2))
    assert metrics["top_1_accuracy"] == 0.5 and metrics["top_2_accuracy"] == pytest.approx(5 / 6)
    assert metrics["cosine_similarity"] == pytest.approx(0.905619, abs=1e-3)


def _plismbench_top_k(a, b, k: int) -> float:
    """plismbench's retrieval (metrics/retrieval.py at b4f32b7), written out: concatenate A and B, rank each row's
    cosines in decreasing order, drop the first (the query itself) and look for the twin in the next k."""
    ab = np.concatenate([a, b]) / np.linalg.norm(np.concatenate([a, b]), axis=1, keepdims=True)
    order = np.argsort(-(ab @ ab.T), axis=1)[:, 1 : k + 1]
    n = len(a)
    twins = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
    found = (order == twins[:, None]).any(axis=1)
    return (found[:n].mean() + found[n:].mean()) / 2


def test_matches_plismbench_algorithm_on_random_features():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(40, 8))
    b = a + rng.normal(scale=0.8, size=a.shape)  # noisy twins: some found, some not
    metrics = pair_metrics(a, b, top_k=(1, 3, 5, 10))
    for k in (1, 3, 5, 10):
        assert metrics[f"top_{k}_accuracy"] == pytest.approx(_plismbench_top_k(a, b, k))
    cosines = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert metrics["cosine_similarity"] == pytest.approx(cosines.mean(), abs=1e-6)
    assert 0 < metrics["top_1_accuracy"] < 1


def test_pair_groups_follow_plismbench():
    assert pair_groups(("GM", "AT2"), ("GM", "P")) == ["all", CROSS_SCANNER]
    assert pair_groups(("GM", "AT2"), ("HR", "AT2")) == ["all", CROSS_STAINING]
    assert pair_groups(("GM", "AT2"), ("HR", "P")) == ["all", CROSS_BOTH]


def test_aggregate_and_leaderboard_metric_by_hand():
    """Slide 2 is slide 1 (cosine 1, every twin first); slides 3 and 4 are A and B of the hand example."""
    slides = [("GM", "AT2"), ("GM", "P"), ("HR", "AT2"), ("HR", "P")]
    pairs = all_pair_metrics([A, A, A, B], slides, top_k=(1, 10))
    by_pair = {(p["a"], p["b"]): p for p in pairs}
    assert len(pairs) == 6
    # (0,1), (0,2), (1,2): A with A; (0,3), (1,3), (2,3): A with B.
    assert by_pair[(0, 1)]["cosine_similarity"] == pytest.approx(1.0)
    assert by_pair[(0, 1)]["top_1_accuracy"] == 1.0
    assert by_pair[(2, 3)]["top_1_accuracy"] == 0.5
    summary = aggregate(pairs, top_k=(1, 10))
    # cross-scanner pairs (0,1) [A,A] and (2,3) [A,B]: top-1 1.0 and 0.5 -> mean 0.75, median 0.75, std 0.25
    top1 = summary[CROSS_SCANNER]["top_1_accuracy"]
    assert (top1["mean"], top1["median"], top1["std"], top1["iqr"]) == pytest.approx((0.75, 0.75, 0.25, 0.25))
    # all pairs' cosines: three 1.0 and three 0.905619 -> median (1.0 + 0.905619) / 2
    assert summary["all"]["cosine_similarity"]["median"] == pytest.approx((1 + 0.905619) / 2, abs=1e-6)
    # top-10 with 5 candidates is always a hit: the leaderboard metric is (median cosine + 1 + 1 + 1) / 4
    expected = ((1 + 0.905619) / 2 + 3) / 4
    assert leaderboard_metric(summary) == pytest.approx(expected, abs=1e-6)
    flat = flat_metrics(summary)
    assert flat[HEADLINE] == pytest.approx(expected, abs=1e-6)
    assert flat["plism_top_1_accuracy_median_cross_scanner"] == pytest.approx(0.75)
    assert all(name.startswith("plism_") for name in flat)


def test_no_headline_without_every_group():
    pairs = all_pair_metrics([A, B], [("GM", "AT2"), ("GM", "P")])
    assert leaderboard_metric(aggregate(pairs)) is None
    assert HEADLINE not in flat_metrics(aggregate(pairs))


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(EvalsuiteError, match="same tiles|tiles, dim"):
        pair_metrics(A, B[:2])
    with pytest.raises(EvalsuiteError, match="share one"):
        all_pair_metrics([A, B], [("GM", "AT2"), ("GM", "AT2")])
