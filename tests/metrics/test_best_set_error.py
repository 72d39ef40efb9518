"""The error rate of the best set where the truth is known (issue 38): columns of k equal models scored on 1,000 test
items, the chance that any model is left out of the 95 % model confidence set must be at most 5 % (plus three
binomial standard errors of the simulation), at every k. The models share item difficulty, as real backbones do
(an item hard for one is hard for all), so their scores are correlated as in a real column. The draws are the
suite's own (`draw_blocks`, the item bootstrap of 1000 draws), and a model's score in a draw is its accuracy with
those item weights, what ItemScorer computes for accuracy (tests/metrics/test_draw_scores.py checks that)."""

import math

import numpy as np
import pytest

from evalsuite.metrics.draw_scores import draw_blocks
from evalsuite.metrics.multiple_comparisons import ALPHA, model_confidence_set

ITEMS, DRAWS, COLUMNS = 1000, 1000, 400


def equal_models_left_out(models: int, columns: int, seed: int) -> float:
    """The share of columns of `models` equal models in which the set leaves any model out."""
    weights = np.concatenate(list(draw_blocks(None, ITEMS, DRAWS, 0)))  # [draws, items]
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(columns):
        difficulty = rng.beta(4, 1, size=ITEMS)  # each item's chance of being right, the same for every model
        correct = (rng.random((ITEMS, models)) < difficulty[:, None]).astype(np.float64)
        observed, per_draw = correct.mean(axis=0), weights @ correct / ITEMS
        found = model_confidence_set(dict(enumerate(observed)), dict(enumerate(per_draw.T)), until_alpha=True)
        wrong += len(found.members) < models
    return wrong / columns


@pytest.mark.parametrize("models", [2, 5, 10, 30])
def test_equal_models_are_left_out_of_the_best_set_at_most_alpha_of_the_time(models):
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / COLUMNS)
    assert equal_models_left_out(models, COLUMNS, seed=models) <= bound
