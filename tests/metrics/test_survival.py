"""Survival metrics and the Cox loss agree with lifelines; the bootstrap is fast; bad targets are one-line errors."""


import numpy as np
import pandas as pd
import pytest
import torch
from lifelines import CoxPHFitter
from lifelines.utils import concordance_index as lifelines_c_index

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import SlideBags
from evalsuite.metrics.survival import (
    c_index_interval,
    check_survival_targets,
    concordance_index,
    survival_split_metrics,
)
from evalsuite.probes.bags.cox import cox_loss
from evalsuite.probes.bags.meanpool import MeanPoolProbe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tied_censored(n: int, seed: int):
    """Integer times and risks (many ties of each) and about half censored."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 6, n).astype(float), rng.integers(0, 2, n), rng.integers(0, 4, n).astype(float)


def _lifelines(time_, event, risk) -> float:
    try:
        return lifelines_c_index(time_, -risk, event)  # lifelines scores predicted survival times
    except ZeroDivisionError:  # lifelines' way of saying: no comparable pair
        return float("nan")


@pytest.mark.parametrize("seed", range(40))
def test_c_index_equals_lifelines_with_ties_and_censoring(seed):
    time_, event, risk = _tied_censored(int(np.random.default_rng(seed).integers(2, 60)), seed)
    ours, reference = concordance_index(time_, event, risk), _lifelines(time_, event, risk)
    assert ours == pytest.approx(reference, abs=1e-12, nan_ok=True)


def test_c_index_of_continuous_data_equals_lifelines():
    rng = np.random.default_rng(0)
    time_, risk = rng.exponential(size=500), rng.normal(size=500)
    event = rng.integers(0, 2, 500)
    assert concordance_index(time_, event, risk) == pytest.approx(_lifelines(time_, event, risk), abs=1e-12)


def test_c_index_degenerate_cases():
    time_ = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    events = np.ones(5)
    assert np.isnan(concordance_index(time_, np.zeros(5), -time_))  # all censored: no comparable pair
    assert concordance_index(time_, events, -time_) == 1.0  # the earliest death has the highest risk
    assert concordance_index(time_, events, time_) == 0.0
    assert concordance_index(time_, events, np.zeros(5)) == 0.5
    # A tie in time counts only when one of the two is censored: the event comes first.
    assert concordance_index([2.0, 2.0], [1, 0], [1.0, 0.0]) == 1.0
    assert np.isnan(concordance_index([2.0, 2.0], [1, 1], [1.0, 0.0]))


def test_bootstrap_interval_contains_the_estimate_and_is_nan_for_one_cluster():
    rng = np.random.default_rng(1)
    time_, event = rng.exponential(size=200), rng.integers(0, 2, 200)
    risk = -time_ + rng.normal(0, 1, 200)
    low, high = c_index_interval(time_, event, risk, seed=0)
    assert low < concordance_index(time_, event, risk) < high
    assert (low, high) == c_index_interval(time_, event, risk, seed=0)  # seeded
    assert np.isnan(c_index_interval(time_, event, risk, groups=["patient"] * 200)).all()
    patients = np.arange(200) // 4
    clustered = c_index_interval(time_, event, risk, groups=patients)
    assert clustered[0] < concordance_index(time_, event, risk) < clustered[1]


def test_a_bootstrap_draw_is_the_c_index_of_the_drawn_slides():
    """One draw with a seed: the weighted sweep equals lifelines on the slides repeated as often as drawn
    (the draw is made as bootstrap.py makes it)."""
    time_, event, risk = _tied_censored(80, seed=3)
    for seed in range(5):
        drawn = np.bincount(np.random.default_rng(seed).integers(0, 80, size=80), minlength=80)
        repeated = np.repeat(np.arange(80), drawn)
        low, high = c_index_interval(time_, event, risk, draws=1, seed=seed)
        expected = _lifelines(time_[repeated], event[repeated], risk[repeated])
        assert low == high == pytest.approx(expected, abs=1e-12)


def test_bootstrap_of_5000_slides_is_one_sort_and_one_sweep_of_all_draws(monkeypatch):
    """What makes 1000 draws over 5000 slides take about a second: the slides are sorted once and every draw is a
    column of one weighted sweep (a 5000 x 1000 block fits DRAW_BLOCK_BYTES), not 1000 c-index computations.
    No clock (it failed on a loaded host); benchmarks/fail_fast.py measures the seconds."""
    from evalsuite.metrics import survival

    sweeps, blocks = [], []

    class CountingConcordance(survival._Concordance):
        def __init__(self, *args):
            sweeps.append(1)
            super().__init__(*args)

        def counts(self, weights):
            blocks.append(weights.shape)
            return super().counts(weights)

    monkeypatch.setattr(survival, "_Concordance", CountingConcordance)
    rng = np.random.default_rng(0)
    time_, event, risk = rng.exponential(size=5000), rng.integers(0, 2, 5000), rng.normal(size=5000)
    low, high = c_index_interval(time_, event, risk)  # 1000 draws
    assert len(sweeps) == 1 and blocks == [(5000, 1000)]
    assert 0.45 < low < high < 0.55


def test_survival_split_metrics_scores_the_probes_risk():
    class Probe:
        def predict_risk(self, bags):
            return -np.arange(len(bags), dtype=np.float32)

    bags = SlideBags(np.zeros((30, 4), np.float16), np.arange(31))
    targets = np.stack([np.arange(30.0), np.ones(30)], axis=1)
    assert survival_split_metrics(None, Probe(), bags, targets) == {"c_index": 1.0}
    scored = survival_split_metrics(None, Probe(), bags, targets, with_intervals=True, seed=0)
    # Every draw is 1: the interval is the exact bound on 30 of 30 slides, not [1, 1] (shown_intervals.py).
    assert scored["c_index"] == 1.0 and scored["c_index_ci"] == pytest.approx((0.025 ** (1 / 30), 1.0))
    assert "Clopper-Pearson" in scored["c_index_interval_note"]


def _reference_breslow(risk, time_, event) -> float:
    """The partial likelihood written out pair by pair."""
    terms = [risk[i] - np.log(np.exp(risk[time_ >= time_[i]]).sum()) for i in range(len(risk)) if event[i]]
    return -float(np.mean(terms))


def test_cox_loss_is_the_breslow_partial_likelihood_with_ties():
    rng = np.random.default_rng(0)
    risk, time_, event = rng.normal(0, 3, 50), rng.integers(0, 8, 50).astype(float), rng.integers(0, 2, 50)
    loss = cox_loss(torch.tensor(risk), torch.tensor(time_), torch.tensor(event))
    assert float(loss) == pytest.approx(_reference_breslow(risk, time_, event), rel=1e-10)
    heads = torch.tensor(np.stack([risk, 2 * risk, -risk], axis=1))
    per_head = cox_loss(heads, torch.tensor(time_), torch.tensor(event))
    assert per_head.shape == (3,) and float(per_head[1]) == pytest.approx(
        _reference_breslow(2 * risk, time_, event), rel=1e-10)


def test_cox_loss_is_stable_and_zero_without_events():
    risk = torch.tensor([800.0, -800.0, 0.0], requires_grad=True)  # exp() overflows float32 and float64
    loss = cox_loss(risk, torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 1.0, 0.0]))
    assert torch.isfinite(loss)
    censored = cox_loss(risk, torch.tensor([1.0, 2.0, 3.0]), torch.zeros(3))
    censored.backward()
    assert float(censored.detach()) == 0.0 and torch.equal(risk.grad, torch.zeros(3))


def _cox_data(n: int = 200, seed: int = 0):
    """Two features, hazards exp(0.8 a - 0.5 b), continuous times (no ties, where Efron = Breslow), ~35 % censored."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float16)
    event_time = rng.exponential(1 / np.exp(x.astype(np.float64) @ np.array([0.8, -0.5])))
    censor_time = rng.exponential(2.0, size=n)
    return x, np.minimum(event_time, censor_time), (event_time <= censor_time).astype(np.float64)


def test_cox_loss_and_linear_cox_head_match_lifelines():
    x, time_, event = _cox_data()
    frame = pd.DataFrame({"a": x[:, 0].astype(np.float64), "b": x[:, 1].astype(np.float64), "T": time_, "E": event})
    fitter = CoxPHFitter().fit(frame, "T", "E")
    at_optimum = cox_loss(torch.tensor(x.astype(np.float64) @ fitter.params_.values), torch.tensor(time_),
                          torch.tensor(event))
    assert float(at_optimum) * event.sum() == pytest.approx(-fitter.log_likelihood_, rel=1e-8)
    bags = SlideBags(x, np.arange(len(x) + 1))  # one tile a slide: the slide vector is the row
    targets = np.stack([time_, event], axis=1)
    probe = MeanPoolProbe(0, cox_lr=[0.05], cox_weight_decay=[0.0], cox_epochs=600)
    probe.fit(bags, targets, bags, targets, "c_index")
    assert probe.cox_weight_.numpy() == pytest.approx(fitter.params_.values, abs=1e-2)


@pytest.mark.parametrize("targets, message", [
    (np.ones(5), "must be numbers [slides, 2]"),
    (np.ones((5, 3)), "must be numbers [slides, 2]"),
    (np.array([[1.0, 1.0], [np.nan, 0.0]]), "survival target of slide 1 is NaN"),
    (np.array([[1.0, 1.0]] * 4 + [[-3.0, 1.0]]), "survival time -3.0 of slide 4 is negative"),
    (np.array([[1.0, 1.0], [2.0, 2.0]]), "event 2.0 of slide 1 is neither 0"),
    (np.array([["a", "b"]]), "must be numbers"),
    (np.zeros((0, 2)), "no slides"),
])
def test_bad_survival_targets_are_one_line_errors(targets, message):
    with pytest.raises(EvalsuiteError) as raised:
        check_survival_targets(targets, "train split", training=True)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_training_split_needs_an_event():
    all_censored = np.array([[1.0, 0.0], [2.0, 0.0]])
    assert check_survival_targets(all_censored, "test split").dtype == np.float64  # scoring may lack events
    with pytest.raises(EvalsuiteError, match="all 2 slides are censored"):
        check_survival_targets(all_censored, "train split", training=True)
