"""Calibration metrics (ece, mce, brier, nll) against hand-worked examples, scikit-learn and torchmetrics."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import _ClassRanks, weighted_metrics
from evalsuite.metrics.calibration import (
    CALIBRATION_METRICS,
    N_BINS,
    PROBABILITY_FLOOR,
    CalibrationItems,
    bin_edges,
    calibration_metrics,
    confidence_bin,
    ece,
)
from evalsuite.metrics.classification import compute_metrics
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.intervals import bootstrap_intervals
from evalsuite.results.reliability import save_reliability_diagram

NAMES = ("ece", "mce", "brier", "nll")


def _random_case(seed: int, items: int = 400, classes: int = 4, concentration: float = 0.5):
    """Over-confident probabilities: sharp Dirichlet rows, labels agreeing with the argmax 60 % of the time."""
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(classes, concentration), size=items)
    y_true = np.where(rng.random(items) < 0.6, proba.argmax(axis=1), rng.integers(0, classes, items))
    return y_true, proba


def _torchmetrics_calibration(y_true, proba, norm: str) -> float:
    torch = pytest.importorskip("torch")
    classification = pytest.importorskip("torchmetrics.classification")
    metric = classification.MulticlassCalibrationError(num_classes=proba.shape[1], n_bins=N_BINS, norm=norm)
    return float(metric(torch.from_numpy(proba), torch.from_numpy(np.asarray(y_true, dtype=np.int64))))


def _numpy_brier(y_true, proba) -> float:
    onehot = np.eye(proba.shape[1])[y_true]
    return float(((proba - onehot) ** 2).sum(axis=1).mean())


def test_a_hand_worked_example():
    # 15 bins of width 1/15 = 0.0667, an item in (lower, upper]:
    #   A [0.90, 0.10] y=0: conf 0.90, bin 13 (0.867, 0.933], correct
    #   B [0.92, 0.08] y=1: conf 0.92, bin 13, wrong
    #   C [0.30, 0.70] y=1: conf 0.70, bin 10 (0.667, 0.733], correct
    #   D [0.65, 0.35] y=1: conf 0.65, bin 9 (0.600, 0.667], wrong
    # bin 13: acc 1/2, conf (0.90 + 0.92) / 2 = 0.91, gap 0.41, share 2/4 -> 0.205
    # bin 10: acc 1, conf 0.70, gap 0.30, share 1/4 -> 0.075
    # bin 9:  acc 0, conf 0.65, gap 0.65, share 1/4 -> 0.1625
    # ece = 0.205 + 0.075 + 0.1625 = 0.4425; mce = 0.65
    # brier: A 0.1^2 + 0.1^2 = 0.02; B 0.92^2 + 0.92^2 = 1.6928; C 0.3^2 + 0.3^2 = 0.18; D 0.65^2 * 2 = 0.845
    #        mean = 2.7378 / 4 = 0.68445
    # nll: -ln 0.9 = 0.1053605, -ln 0.08 = 2.5257286, -ln 0.7 = 0.3566749, -ln 0.35 = 1.0498221
    #      mean = 4.0375861 / 4 = 1.0093965
    y_true = np.array([0, 1, 1, 1])
    proba = np.array([[0.9, 0.1], [0.92, 0.08], [0.3, 0.7], [0.65, 0.35]])
    assert list(CalibrationItems(y_true, proba).bin) == [13, 13, 10, 9]
    ours = calibration_metrics(y_true, proba)
    assert ours == pytest.approx({"ece": 0.4425, "mce": 0.65, "brier": 0.68445, "nll": 1.0093965}, abs=1e-7)
    assert {name: fn(y_true, proba) for name, fn in CALIBRATION_METRICS.items()} == pytest.approx(ours, abs=1e-15)
    assert not any(higher_is_better(name) for name in NAMES)


def test_bins_are_open_below_and_closed_above_as_thunder():
    # THUNDER's loop (src/thunder/utils/calibration_metrics.py): in bin b when edges[b] < conf <= edges[b+1].
    edges = bin_edges()
    rng = np.random.default_rng(0)
    confidences = np.concatenate([edges[1:], rng.random(500), np.nextafter(edges[1:-1], 2.0)])
    thunder = np.full(len(confidences), -1)
    for b in range(N_BINS):
        thunder[(confidences > edges[b]) & (confidences <= edges[b + 1])] = b
    assert (confidence_bin(confidences) == thunder).all()
    assert list(confidence_bin(edges[1:])) == list(range(N_BINS))  # an upper edge belongs to the bin below it
    assert confidence_bin(np.array([0.0, 1.0 + 1e-12]))[[0, 1]].tolist() == [0, N_BINS - 1]


def test_five_bins_reproduce_thunders_default_on_a_worked_example():
    # THUNDER's M=5 (bins of 0.2): conf 0.9 and 0.92 in bin 4 (0.8, 1], 0.7 and 0.65 in bin 3 (0.6, 0.8].
    # bin 4: acc 1/2, conf 0.91, gap 0.41, share 1/2 -> 0.205; bin 3: acc 1/2, conf 0.675, gap 0.175 -> 0.0875
    y_true = np.array([0, 1, 1, 1])
    proba = np.array([[0.9, 0.1], [0.92, 0.08], [0.3, 0.7], [0.65, 0.35]])
    assert ece(y_true, proba, n_bins=5) == pytest.approx(0.205 + 0.0875, abs=1e-12)


@pytest.mark.parametrize("seed,classes", [(1, 2), (2, 5), (3, 10)])
def test_ece_and_mce_match_torchmetrics(seed, classes):
    y_true, proba = _random_case(seed, classes=classes)
    ours = calibration_metrics(y_true, proba)
    # torchmetrics bins in float32, hence the tolerance.
    assert ours["ece"] == pytest.approx(_torchmetrics_calibration(y_true, proba, "l1"), abs=1e-5)
    assert ours["mce"] == pytest.approx(_torchmetrics_calibration(y_true, proba, "max"), abs=1e-5)


@pytest.mark.parametrize("seed,classes", [(4, 2), (5, 3), (6, 8)])
def test_brier_and_nll_match_numpy_and_scikit_learn(seed, classes):
    y_true, proba = _random_case(seed, classes=classes)
    ours = calibration_metrics(y_true, proba)
    labels = list(range(classes))
    assert ours["brier"] == pytest.approx(_numpy_brier(y_true, proba), abs=1e-12)
    assert ours["brier"] == pytest.approx(brier_score_loss(y_true, proba, labels=labels, scale_by_half=False),
                                          abs=1e-12)
    assert ours["nll"] == pytest.approx(log_loss(y_true, proba, labels=labels), abs=1e-12)


def test_binary_brier_is_twice_scikit_learns_positive_class_brier():
    y_true, proba = _random_case(7, classes=2)
    assert calibration_metrics(y_true, proba)["brier"] == pytest.approx(2 * brier_score_loss(y_true, proba[:, 1]),
                                                                        abs=1e-12)


def test_one_class_present_matches_the_references():
    _, proba = _random_case(8, classes=3)
    y_true = np.zeros(len(proba), dtype=int)
    ours = calibration_metrics(y_true, proba)
    assert ours["ece"] == pytest.approx(_torchmetrics_calibration(y_true, proba, "l1"), abs=1e-5)
    assert ours["mce"] == pytest.approx(_torchmetrics_calibration(y_true, proba, "max"), abs=1e-5)
    assert ours["brier"] == pytest.approx(_numpy_brier(y_true, proba), abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns that y_true holds one label
        assert ours["nll"] == pytest.approx(log_loss(y_true, proba, labels=[0, 1, 2]), abs=1e-12)


def test_perfect_predictions_score_zero():
    y_true = np.array([0, 1, 2, 2, 1])
    ours = calibration_metrics(y_true, np.eye(3)[y_true])
    assert ours == {"ece": 0.0, "mce": 0.0, "brier": 0.0, "nll": 0.0}
    single_column = calibration_metrics(np.zeros(4, dtype=int), np.ones((4, 1)))
    assert single_column == {"ece": 0.0, "mce": 0.0, "brier": 0.0, "nll": 0.0}


def test_uniform_probabilities():
    # Every row 1/4: confidence 0.25, argmax class 0 (first on ties), so accuracy = share of class 0 = 3/8.
    # ece = mce = |3/8 - 1/4| = 0.125; brier = 4 (1/16) - 2/4 + 1 = 0.75 = 1 - 1/C; nll = ln 4.
    y_true = np.array([0, 0, 0, 1, 2, 3, 3, 1])
    ours = calibration_metrics(y_true, np.full((8, 4), 0.25))
    assert ours == pytest.approx({"ece": 0.125, "mce": 0.125, "brier": 0.75, "nll": np.log(4)}, abs=1e-12)


def test_a_zero_probability_on_the_true_class_gives_a_finite_nll():
    # Item 1 puts probability 0 on its true class: -ln(eps) = 36.04 instead of infinity.
    y_true = np.array([0, 1])
    proba = np.array([[1.0, 0.0], [1.0, 0.0]])
    ours = calibration_metrics(y_true, proba)
    assert ours["nll"] == pytest.approx(-np.log(PROBABILITY_FLOOR) / 2, abs=1e-12)
    assert ours["nll"] == pytest.approx(log_loss(y_true, proba), abs=1e-9)  # scikit-learn clips at eps too
    # both in the last bin: acc 1/2, conf 1 -> ece = mce = 0.5; brier (0 + 2) / 2 = 1
    assert (ours["ece"], ours["mce"], ours["brier"]) == pytest.approx((0.5, 0.5, 1.0), abs=1e-12)


def test_no_items_or_no_weight_is_nan_not_an_error():
    assert all(np.isnan(v) for v in calibration_metrics(np.zeros(0, dtype=int), np.zeros((0, 3))).values())
    y_true, proba = _random_case(9, items=10)
    assert all(np.isnan(v) for v in calibration_metrics(y_true, proba, weights=np.zeros(10)).values())


def test_a_label_outside_the_probability_columns_is_refused():
    with pytest.raises(ValueError, match="outside the 2 probability columns"):
        calibration_metrics(np.array([0, 2]), np.full((2, 2), 0.5))


def test_weighted_values_equal_the_values_on_the_repeated_items():
    y_true, proba = _random_case(10, items=300, classes=5)
    weights = np.random.default_rng(11).poisson(1.0, size=300).astype(float)  # zeros included, as a draw has
    repeated = np.repeat(np.arange(300), weights.astype(int))
    expected = calibration_metrics(y_true[repeated], proba[repeated])
    assert calibration_metrics(y_true, proba, weights=weights) == pytest.approx(expected, abs=1e-12)
    ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(5)]
    through_bootstrap = weighted_metrics(y_true, proba.argmax(axis=1), ranks, weights, 5,
                                         CalibrationItems(y_true, proba))
    assert {n: through_bootstrap[n] for n in NAMES} == pytest.approx(expected, abs=1e-12)


def test_unit_weights_reproduce_compute_metrics_including_calibration():
    y_true, proba = _random_case(12, items=120, classes=3)
    ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(3)]
    ours = weighted_metrics(y_true, proba.argmax(axis=1), ranks, np.ones(120), 3, CalibrationItems(y_true, proba))
    assert ours == pytest.approx(compute_metrics(y_true, proba), abs=1e-12)
    assert set(NAMES) <= set(compute_metrics(y_true, proba))


def test_bootstrap_intervals_of_the_calibration_metrics_contain_the_point_value():
    y_true, proba = _random_case(13, items=300, classes=4)
    point = compute_metrics(y_true, proba)
    intervals = bootstrap_intervals(y_true, proba, draws=300, seed=1)
    for name in NAMES:
        low, high = intervals[name]
        assert low < point[name] < high, (name, low, point[name], high)
    single = bootstrap_intervals(y_true, proba, draws=10, groups=["P1"] * len(y_true))
    assert all(np.isnan(single[name]).all() for name in NAMES)  # one cluster: nothing to resample


def test_reliability_diagram_is_a_png_written_in_place(tmp_path):
    import matplotlib.image

    y_true, proba = _random_case(14, items=200)
    path = save_reliability_diagram(y_true, proba, tmp_path / "plots" / "reliability.png", "toy / linear / seed 0")
    image = matplotlib.image.imread(path)
    assert image.shape[0] > image.shape[1] > 400 and image[..., :3].std() > 0.1, image.shape
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["reliability.png"]  # no staging file left


def test_reliability_diagram_with_an_unwritable_format_is_a_one_line_error(tmp_path):
    y_true, proba = _random_case(15, items=20)
    with pytest.raises(EvalsuiteError, match="cannot write the reliability diagram .*use a .png name") as error:
        save_reliability_diagram(y_true, proba, tmp_path / "x.notaformat", "toy")
    assert "\n" not in str(error.value)
    assert list(tmp_path.iterdir()) == []
