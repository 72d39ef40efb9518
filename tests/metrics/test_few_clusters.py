"""Statistics that stay honest with few clusters (issue 47), where the truth is known.

The simulation is benchmarks/few_clusters.py's (K clusters of 50 items, a per-cluster effect on the difference
between models, the suite's own 1000 cluster-bootstrap draws), at 300 columns per row: wherever an interval or a
best-set mark is shown, the 95 % interval of a model's accuracy must hold the true accuracy in at least 90 % of
columns, and equal models must be left out of the best set in at most 5 % of columns plus three binomial standard
errors of the simulation; where the rule cannot reach that (K = 3), nothing is shown. The old rule (the draws as they
are) fails the same bounds at K = 5, which is what makes the test able to fail.
"""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from evalsuite.metrics.bootstrap import draw_weights, task_draw_seed
from evalsuite.metrics.few_clusters import MIN_CLUSTERS, stretch, too_few_clusters, widened
from evalsuite.metrics.multiple_comparisons import ALPHA, model_confidence_set, stepdown_max_t
from evalsuite.metrics.shown_intervals import shown_interval
from evalsuite.metrics.significance import average_ranks, bootstrap_p_value

COLUMNS = 300
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / COLUMNS)


def _benchmark():
    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(folder))  # its `_shared`
    spec = importlib.util.spec_from_file_location("few_clusters_benchmark", folder / "few_clusters.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHMARK = _benchmark()
TRUTH = BENCHMARK.true_accuracy(samples=400_000)


def _shares(clusters: int, models: int, corrected: bool) -> tuple[float, float]:
    """(coverage of model 0's interval, share of equal-model columns leaving a model out)."""
    design, rng = BENCHMARK.Design(clusters), np.random.default_rng(1000 * clusters + models)
    rule = clusters if corrected else None
    columns = [design.column(rng, models) for _ in range(COLUMNS)]
    covered = sum(BENCHMARK.covers(o[0], d[:, 0], TRUTH, rule) for o, d, _ in columns)
    wrong = sum(bool(BENCHMARK.leaves_out(*column, rule, seed)) for seed, column in enumerate(columns))
    return covered / COLUMNS, wrong / COLUMNS


@pytest.mark.parametrize("clusters", [5, 10, 20])
@pytest.mark.parametrize("models", [2, 5])
def test_intervals_cover_and_best_sets_keep_equal_models_wherever_they_are_shown(clusters, models):
    assert not too_few_clusters(clusters)
    coverage, error = _shares(clusters, models, corrected=True)
    assert coverage >= 0.90 and error <= BOUND, (coverage, error)


def test_three_clusters_are_not_tested_and_the_old_rule_failed_at_five():
    assert too_few_clusters(3, "patient").startswith("its test split has 3 patients, fewer than the 4")
    assert np.isnan(shown_interval(0.8, np.linspace(0.7, 0.9, 1000), 3, "accuracy").bounds).all()
    coverage, error = _shares(5, 5, corrected=False)
    assert coverage < 0.90 or error > BOUND  # what the correction is for


def test_the_map_is_students_t_with_k_minus_1_degrees_and_vanishes_with_many_clusters():
    assert stretch(np.array([1.959964]), 5)[0] == pytest.approx(math.sqrt(5 / 4) * 2.776445, rel=1e-5)
    assert stretch(np.array([-1.959964, 0.0]), 10_000).tolist() == pytest.approx([-1.959964, 0.0], abs=1e-3)
    draws = np.array([0.7, 0.75, 0.8, 0.85, 0.9])
    assert widened(draws, 0.8, 4)[2] == 0.8 and np.all(np.abs(widened(draws, 0.8, 4) - 0.8) >= np.abs(draws - 0.8))
    assert MIN_CLUSTERS == 4


def test_the_same_scores_computed_two_identical_ways_give_the_same_best_sets_and_p_values():
    """Accuracy per draw as W @ c / n and as 1 - W @ (1 - c) / n: equal in exact arithmetic, not in floats; ties
    T* = T (common: both are multiples of 1 / n) must not be decided by the rounding."""
    rng, items = np.random.default_rng(5), 300
    weights = np.stack(list(draw_weights(None, items, 1000, 3)))  # [draws, items]
    differing = 0
    for column in range(60):
        correct = (rng.random((items, 4)) < rng.uniform(0.7, 0.8, 4)).astype(np.float64)
        correct[:, 3] = correct[:, 2]  # two identical models
        correct[rng.integers(0, items, 2), 1] = 1.0 - correct[rng.integers(0, items, 2), 0]
        one = (correct.mean(axis=0), weights @ correct / items)
        other = (1.0 - (1.0 - correct).mean(axis=0), 1.0 - weights @ (1.0 - correct) / items)
        differing += not np.array_equal(one[1], other[1])
        sets = [model_confidence_set(dict(enumerate(o)), dict(enumerate(d.T))) for o, d in (one, other)]
        assert sets[0].members == sets[1].members and sets[0].p_values == sets[1].p_values, column
        assert bootstrap_p_value(one[1][:, 0] - one[1][:, 1]) == bootstrap_p_value(other[1][:, 0] - other[1][:, 1])
        adjusted = [stepdown_max_t(o[:2] - o[2:], d[:, :2] - d[:, 2:]) for o, d in (one, other)]
        assert np.array_equal(adjusted[0], adjusted[1], equal_nan=True)
        assert np.array_equal(average_ranks(one[1]), average_ranks(other[1]))
    assert differing > 0  # the two ways did round differently


def test_two_tasks_with_the_same_cluster_count_get_different_resamples():
    seeds = {task: task_draw_seed(task) for task in ("bach", "crc", "demo", "demo_counts")}
    assert len(set(seeds.values())) == 4 and seeds["bach"] == task_draw_seed("bach")
    drawn = {task: np.stack(list(draw_weights(None, 40, 20, seed))) for task, seed in seeds.items()}
    assert not np.array_equal(drawn["bach"], drawn["crc"])


def test_an_all_correct_split_of_16_clusters_reads_an_exact_bound_below_1():
    shown = shown_interval(1.0, np.ones(1000), 16, "balanced_accuracy", "patient")
    assert shown.bounds == pytest.approx((0.025 ** (1 / 16), 1.0)) and shown.low < 0.80
    assert "16 of 16" in shown.note and "Clopper-Pearson" in shown.note


def test_a_biased_metrics_interval_holds_its_estimate_or_says_why():
    rng = np.random.default_rng(0)
    upward = 0.0920 + 0.08 * rng.random(1000)  # every draw above the ECE of 0.0919, as resampling makes it
    shown = shown_interval(0.0919, upward, 500, "ece", "tile")
    assert not shown.low <= 0.0919 <= shown.high and "biased upward" in shown.note and shown.low >= 0
    lopsided = shown_interval(0.429, 0.45 - np.abs(rng.normal(0, 0.3, 1000)), 5, "r2", "block")
    assert lopsided.low <= 0.429 <= lopsided.high and lopsided.note.startswith("lopsided")
    plain = shown_interval(0.8, 0.8 + rng.normal(0, 0.02, 1000), 200, "accuracy", "patient")
    assert plain.note == "" and plain.low < 0.8 < plain.high
