"""The device-resident / streamed batch source: coverage, drop_last, reproducible order, no full upcast."""

import numpy as np
import pytest
import torch

from evalsuite.probes.batches import BatchSource, epoch_permutation
from evalsuite.storage.npy_rows import NpyRows


def _features(samples: int, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    # Row i holds the value i, so a batch tells which samples it carries.
    features = np.repeat(np.arange(samples, dtype=np.float16)[:, None], dim, axis=1)
    return features, np.arange(samples) % 3


def _memmap(tmp_path, features):
    path = tmp_path / "features.npy"
    np.save(path, features)
    return NpyRows(path)


@pytest.mark.parametrize("samples, batch_size", [(100, 10), (103, 10), (7, 3), (64, 64)])
@pytest.mark.parametrize("mode", ["resident", "streamed"])
def test_each_sample_at_most_once_and_only_the_tail_dropped(tmp_path, samples, batch_size, mode):
    features, labels = _features(samples)
    store = features if mode == "resident" else _memmap(tmp_path, features)
    source = BatchSource(store, labels, torch.device("cpu"), read_rows=16)
    assert (source.resident is not None) == (mode == "resident")
    seen = []
    for x, y in source.epoch(epoch=0, batch_size=batch_size, seed=3):
        assert x.dtype == torch.float32 and len(x) == batch_size
        ids = x[:, 0].long()
        assert torch.equal(y, ids % 3)  # labels travel with their rows
        seen += ids.tolist()
    assert len(seen) == len(set(seen)) == samples - samples % batch_size
    everything = [int(x[0, 0]) for x, _ in BatchSource(store, labels, torch.device("cpu"), read_rows=16)
                  .epoch(epoch=0, batch_size=1, seed=3, drop_last=False)]
    assert sorted(everything) == list(range(samples))


@pytest.mark.parametrize("mode", ["resident", "streamed"])
def test_order_depends_only_on_seed_and_epoch(tmp_path, mode):
    features, labels = _features(50)
    store = features if mode == "resident" else _memmap(tmp_path, features)

    def order(seed, epoch):
        source = BatchSource(store, labels, torch.device("cpu"), read_rows=16)  # a fresh "rank" or restart
        return [x[:, 0].tolist() for x, _ in source.epoch(epoch, 5, seed=seed)]

    assert order(0, 1) == order(0, 1)
    assert order(0, 1) != order(0, 2) and order(0, 1) != order(1, 1)


def test_epoch_permutation_is_a_permutation_from_a_cpu_generator():
    first = epoch_permutation(1000, seed=5, epoch=2)
    assert first.device.type == "cpu"
    assert torch.equal(first, epoch_permutation(1000, seed=5, epoch=2))
    assert torch.equal(first.sort().values, torch.arange(1000))


@pytest.mark.parametrize("batch_size", [8, 50])
def test_streamed_source_reads_bounded_ascending_runs_never_the_whole_cache(tmp_path, batch_size):
    features, labels = _features(200)
    reads = []

    class Recording(NpyRows):
        def __getitem__(self, index):
            rows = super().__getitem__(index)
            reads.append(np.asarray(index))
            return rows

    np.save(tmp_path / "f.npy", features)
    source = BatchSource(Recording(tmp_path / "f.npy"), labels, torch.device("cpu"), read_rows=32)
    assert source.resident is None
    assert sum(len(x) for x, _ in source.epoch(0, batch_size)) == 200
    assert max(len(r) for r in reads) == 32 and sum(len(r) for r in reads) == 200
    assert all((np.diff(r) > 0).all() for r in reads)  # each read one forward sweep of the file


def test_streamed_and_resident_epochs_are_the_same_batches(tmp_path):
    """The order of training samples must not depend on whether the planner chose RAM or a memory map."""
    features, labels = _features(203)
    ram = BatchSource(features, labels, torch.device("cpu"))
    mapped = BatchSource(_memmap(tmp_path, features), labels, torch.device("cpu"), read_rows=40)
    assert ram.resident is not None and mapped.resident is None
    for epoch, batch_size, drop_last in [(0, 16, True), (3, 16, False), (1, 64, True), (2, 7, False)]:
        resident = list(ram.epoch(epoch, batch_size, seed=5, drop_last=drop_last))
        streamed = list(mapped.epoch(epoch, batch_size, seed=5, drop_last=drop_last))
        assert len(resident) == len(streamed)
        for (x_ram, y_ram), (x_map, y_map) in zip(resident, streamed):
            assert torch.equal(x_ram, x_map) and torch.equal(y_ram, y_map)


def test_streamed_batches_of_a_class_sorted_cache_mix_the_classes(tmp_path):
    """Readers list samples class by class; contiguous reads made nearly single-class batches."""
    features, _ = _features(3000)
    labels = np.repeat(np.arange(3), 1000)  # class-sorted, as a cache of a folder-per-class dataset
    # 128 rows per read: what the default allows for rows up to 64 KiB (a 1024-wide float16 row is 2 KiB).
    source = BatchSource(_memmap(tmp_path, features), labels, torch.device("cpu"), read_rows=128)
    assert source.resident is None
    majority_share = [np.bincount(y.numpy(), minlength=3).max() / len(y) for _, y in source.epoch(0, 64)]
    assert np.mean(majority_share) < 0.6  # 3 balanced classes, random batches of 64: about 0.45


def test_linear_probe_training_loop_never_syncs_with_the_host(monkeypatch):
    """Every way a tensor's value reaches Python (.item, .cpu, .tolist, .numpy, bool/int/float) fails
    inside the resident training loop; on a GPU each of them would stall the device every batch."""
    from evalsuite.probes.pooled.linear import LinearProbe

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
