"""The probes a slide-encoder run fits on slide vectors (issue 51): `logreg` is scikit-learn's LogisticRegression as
Patho-Bench fits it, with C chosen on val; `cox` is the mean-pool probe's Cox model on vectors, the same risks as
meanpool on one-tile bags of those vectors."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score

from evalsuite.features.bags import SlideBags
from evalsuite.probes import CoxProbe, LogisticRegressionProbe, MeanPoolProbe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _classes(n: int, seed: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    features = rng.normal(size=(n, 8)) + np.eye(8)[labels] * 1.5
    return features.astype(np.float16), labels


def test_logreg_keeps_the_c_val_prefers_and_predicts_as_sklearn_does():
    (train, labels), (val, val_labels) = _classes(60, 0), _classes(30, 1)
    probe = LogisticRegressionProbe(3, C=[1e-4, 1.0]).fit(train, labels, val, val_labels, "balanced_accuracy")
    scores = {}
    for c in (1e-4, 1.0):
        model = LogisticRegression(C=c, max_iter=10000, random_state=0, class_weight="balanced")
        model.fit(train.astype(np.float32), labels)
        scores[c] = balanced_accuracy_score(val_labels, model.predict_proba(val.astype(np.float32)).argmax(1))
        if c == probe.selected_params_["C"]:
            chosen = model
    assert probe.selected_params_["C"] == max(scores, key=scores.get)
    np.testing.assert_allclose(probe.predict_proba(val), chosen.predict_proba(val.astype(np.float32)), atol=1e-6)


def test_logreg_gives_a_class_missing_from_train_probability_zero():
    train, labels = _classes(40, 2)
    keep = labels != 2
    probe = LogisticRegressionProbe(3, C=[1.0]).fit(train[keep], labels[keep], train, labels, "balanced_accuracy")
    proba = probe.predict_proba(train)
    assert proba.shape == (40, 3) and np.all(proba[:, 2] == 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1, atol=1e-6)


def test_cox_on_vectors_gives_meanpools_risks_on_one_tile_bags():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 5)).astype(np.float16)
    risk = vectors[:, 0].astype(float)
    times = rng.exponential(np.exp(-risk)) + 0.01
    targets = np.stack([times, rng.random(40) < 0.7], axis=1).astype(float)
    params = {"cox_lr": [0.01], "cox_weight_decay": [0.0, 0.1], "cox_epochs": 50}
    on_vectors = CoxProbe(1, **params).fit(vectors[:30], targets[:30], vectors[30:], targets[30:], "c_index")
    bags = lambda rows: SlideBags(rows, np.arange(len(rows) + 1))  # noqa: E731 - one tile a bag
    on_bags = MeanPoolProbe(1, **params).fit(bags(vectors[:30]), targets[:30], bags(vectors[30:]), targets[30:],
                                             "c_index")
    assert on_vectors.selected_params_ == on_bags.selected_params_
    np.testing.assert_array_equal(on_vectors.predict_risk(vectors), on_bags.predict_risk(bags(vectors)))
