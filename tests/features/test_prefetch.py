"""Extraction without DataLoader workers decodes the next batch on one thread while the forward runs."""

import threading

import pytest
import torch

from evalsuite.features.prefetch import PrefetchedBatches


def _decode_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("evalsuite-decode") and t.is_alive()]


def test_batches_come_in_order_and_the_thread_is_gone_after_close():
    ahead = PrefetchedBatches(iter(range(5)))
    assert [next(ahead) for _ in range(5)] == list(range(5))
    with pytest.raises(StopIteration):
        next(ahead)
    ahead.close()
    assert not _decode_threads()


def test_a_decode_error_reaches_the_caller_as_itself():
    def batches():
        yield "first"
        raise OSError("broken.tif: cannot identify image file")

    ahead = PrefetchedBatches(batches())
    assert next(ahead) == "first"
    with pytest.raises(OSError, match="broken.tif"):
        next(ahead)
    ahead.close()
    assert not _decode_threads()


def test_the_decode_thread_runs_torch_on_one_thread_and_leaves_the_callers_threads_alone():
    before = torch.get_num_threads()
    seen = []

    def batches():
        while True:
            seen.append(torch.get_num_threads())
            yield len(seen)

    ahead = PrefetchedBatches(batches())
    next(ahead), next(ahead)
    ahead.close()
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_a_run_without_workers_extracts_the_same_cache_as_one_with_a_worker(tmp_path):
    from conftest import cache_manifests, run_cli

    caches = {}
    for workers in ("0", "1"):
        out = tmp_path / f"out{workers}"
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                         "--num-workers", workers, "--threads", "1", "--out", out, timeout=300)
        assert result.returncode == 0, result.stderr
        caches[workers] = {split: [chunk["sha256"] for chunk in manifest["chunks"]]
                           for split, manifest in cache_manifests(out).items()}
    assert caches["0"] == caches["1"] and caches["0"]
