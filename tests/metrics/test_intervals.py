"""Intervals scored a block of draws at a time equal the percentile intervals of draw-by-draw `weighted_metrics`."""

import warnings

import numpy as np
import pytest

from evalsuite.metrics import intervals
from evalsuite.metrics.bootstrap import _ClassRanks, draw_weights, weighted_metrics
from evalsuite.metrics.calibration import CalibrationItems
from evalsuite.metrics.intervals import bootstrap_intervals


def _draw_by_draw(y_true, proba, draws, seed, groups=None, ordinal=False) -> dict:
    items, classes = proba.shape
    predicted = proba.argmax(axis=1)
    ranks = [_ClassRanks(y_true, proba[:, c], c) for c in range(classes)]
    calibration = CalibrationItems(y_true, proba)
    values = [weighted_metrics(y_true, predicted, ranks, w, classes, calibration, ordinal)
              for w in draw_weights(groups, items, draws, seed)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-nan metric: nanpercentile warns and gives nan
        return {name: (float(np.nanpercentile([v[name] for v in values], 2.5)),
                       float(np.nanpercentile([v[name] for v in values], 97.5))) for name in values[0]}


def _probabilities(items: int, classes: int, seed: int):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, classes, items)
    logits = rng.normal(size=(items, classes)) + 1.5 * np.eye(classes)[y_true]
    logits[: items // 4] = np.round(logits[: items // 4])  # tied scores for AUROC's groups
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return y_true, proba


@pytest.mark.parametrize("classes, clusters, ordinal", [(2, None, False), (4, 12, False), (5, 7, True), (3, 3, False)])
def test_blocked_intervals_equal_draw_by_draw_ones(monkeypatch, classes, clusters, ordinal):
    y_true, proba = _probabilities(90, classes, seed=classes)
    groups = None if clusters is None else [f"P{i % clusters}" for i in range(90)]
    monkeypatch.setattr(intervals, "BLOCK_BYTES", 8 * 90 * 37)  # 37 draws a block: the last block is partial
    blocked = bootstrap_intervals(y_true, proba, draws=200, seed=3, groups=groups, ordinal=ordinal)
    reference = _draw_by_draw(y_true, proba, 200, 3, groups, ordinal)
    assert list(blocked) == list(reference)
    for name, (low, high) in reference.items():
        assert blocked[name] == pytest.approx((low, high), rel=1e-12, abs=1e-12, nan_ok=True), name


def test_one_cluster_gives_nan_intervals_for_every_metric():
    y_true, proba = _probabilities(20, 3, seed=0)
    found = bootstrap_intervals(y_true, proba, draws=10, groups=["P1"] * 20)
    assert set(found) == set(_draw_by_draw(y_true, proba, 2, 0))
    assert all(np.isnan(low) and np.isnan(high) for low, high in found.values())
