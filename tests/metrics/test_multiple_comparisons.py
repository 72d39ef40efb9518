"""The model confidence set and the step-down max-t test (evalsuite/metrics/multiple_comparisons.py): against arch's
MCS fed the very same draws, and hand-checkable cases."""

import arch.bootstrap as arch_bootstrap
import numpy as np
import pytest

from evalsuite.metrics.multiple_comparisons import model_confidence_set, stepdown_max_t


def _losses(items: int, means: list, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # 0/1 errors plus a little noise so that no two bootstrap statistics tie (ties are where the +1 conventions differ)
    return (rng.random((items, len(means))) < np.array(means)).astype(float) + rng.normal(0, 0.01, (items, len(means)))


@pytest.mark.parametrize("seed", [3, 11])
def test_the_set_and_every_p_value_equal_arch_mcs_on_the_same_draws(seed):
    losses = _losses(300, [0.20, 0.21, 0.22, 0.26, 0.30, 0.35], seed)
    reps = 500
    reference = arch_bootstrap.MCS(losses, size=0.05, reps=reps, block_size=1, bootstrap="circular", method="R",
                                   seed=7)
    reference.compute()
    # arch's bootstrap regenerated from the same seed: the item indices of each of its draws.
    indices = [np.asarray(data[0][0]) for data in arch_bootstrap.CircularBlockBootstrap(
        1, np.arange(len(losses)), seed=7).bootstrap(reps)]
    draws = np.stack([losses[index].mean(axis=0) for index in indices])
    names = [f"m{j}" for j in range(losses.shape[1])]
    ours = model_confidence_set({n: losses[:, j].mean() for j, n in enumerate(names)},
                                {n: draws[:, j] for j, n in enumerate(names)}, higher_better=False)
    arch_p = reference.pvalues["Pvalue"].to_dict()
    # arch's p = #{T* > T} / B; ours carries the +1 of Davison & Hinkley: (1 + #{T* >= T}) / (B + 1).
    expected = {names[j]: 1.0 if p == 1 else (p * reps + 1) / (reps + 1) for j, p in arch_p.items()}
    assert ours.p_values == pytest.approx(expected, abs=1e-12)
    assert list(ours.members) == [names[j] for j in reference.included]
    assert ours.draws == reps


def test_a_higher_is_better_score_gives_the_same_set_as_its_loss():
    losses = _losses(200, [0.1, 0.12, 0.3], 5)
    rng = np.random.default_rng(0)
    draws = np.stack([losses[rng.integers(0, 200, 200)].mean(axis=0) for _ in range(300)])
    as_loss = model_confidence_set({j: losses[:, j].mean() for j in range(3)}, {j: draws[:, j] for j in range(3)},
                                   higher_better=False)
    as_score = model_confidence_set({j: 1 - losses[:, j].mean() for j in range(3)},
                                    {j: 1 - draws[:, j] for j in range(3)}, higher_better=True)
    assert as_loss == as_score and 2 not in as_loss.members and 0 in as_loss.members


def test_identical_models_are_all_in_the_set_and_undefined_draws_are_left_out():
    draws = np.linspace(0.7, 0.8, 100)
    with_gaps = draws.copy()
    with_gaps[:10] = np.nan
    found = model_confidence_set({"a": 0.75, "b": 0.75}, {"a": with_gaps, "b": draws})
    assert found.members == ("a", "b") and found.p_values == {"a": 1.0, "b": 1.0} and found.draws == 90
    assert model_confidence_set({"a": 0.75}, {"a": draws}) is None  # one model: nothing to tell apart


def test_stepdown_max_t_on_one_hypothesis_is_the_studentised_bootstrap_p():
    rng = np.random.default_rng(1)
    draws = rng.normal(0.02, 0.01, 999)
    t = 0.02 / np.sqrt(np.mean((draws - 0.02) ** 2))
    by_hand = (1 + np.count_nonzero(np.abs(draws - 0.02) / np.sqrt(np.mean((draws - 0.02) ** 2)) >= t)) / 1000
    assert stepdown_max_t([0.02], draws[:, None]) == pytest.approx([by_hand])


def test_stepdown_max_t_adjusts_by_the_maximum_not_a_multiplier():
    """30 tasks, one clearly different: its adjusted p is the smallest attainable, 1 / (B + 1), not 30 times more;
    the equal tasks stay far from rejection, and a task that cannot be resampled is nan."""
    rng = np.random.default_rng(2)
    draws = rng.normal(0.0, 0.01, (999, 31))
    observed = np.zeros(31)
    observed[0], draws[:, 0] = 0.1, draws[:, 0] + 0.1
    draws[:, 30] = np.nan
    adjusted = stepdown_max_t(observed, draws)
    assert adjusted[0] == pytest.approx(1 / 1000) and (adjusted[1:30] > 0.5).all() and np.isnan(adjusted[30])


def test_at_50_models_a_clearly_worse_model_is_left_out_with_the_smallest_p():
    """No Holm multiplier: 50 models with 1000 draws still exclude a model far below the rest (p = 1 / 1001), where
    Holm's 49 comparisons could reject nothing (2 / 1001 x 49 > 0.05)."""
    rng = np.random.default_rng(4)
    observed = {f"m{i:02d}": 0.90 + 0.0001 * i for i in range(49)} | {"floor": 0.30}
    draws = {name: score + rng.normal(0, 0.01, 1000) for name, score in observed.items()}
    found = model_confidence_set(observed, draws)
    assert "floor" not in found.members and found.p_values["floor"] == pytest.approx(1 / 1001)
    assert len(found.members) >= 40  # models 0.0001 apart with a spread of 0.01 stay together
