"""Ranks share one view of a cache's pending chunks, however late a rank reads the cache.

Two ranks run `prepare_features` in threads with an in-process stand-in for torch.distributed's collectives. Rank 1
is held back until rank 0 has written a chunk (as a slow rank is under torchrun): each rank must still fill its
shard of the chunks that were pending when the cache started, so none is left to no rank.
"""

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from evalsuite.config import RunConfig
from evalsuite.features.cache import FeatureCache
from evalsuite.features.chunk_log import CHUNK_LOG_FILE
from evalsuite.features.prepare import prepare_features
from evalsuite.runner import build_task_and_backbone
from evalsuite.runtime.distributed import Dist

WAIT_S = 30


class _Collectives:
    """What every thread-rank shares: one barrier and one box per collective call."""

    def __init__(self, world_size: int):
        self.barrier = threading.Barrier(world_size, timeout=WAIT_S)
        self.box = [None] * world_size


class ThreadDist(Dist):
    """Dist whose collectives run between threads of one process (the same results as gloo's)."""

    def __init__(self, rank: int, world_size: int, collectives: _Collectives):
        super().__init__(rank=rank, world_size=world_size)
        object.__setattr__(self, "collectives", collectives)

    def barrier(self) -> None:
        self.collectives.barrier.wait()

    def all_gather(self, value) -> list:
        self.collectives.barrier.wait()
        self.collectives.box[self.rank] = value
        self.collectives.barrier.wait()
        gathered = list(self.collectives.box)
        self.collectives.barrier.wait()
        return gathered

    def broadcast(self, value):
        return self.all_gather(value)[0]


def _attach_after_rank_0_wrote(monkeypatch):
    attach = FeatureCache.attach

    def late_attach(self, key):
        deadline = time.monotonic() + WAIT_S
        while not (self.folder(key) / CHUNK_LOG_FILE).is_file() and time.monotonic() < deadline:
            time.sleep(0.01)
        return attach(self, key)

    monkeypatch.setattr(FeatureCache, "attach", late_attach)


def _prepare_on_two_ranks(config) -> list:
    collectives, results, errors = _Collectives(2), [None, None], []

    def rank_main(rank: int):
        try:
            card, reader, backbone = build_task_and_backbone(config)
            results[rank] = prepare_features(config, card, reader, backbone, torch.device("cpu"),
                                             ThreadDist(rank, 2, collectives))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            collectives.barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.slow
def test_a_late_rank_fills_its_shard_of_the_chunks_pending_at_the_start(tmp_path: Path, monkeypatch):
    _attach_after_rank_0_wrote(monkeypatch)
    torch.manual_seed(0)
    config = RunConfig(task="demo", model="test_vit", random_init=True, out_dir=tmp_path, batch_size=4,
                       num_workers=0, chunk_rows=4, threads=1)
    main, other = _prepare_on_two_ranks(config)
    assert set(main.splits) == {"train", "val", "test"} and other.splits == {}
    for split, counts in main.extracted_per_rank.items():
        features, labels = main.splits[split]
        assert sum(counts) == len(labels) and min(counts) > 0, (split, counts)
        assert np.isfinite(np.asarray(features[:], dtype=np.float32)).all()
