"""The device-resident / streamed batch source: coverage, drop_last, reproducible order, no full upcast."""

import numpy as np
import pytest
import torch

from evalsuite.batches import BatchSource, epoch_permutation
from evalsuite.cache import MemmapFeatures


def _features(samples: int, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    # Row i holds the value i, so a batch tells which samples it carries.
    features = np.repeat(np.arange(samples, dtype=np.float16)[:, None], dim, axis=1)
    return features, np.arange(samples) % 3


def _memmap(tmp_path, features):
    path = tmp_path / "features.npy"
    np.save(path, features)
    return MemmapFeatures(path)


@pytest.mark.parametrize("samples, batch_size", [(100, 10), (103, 10), (7, 3), (64, 64)])
@pytest.mark.parametrize("mode", ["resident", "streamed"])
def test_each_sample_at_most_once_and_only_the_tail_dropped(tmp_path, samples, batch_size, mode):
    features, labels = _features(samples)
    store = features if mode == "resident" else _memmap(tmp_path, features)
    source = BatchSource(store, labels, torch.device("cpu"), block_rows=16)
    assert (source.resident is not None) == (mode == "resident")
    seen = []
    for x, y in source.epoch(epoch=0, batch_size=batch_size, seed=3):
        assert x.dtype == torch.float32 and len(x) == batch_size
        ids = x[:, 0].long()
        assert torch.equal(y, ids % 3)  # labels travel with their rows
        seen += ids.tolist()
    assert len(seen) == len(set(seen)) == samples - samples % batch_size
    everything = [int(x[0, 0]) for x, _ in BatchSource(store, labels, torch.device("cpu"), block_rows=16)
                  .epoch(epoch=0, batch_size=1, seed=3, drop_last=False)]
    assert sorted(everything) == list(range(samples))


@pytest.mark.parametrize("mode", ["resident", "streamed"])
def test_order_depends_only_on_seed_and_epoch(tmp_path, mode):
    features, labels = _features(50)
    store = features if mode == "resident" else _memmap(tmp_path, features)

    def order(seed, epoch):
        source = BatchSource(store, labels, torch.device("cpu"), block_rows=16)  # a fresh "rank" or restart
        return [x[:, 0].tolist() for x, _ in source.epoch(epoch, 5, seed=seed)]

    assert order(0, 1) == order(0, 1)
    assert order(0, 1) != order(0, 2) and order(0, 1) != order(1, 1)


def test_epoch_permutation_is_a_permutation_from_a_cpu_generator():
    first = epoch_permutation(1000, seed=5, epoch=2)
    assert first.device.type == "cpu"
    assert torch.equal(first, epoch_permutation(1000, seed=5, epoch=2))
    assert torch.equal(first.sort().values, torch.arange(1000))


def test_streamed_source_reads_blocks_never_the_whole_cache(tmp_path):
    features, labels = _features(200)
    reads = []

    class Recording(MemmapFeatures):
        def __getitem__(self, index):
            rows = super().__getitem__(index)
            reads.append(len(rows))
            return rows

    np.save(tmp_path / "f.npy", features)
    source = BatchSource(Recording(tmp_path / "f.npy"), labels, torch.device("cpu"), block_rows=32)
    assert source.resident is None
    assert sum(len(x) for x, _ in source.epoch(0, 8)) == 200
    assert max(reads) == 32 and sum(reads) == 200


def test_linear_probe_training_loop_never_syncs_with_the_host(monkeypatch):
    """Every way a tensor's value reaches Python (.item, .cpu, .tolist, .numpy, bool/int/float) fails
    inside the resident training loop; on a GPU each of them would stall the device every batch."""
    from evalsuite.probes.linear import LinearProbe

    rng = np.random.default_rng(0)
    features, labels = rng.standard_normal((96, 8)).astype(np.float16), rng.integers(0, 3, 96)
    probe = LinearProbe(3, lr=[1e-2, 1e-3], weight_decay=[0.0, 1e-2], epochs=2, batch_size=16)

    def host_sync(*_args, **_kwargs):
        raise AssertionError("host sync inside the training loop")

    with monkeypatch.context() as patch:
        for name in ("item", "cpu", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"):
            patch.setattr(torch.Tensor, name, host_sync)
        heads = probe._train_heads(features, labels)
    assert heads.steps == 2 * (96 // 16)
