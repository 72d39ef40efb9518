"""Probes read float16 features and upcast one batch at a time; they learn separable data."""

import numpy as np
import pytest
import torch
from conftest import RecordingFeatures

from evalsuite.errors import EvalsuiteError
from evalsuite.probes import KNNProbe, LinearProbe
from evalsuite.probes.batches import iter_float32_batches


def _blobs(n_per_class: int, dim: int = 32, classes: int = 3, seed: int = 0):
    centres = np.random.default_rng(1234).normal(0, 3, size=(classes, dim))
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), n_per_class)
    features = centres[labels] + rng.normal(0, 1, size=(len(labels), dim))
    return features.astype(np.float16), labels


@pytest.mark.parametrize("probe_cls, params", [
    (LinearProbe, {"lr": [0.01, 0.001], "weight_decay": [0.0, 0.01], "epochs": 5, "batch_size": 16,
                     "eval_batch_size": 16, "stream_read_rows": 16}),
    (KNNProbe, {"k": [1, 5], "batch_size": 16}),
])
def test_probe_reads_at_most_one_batch_of_float16_rows_at_a_time(probe_cls, params):
    train, train_labels = _blobs(100)
    val, val_labels = _blobs(20, seed=1)
    train_store, val_store = RecordingFeatures(train), RecordingFeatures(val)
    probe = probe_cls(num_classes=3, **params).fit(train_store, train_labels, val_store, val_labels)
    proba = probe.predict_proba(val_store)
    reads = train_store.rows_per_read + val_store.rows_per_read
    assert reads and max(reads) <= 16 < len(train)
    assert proba.shape == (60, 3) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)


def test_batches_are_float32_on_the_requested_device_in_the_given_order():
    features = np.arange(20, dtype=np.float16).reshape(10, 2)
    order = np.array([9, 3, 5, 0, 1, 2, 4, 6, 7, 8])
    seen = list(iter_float32_batches(features, order, 4, torch.device("cpu")))
    assert [len(idx) for idx, _ in seen] == [4, 4, 2]
    for idx, batch in seen:
        assert batch.dtype == torch.float32 and batch.device.type == "cpu"
        assert np.array_equal(batch.numpy(), features[idx].astype(np.float32))


@pytest.mark.parametrize("probe_cls", [LinearProbe, KNNProbe])
def test_probes_learn_separable_classes(probe_cls):
    train, train_labels = _blobs(60)
    test, test_labels = _blobs(30, seed=2)
    probe = probe_cls(num_classes=3).fit(train, train_labels, test, test_labels)
    accuracy = (probe.predict_proba(test).argmax(axis=1) == test_labels).mean()
    assert accuracy > 0.9


def test_linear_probe_is_reproducible_for_a_seed():
    train, labels = _blobs(40)
    first = LinearProbe(3, epochs=3, seed=7).fit(train, labels, train, labels).predict_proba(train)
    again = LinearProbe(3, epochs=3, seed=7).fit(train, labels, train, labels).predict_proba(train)
    assert np.array_equal(first, again)


def test_label_out_of_range_is_a_clear_error():
    train, labels = _blobs(10)
    labels[0] = 5
    with pytest.raises(EvalsuiteError, match="label 5 is outside 0..2"):
        LinearProbe(3, epochs=1).fit(train, labels, train, labels % 3)


def test_knn_votes_in_blocks_equal_one_vote_and_keep_a_compact_neighbour_table(monkeypatch):
    import evalsuite.probes.pooled.knn as knn

    rng = np.random.default_rng(4)
    bank, queries = rng.normal(size=(300, 16)).astype(np.float16), rng.normal(size=(50, 16)).astype(np.float16)
    labels, query_labels = np.arange(300) % 3, np.arange(50) % 3
    probe = knn.KNNProbe(3, k=[1, 5, 20], batch_size=64).fit(bank, labels, queries, query_labels)
    sims, neighbours = probe._neighbours(queries, 20)
    assert neighbours.dtype == torch.int32 and sims.dtype == torch.float32 and tuple(sims.shape) == (50, 20)
    whole = probe.predict_proba(queries)
    monkeypatch.setattr(knn, "VOTE_ROWS", 7)
    np.testing.assert_array_equal(probe.predict_proba(queries), whole)
