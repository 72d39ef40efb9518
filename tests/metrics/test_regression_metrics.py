"""Regression metrics agree with scipy and scikit-learn per target; a bootstrap draw equals re-scoring the drawn rows;
undefined targets are left out and counted; bad targets and predictions are one-line errors."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import mean_squared_error, r2_score

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics import regression
from evalsuite.metrics.bootstrap import NOTE_SUFFIX, draw_weights
from evalsuite.metrics.regression import (
    REGRESSION_METRICS,
    check_regression_targets,
    per_target_metrics,
    regression_intervals,
    regression_split_metrics,
    weighted_regression_metrics,
)
from evalsuite.metrics.shown_intervals import shown_interval


def _data(items: int, targets: int, seed: int, tied: bool = False):
    """Targets and correlated predictions [items, targets]; `tied`: small integers, so many ties in both."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(items, targets)) * rng.uniform(0.5, 3, targets) + rng.normal(0, 5, targets)
    p = 0.6 * y + rng.normal(size=(items, targets))
    return (np.round(y), np.round(p)) if tied else (y, p)


def _reference(y, p) -> dict:
    columns = range(y.shape[1])
    return {"pearson": np.array([pearsonr(y[:, j], p[:, j])[0] for j in columns]),
            "spearman": np.array([spearmanr(y[:, j], p[:, j])[0] for j in columns]),
            "mse": mean_squared_error(y, p, multioutput="raw_values"),
            "r2": r2_score(y, p, multioutput="raw_values")}


class _Probe:
    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, features):
        assert features == "features"
        return self.predictions.astype(np.float32)


CARD = SimpleNamespace(name="hest-demo", targets=["GENE_A", "GENE_B", "GENE_C"])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tied", [False, True])
def test_per_target_metrics_equal_scipy_and_sklearn(seed, tied):
    y, p = _data(int(np.random.default_rng(seed).integers(5, 80)), 5, seed, tied)
    ours, reference = per_target_metrics(y, p), _reference(y, p)
    assert list(ours) == list(REGRESSION_METRICS) == ["pearson", "spearman", "mse", "r2"]
    for name in ours:
        np.testing.assert_allclose(ours[name], reference[name], rtol=0, atol=1e-10, err_msg=name)


def test_the_means_equal_scipy_and_sklearn_averages():
    y, p = _data(200, 7, seed=11, tied=True)
    reference = _reference(y, p)
    assert REGRESSION_METRICS["pearson"](y, p) == pytest.approx(reference["pearson"].mean(), abs=1e-10)
    assert REGRESSION_METRICS["spearman"](y, p) == pytest.approx(reference["spearman"].mean(), abs=1e-10)
    assert REGRESSION_METRICS["mse"](y, p) == pytest.approx(mean_squared_error(y, p), abs=1e-10)
    assert REGRESSION_METRICS["r2"](y, p) == pytest.approx(r2_score(y, p, multioutput="uniform_average"), abs=1e-10)


def test_one_dimensional_targets_are_one_target():
    y, p = _data(40, 1, seed=2)
    assert check_regression_targets(y[:, 0], "train").shape == (40, 1)
    assert per_target_metrics(y[:, 0], p[:, 0])["pearson"] == pytest.approx([pearsonr(y[:, 0], p[:, 0])[0]])
    scored = regression_split_metrics(None, _Probe(p[:, 0]), "features", y[:, 0])
    assert scored["pearson"] == pytest.approx(pearsonr(y[:, 0], p[:, 0])[0], abs=1e-6)  # float32 predictions


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")  # the reference's NaN
def test_constant_targets_and_predictions_are_left_out_and_counted():
    y, p = _data(30, 3, seed=4)
    y[:, 1] = 2.5  # target B constant on this split: r, rho and R^2 undefined
    p[:, 2] = -1.0  # the probe predicts C as a constant: r and rho undefined, R^2 defined
    ours, reference = per_target_metrics(y, p), _reference(y, p)
    assert np.isnan(ours["pearson"][1:]).all() and np.isnan(ours["spearman"][1:]).all()
    assert np.isnan(ours["r2"][1]) and ours["r2"][2] == pytest.approx(reference["r2"][2], abs=1e-10)
    scored = regression_split_metrics(CARD, _Probe(p), "features", y)
    assert scored["pearson"] == pytest.approx(reference["pearson"][0], abs=1e-6)
    assert scored["r2"] == pytest.approx(reference["r2"][[0, 2]].mean(), abs=1e-6)
    assert scored["mse"] == pytest.approx(reference["mse"].mean(), rel=1e-6)
    assert scored["pearson_undefined_targets"] == 2 and scored["r2_undefined_targets"] == 1
    assert "pearson_undefined_targets" not in regression_split_metrics(CARD, _Probe(_data(30, 3, 4)[1]), "features",
                                                                       _data(30, 3, 4)[0])


def test_all_targets_undefined_is_an_error_at_scoring_and_nan_for_selection():
    y, p = _data(30, 3, seed=5)
    collapsed = np.tile(p.mean(axis=0), (30, 1))
    assert np.isnan(REGRESSION_METRICS["pearson"](y, collapsed))  # a probe's grid search ranks it last
    with pytest.raises(EvalsuiteError, match=r"hest-demo.*all 3 targets.*same value .* target 0 \(GENE_A\).*"
                                             r"collapsed") as error:
        regression_split_metrics(CARD, _Probe(collapsed), "features", y)
    assert "\n" not in str(error.value)
    with pytest.raises(EvalsuiteError, match=r"target 0 \(GENE_A\) is constant \(7.0\) on this split"):
        regression_split_metrics(CARD, _Probe(p), "features", np.full((30, 3), 7.0))


def test_a_split_of_one_sample_is_an_error():
    with pytest.raises(EvalsuiteError, match="the split has one sample"):
        regression_split_metrics(CARD, _Probe(np.ones((1, 3))), "features", np.zeros((1, 3)))


@pytest.mark.parametrize("bad, message", [
    (np.zeros((4, 2, 2)), r"train.csv: regression targets must be numbers \[items, targets\].*shape \(4, 2, 2\)"),
    (np.array([["a", "b"]]), r"must be numbers .* of <U1"),
    (np.zeros((0, 3)), r"no items"),
    (np.zeros((5, 0)), r"no targets"),
    (np.array([[1.0, 2.0], [3.0, np.nan]]), r"target 1 \(GENE_B\) of item 1 is nan \(1 values in all\); give every"),
    (np.array([[1.0, np.inf], [3.0, 4.0]]), r"target 1 \(GENE_B\) of item 0 is inf"),
])
def test_bad_targets_are_one_line_errors(bad, message):
    with pytest.raises(EvalsuiteError, match=message) as error:
        check_regression_targets(bad, "train.csv", names=["GENE_A", "GENE_B"])
    assert "\n" not in str(error.value)


def test_a_target_constant_on_train_is_an_error_only_when_training():
    y = np.array([[1.0, 4.0], [2.0, 4.0], [3.0, 4.0]])
    with pytest.raises(EvalsuiteError, match=r"train: target 1 \(GENE_B\) is constant \(4.0\) on all 3 items.*"
                                             r"Pearson r is undefined.*drop it from the card's targets"):
        check_regression_targets(y, "train", training=True, names=["GENE_A", "GENE_B"])
    with pytest.raises(EvalsuiteError, match=r"train: one item"):
        check_regression_targets(y[:1], "train", training=True)
    assert check_regression_targets(y, "test").dtype == np.float64
    assert check_regression_targets(y[:, :1], "train", training=True).shape == (3, 1)


def test_bad_predictions_are_one_line_errors():
    y, p = _data(10, 3, seed=6)
    with pytest.raises(EvalsuiteError, match=r"predicted shape \(10, 2\) for targets of shape \(10, 3\)"):
        regression_split_metrics(CARD, _Probe(p[:, :2]), "features", y)
    p[4, 2] = np.nan
    with pytest.raises(EvalsuiteError, match=r"predicted nan for target 2 \(GENE_C\) of item 4; its fit diverged"):
        regression_split_metrics(CARD, _Probe(p), "features", y)


def _resampled(y, p, weights):
    rows = np.repeat(np.arange(len(y)), weights.astype(int))
    return y[rows], p[rows]


@pytest.mark.parametrize("tied", [False, True])
def test_a_weighted_draw_equals_rescoring_the_drawn_rows(tied):
    y, p = _data(60, 4, seed=7, tied=tied)
    patients = np.arange(60) // 3
    weights = np.stack(list(draw_weights(patients, 60, 5, seed=3)), axis=1)
    weighted = weighted_regression_metrics(y, p, weights)
    for d in range(5):
        reference = _reference(*_resampled(y, p, weights[:, d]))
        for name in REGRESSION_METRICS:
            assert weighted[name][d] == pytest.approx(reference[name].mean(), abs=1e-10), (name, d)


def test_all_weights_one_equal_the_unweighted_metrics_and_blocks_do_not_matter(monkeypatch):
    y, p = _data(50, 3, seed=8, tied=True)
    ones = weighted_regression_metrics(y, p, np.ones(50))
    assert {name: float(v[0]) for name, v in ones.items()} == pytest.approx(
        {name: fn(y, p) for name, fn in REGRESSION_METRICS.items()}, abs=1e-12)
    weights = np.stack(list(draw_weights(None, 50, 7, seed=1)), axis=1)
    whole = weighted_regression_metrics(y, p, weights)
    monkeypatch.setattr(regression, "DRAW_BLOCK_BYTES", 1)  # one draw per block
    for name, values in weighted_regression_metrics(y, p, weights).items():
        np.testing.assert_allclose(values, whole[name], rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")  # the reference's NaN
def test_a_draw_in_which_a_target_is_constant_leaves_it_out():
    y, p = _data(8, 2, seed=9)
    y[:4, 0] = 1.0  # target 0 varies only through the items the draw leaves out
    weights = np.array([[2.0, 0, 1, 1, 0, 0, 0, 0]]).T
    weighted = weighted_regression_metrics(y, p, weights)
    reference = _reference(*_resampled(y, p, weights[:, 0]))
    for name in ("pearson", "spearman", "r2"):
        assert weighted[name][0] == pytest.approx(reference[name][1], abs=1e-10)
    none_defined = weighted_regression_metrics(y, p, np.array([3.0, 0, 0, 0, 0, 0, 0, 0]))
    assert np.isnan(none_defined["pearson"][0]) and none_defined["mse"][0] == pytest.approx(
        mean_squared_error(y[:1], p[:1]))


def test_the_interval_resamples_whole_clusters():
    y, p = _data(90, 3, seed=10)
    slides = np.repeat(np.arange(15), 6)
    for seed in range(3):
        drawn = next(draw_weights(slides, 90, 1, seed))
        assert set(np.unique(drawn.reshape(15, 6), axis=1).shape) == {15, 1}  # a slide's spots come together
        reference = _reference(*_resampled(y, p, drawn))
        intervals = regression_intervals(y, p, groups=slides, draws=1, seed=seed)
        for name in REGRESSION_METRICS:
            assert intervals[name][0] == intervals[name][1] == pytest.approx(reference[name].mean(), abs=1e-10)
    assert regression_intervals(y, p, groups=slides, draws=1) != regression_intervals(y, p, draws=1)


def test_the_interval_is_nan_with_fewer_than_two_clusters_and_brackets_the_estimate():
    y, p = _data(120, 3, seed=12)
    assert all(np.isnan(v).all() for v in regression_intervals(y, p, groups=["patient"] * 120).values())
    intervals = regression_intervals(y, p, groups=np.arange(120) // 4, draws=300)
    for name, fn in REGRESSION_METRICS.items():
        assert intervals[name][0] < fn(y, p) < intervals[name][1], name
    draws = weighted_regression_metrics(y, p, np.stack(list(draw_weights(np.arange(120) // 4, 120, 300, 0)), axis=1))
    for name, values in draws.items():  # the 2.5th and 97.5th percentiles of bootstrap.py's draws
        assert intervals[name] == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12), name


def test_the_scorer_reports_the_probes_metrics_and_seeded_intervals():
    y, p = _data(45, 3, seed=13)
    slides = np.arange(45) // 5
    scored = regression_split_metrics(CARD, _Probe(p), "features", y, with_intervals=True, groups=slides, seed=2)
    notes = [name for name in scored if name.endswith(NOTE_SUFFIX)]  # only where an interval needs one
    assert [name for name in scored if name not in notes] == [
        "pearson", "spearman", "mse", "r2", "pearson_ci", "pearson_draws", "spearman_ci", "spearman_draws", "mse_ci",
        "mse_draws", "r2_ci", "r2_draws", "item_predictions"]
    # The predictions the run stores for paired tests, as float32 (the scores above are of the float64 ones).
    stored = scored["item_predictions"]
    assert stored.dtype == np.float32 and np.array_equal(stored, p.astype(np.float32))
    reference = _reference(y, p.astype(np.float32))
    for name in REGRESSION_METRICS:
        assert scored[name] == pytest.approx(reference[name].mean(), abs=1e-10)
        # The draws the interval is read from (the runner averages seeds with them): the percentile interval of the
        # same draws regression_intervals takes, read for 9 slides (shown_intervals.py).
        assert scored[f"{name}_draws"].shape == (1000,)
        assert scored[f"{name}_ci"] == shown_interval(scored[name], scored[f"{name}_draws"], 9, name).bounds
        raw = regression_intervals(y, p.astype(np.float32), slides, seed=2)[name]
        assert scored[f"{name}_ci"][0] <= raw[0] and raw[1] <= scored[f"{name}_ci"][1] or name == "mse"
    again = regression_split_metrics(CARD, _Probe(p), "features", y, with_intervals=True, groups=slides, seed=2)
    assert all(np.array_equal(again[k], v) for k, v in scored.items())
    assert "pearson_ci" not in regression_split_metrics(CARD, _Probe(p), "features", y)
