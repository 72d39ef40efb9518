"""Scores per block of bootstrap draws equal scoring each draw on its own, for every metric the tests use."""

import numpy as np
import pytest

from evalsuite.metrics.bootstrap import draw_weights
from evalsuite.metrics.draw_scores import draw_blocks, per_draw_scores
from evalsuite.metrics.segmentation import ConfusionScorer, metrics_from_confusion
from evalsuite.metrics.significance import ItemScorer, average_ranks

CLASSES = 4


def _probas(rng, items: int, seeds: int) -> list:
    # Rounded so that scores tie within a class: AUROC's tied groups are exercised.
    return [np.round(rng.dirichlet(np.ones(CLASSES), size=items), 1) for _ in range(seeds)]


@pytest.mark.parametrize("metric", ["balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr", "ece", "nll"])
@pytest.mark.parametrize("clustered", [False, True])
def test_item_scores_per_block_equal_the_draw_by_draw_scores(metric, clustered):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, CLASSES - 1, size=60)  # the last class never occurs: the "present classes" rules apply
    groups = np.repeat(np.arange(12), 5) if clustered else None
    scorer = ItemScorer(labels, _probas(rng, 60, 3), metric)
    blocked = per_draw_scores({"m": scorer}, groups, 60, draws=50, seed=5)["m"]
    one_by_one = np.array([scorer.score(w) for w in draw_weights(groups, 60, 50, 5)])
    np.testing.assert_allclose(blocked, one_by_one, rtol=1e-12, atol=1e-12)


def test_confusion_scores_per_block_equal_the_draw_by_draw_scores_for_every_segmentation_metric():
    rng = np.random.default_rng(4)
    names = ["background", "tumour_cells", "stroma"]
    per_seed = [rng.integers(0, 50, size=(15, 3, 3)) for _ in range(2)]
    per_seed[1][:, 2, :] = 0  # a class absent from the labels of one seed's images
    for metric in metrics_from_confusion(per_seed[0].sum(axis=0), names):
        scorer = ConfusionScorer(per_seed, metric, names)
        blocked = per_draw_scores({"m": scorer}, None, 15, draws=30, seed=1)["m"]
        one_by_one = np.array([scorer.score(w) for w in draw_weights(None, 15, 30, 1)])
        np.testing.assert_allclose(blocked, one_by_one, rtol=1e-12, atol=1e-12, err_msg=metric)


def test_blocks_hold_the_draws_in_order_and_stay_within_the_memory_bound(monkeypatch):
    monkeypatch.setattr("evalsuite.metrics.draw_scores.BLOCK_BYTES", 8 * 40 * 7)  # 7 draws of 40 items per block
    blocks = list(draw_blocks(None, 40, 30, seed=2))
    assert [len(b) for b in blocks] == [7, 7, 7, 7, 2]
    np.testing.assert_array_equal(np.concatenate(blocks), np.stack(list(draw_weights(None, 40, 30, 2))))


def test_average_ranks_of_a_matrix_rank_each_row_as_a_vector():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 4, size=(20, 6)).astype(float)
    rows[3, 2] = rows[7, 0] = np.nan
    for higher in (True, False):
        expected = np.array([_ranks_one_by_one(row, higher) for row in rows])
        np.testing.assert_array_equal(average_ranks(rows, higher), expected)


def _ranks_one_by_one(values, higher: bool) -> list:
    keys = [np.inf if np.isnan(v) else (-v if higher else v) for v in values]
    ordered = sorted(keys)
    # Average 1-based position among equal keys (NaN keys tie with each other, after every number).
    return [np.mean([i + 1 for i, k in enumerate(ordered) if k == key]) for key in keys]
