"""The paired tests against independent references: scipy's binomial test, a bootstrap that
re-runs scikit-learn on resampled items, scipy's rankdata, and hand-worked examples."""

import numpy as np
import pytest
from scipy.stats import binomtest, rankdata
from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

from evalsuite.metrics.significance import (
    average_ranks,
    bootstrap_p_value,
    mcnemar_exact,
    paired_bootstrap,
    rank_intervals,
)


def _models(items=120, classes=3, seed=0):
    """Labels, a good model (right with a margin on ~90 % of items) and a near-chance one."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, items)
    good = rng.random((items, classes)) * 0.5
    right = rng.random(items) < 0.9
    good[np.flatnonzero(right), labels[right]] += 1.0
    chance = rng.random((items, classes))
    return labels, good, chance


@pytest.mark.parametrize("only_a, only_b", [(0, 0), (0, 5), (5, 0), (10, 10), (3, 12), (1, 40), (300, 250)])
def test_mcnemar_exact_equals_scipys_two_sided_binomial_test_on_the_discordant_pairs(only_a, only_b):
    both, neither = 7, 4  # concordant items change nothing
    correct_a = np.array([1] * only_a + [0] * only_b + [1] * both + [0] * neither, dtype=bool)
    correct_b = np.array([0] * only_a + [1] * only_b + [1] * both + [0] * neither, dtype=bool)
    b, c, p = mcnemar_exact(correct_a, correct_b)
    assert (b, c) == (only_a, only_b)
    expected = 1.0 if only_a + only_b == 0 else binomtest(only_a, only_a + only_b, 0.5).pvalue
    assert p == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_mcnemar_by_hand():
    # b = 1, c = 5: P(X <= 1) for Binomial(6, 1/2) = (1 + 6) / 64, doubled: 14 / 64.
    assert mcnemar_exact([1, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1])[2] == pytest.approx(14 / 64)


def test_the_bootstrap_p_value_by_hand():
    assert bootstrap_p_value(np.zeros(999)) == 1.0  # no difference in any draw
    assert bootstrap_p_value(np.full(999, 0.1)) == pytest.approx(2 / 1000)  # never crosses 0: the +1 floor
    # One draw <= 0 and three >= 0 of four: 2 (1 + 1) / 5.
    assert bootstrap_p_value(np.array([-1.0, 1.0, 2.0, 3.0])) == pytest.approx(0.8)
    assert bootstrap_p_value(np.array([-1.0, np.nan, 2.0, 3.0])) == pytest.approx(2 * 2 / 4)  # NaN draws dropped
    assert np.isnan(bootstrap_p_value(np.array([np.nan])))


def test_a_model_compared_with_itself_differs_by_zero_with_p_one():
    labels, good, _ = _models()
    for metric in ("balanced_accuracy", "accuracy", "f1_macro", "auroc_macro_ovr"):
        result = paired_bootstrap(labels, [good], [good.copy()], metric, draws=200)
        assert (result.difference, result.low, result.high, result.p_value) == (0.0, 0.0, 0.0, 1.0), metric


def test_a_clearly_better_model_is_significant_and_its_interval_excludes_zero():
    labels, good, chance = _models()
    result = paired_bootstrap(labels, [good], [chance], "balanced_accuracy", draws=500)
    assert result.difference > 0.4 and result.low > 0 and result.p_value == pytest.approx(2 / 501)
    reverse = paired_bootstrap(labels, [chance], [good], "balanced_accuracy", draws=500)
    assert reverse.difference == pytest.approx(-result.difference) and reverse.high < 0


def _sklearn_bootstrap(labels, a, b, metric, groups, draws, seed):
    """The same draws as significance.py (one rng.integers per draw over clusters), scored by scikit-learn on
    the resampled items themselves: an independent reference for the weighted scoring."""
    clusters = np.unique(groups)
    members = [np.flatnonzero(groups == c) for c in clusters]
    rng = np.random.default_rng(seed)
    differences = []
    for _ in range(draws):
        index = np.concatenate([members[c] for c in rng.integers(0, len(clusters), size=len(clusters))])
        differences.append(metric(labels[index], a[index]) - metric(labels[index], b[index]))
    return np.array(differences)


def _ba(y, proba):
    return balanced_accuracy_score(y, proba.argmax(axis=1))


def _auroc(y, proba):
    return np.mean([roc_auc_score(y == c, proba[:, c]) for c in range(proba.shape[1]) if 0 < (y == c).sum() < len(y)])


@pytest.mark.parametrize("name, reference", [("balanced_accuracy", _ba), ("auroc_macro_ovr", _auroc)])
@pytest.mark.parametrize("clustered", [False, True])
def test_the_paired_bootstrap_equals_rerunning_scikit_learn_on_each_draw(name, reference, clustered):
    labels, good, chance = _models(items=90)
    groups = np.repeat(np.arange(30), 3) if clustered else np.arange(90)  # 30 "patients" of 3 items, or items
    result = paired_bootstrap(labels, [good], [chance], name, groups=groups if clustered else None, draws=150, seed=4)
    expected = _sklearn_bootstrap(labels, good, chance, reference, groups, 150, 4)
    assert result.difference == pytest.approx(reference(labels, good) - reference(labels, chance), abs=1e-12)
    assert (result.low, result.high) == pytest.approx(tuple(np.percentile(expected, [2.5, 97.5])), abs=1e-12)
    assert result.p_value == pytest.approx(bootstrap_p_value(expected))


def test_several_seeds_are_scored_by_their_mean_metric_in_every_draw():
    labels, good, chance = _models()
    _, other, _ = _models(seed=1)
    result = paired_bootstrap(labels, [good, other], [chance], "accuracy", draws=50)
    seeds = [accuracy_score(labels, proba.argmax(axis=1)) for proba in (good, other)]
    assert result.a == pytest.approx(np.mean(seeds))


def test_a_metric_without_a_weighted_form_is_scored_on_the_resampled_items():
    labels, good, chance = _models()
    plain = paired_bootstrap(labels, [good], [chance], "accuracy", draws=100, seed=2)
    resampled = paired_bootstrap(labels, [good], [chance], "my_accuracy", draws=100, seed=2,
                                 extra_metrics={"my_accuracy": lambda y, p: accuracy_score(y, p.argmax(axis=1))})
    assert (resampled.difference, resampled.low, resampled.high, resampled.p_value) == pytest.approx(
        (plain.difference, plain.low, plain.high, plain.p_value), abs=1e-12)
    with pytest.raises(ValueError, match="no per-item form"):
        paired_bootstrap(labels, [good], [chance], "dice", draws=10)


def test_one_cluster_cannot_be_resampled():
    labels, good, chance = _models(items=20)
    result = paired_bootstrap(labels, [good], [chance], "accuracy", groups=np.zeros(20))
    assert np.isnan(result.p_value) and np.isnan(result.low) and result.draws == 0 and result.difference != 0
    assert np.isnan(rank_intervals(labels, {"a": [good], "b": [chance]}, "accuracy", groups=np.zeros(20))["a"][0])


def test_average_ranks_equal_scipys_rankdata_and_put_nan_last():
    values = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.7])
    assert average_ranks(values) == pytest.approx(rankdata(-values, method="average"))
    assert average_ranks(values, higher_better=False) == pytest.approx(rankdata(values, method="average"))
    assert list(average_ranks(np.array([np.nan, 0.2, 0.3]))) == [3.0, 2.0, 1.0]


def test_rank_intervals_equal_the_percentiles_of_per_draw_scikit_learn_ranks():
    labels, good, chance = _models(items=60)
    _, middle, _ = _models(items=60, seed=5)
    middle = 0.5 * good + 0.5 * middle  # a model between the two
    probas = {"good": good, "middle": middle, "chance": chance}
    intervals = rank_intervals(labels, {m: [p] for m, p in probas.items()}, "balanced_accuracy", draws=200, seed=7)
    rng = np.random.default_rng(7)
    ranks = []
    for _ in range(200):
        index = rng.integers(0, 60, size=60)
        scores = [_ba(labels[index], probas[m][index]) for m in sorted(probas)]
        ranks.append(rankdata(-np.array(scores), method="average"))
    ranks = np.array(ranks)
    for column, model in enumerate(sorted(probas)):
        assert intervals[model] == (np.percentile(ranks[:, column], 2.5, method="lower"),
                                    np.percentile(ranks[:, column], 97.5, method="higher")), model
    assert intervals["good"][0] == 1 and intervals["chance"] == (3, 3)


def test_identical_models_share_every_rank_and_an_error_metric_ranks_the_smallest_first():
    labels, good, chance = _models()
    assert rank_intervals(labels, {"a": [good], "b": [good]}, "accuracy", draws=50) == {"a": (1.5, 1.5),
                                                                                      "b": (1.5, 1.5)}
    error = {"err": lambda y, p: 1 - accuracy_score(y, p.argmax(axis=1))}
    intervals = rank_intervals(labels, {"good": [good], "chance": [chance]}, "nll", draws=50, extra_metrics={
        "nll": error["err"]})  # nll is lower-is-better: the smaller error ranks first
    assert intervals == {"good": (1.0, 1.0), "chance": (2.0, 2.0)}
