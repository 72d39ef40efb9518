"""Issue 39: extraction waits for the device once per chunk, not once per batch, and the rows it caches are the
bytes the per-batch copy gave. On the CPU the one place rows reach the host is `host_rows.ChunkRows.collect`, which
waits through `host_rows.wait_for_device`: counted here. The per-batch reference is the path before issue 39 (each
batch's float16 rows copied to the host at once with `.cpu().numpy()`), swapped in for `ChunkRows`."""

import numpy as np
import pytest
import torch
from conftest import cache_manifests

from evalsuite import cli
from evalsuite.features import host_rows

VIT = ["--model", "test_vit", "--random-init"]
RUN = ["run", "--task", "demo", "--probes", "knn", "--chunk-rows", "48", "--batch-size", "16", "--num-workers", "0"]


class PerBatchRows(host_rows.ChunkRows):
    """The reference: every batch checked and copied to the host when it is made (the pre-issue-39 path)."""

    def add(self, rows, at, description):
        count = len(rows)
        self.finite[at : at + count] = torch.isfinite(rows.flatten(1)).all(dim=1)
        self.overflow[at : at + count] = 0
        self.features[at : at + count] = torch.from_numpy(rows.to(torch.float16).cpu().numpy())
        return count


def _cached_rows(out) -> dict:
    """{split: float16 rows of the split's cache}."""
    return {split: np.load(out / "cache" / manifest["key"] / "features.npy", mmap_mode="r")[:]
            for split, manifest in cache_manifests(out).items()}


def _run(out, model_args, monkeypatch, rows_class=None) -> None:
    if rows_class is not None:
        monkeypatch.setattr("evalsuite.features.extract.ChunkRows", rows_class)
    assert cli.main([*RUN, *model_args, "--out", str(out)]) == 0
    monkeypatch.undo()


def test_extraction_waits_for_the_device_once_per_chunk(tmp_path, monkeypatch):
    waits = []
    monkeypatch.setattr(host_rows, "wait_for_device", lambda device: waits.append(device.type))
    assert cli.main([*RUN, *VIT, "--out", str(tmp_path)]) == 0
    chunks = sum(len(manifest["chunks"]) for manifest in cache_manifests(tmp_path).values())
    batches = sum(-(-(c["stop"] - c["start"]) // 16) for m in cache_manifests(tmp_path).values() for c in m["chunks"])
    assert chunks >= 4 and batches > chunks  # several batches per chunk, so a per-batch wait would show
    assert waits == ["cpu"] * chunks


@pytest.mark.slow
@pytest.mark.parametrize("model_args", [VIT, []], ids=["vit", "efficientnet_lite0"])
def test_cached_rows_equal_the_per_batch_copy_bit_for_bit(tmp_path, monkeypatch, model_args):
    _run(tmp_path / "chunked", model_args, monkeypatch)
    _run(tmp_path / "per_batch", model_args, monkeypatch, PerBatchRows)
    chunked, per_batch = _cached_rows(tmp_path / "chunked"), _cached_rows(tmp_path / "per_batch")
    assert sorted(chunked) == sorted(per_batch) == ["test", "train", "val"]
    for split in chunked:
        assert chunked[split].dtype == np.float16 and chunked[split].tobytes() == per_batch[split].tobytes(), split
