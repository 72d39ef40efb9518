"""Smoke tests for benchmarks/forward_batch.py, forward_memory.py and resize_gap.py at tiny settings.

The table's shape is checked, and the one fact of each that is not a timing: for resize_gap, an image shrunk less
than 2 x the reducing gap gets exactly torchvision's pixels and features; for forward_memory, a forward inside
reuse_freed_memory() faults far fewer pages in. Seconds are the benchmarks' output to read.
"""

import pytest
from conftest import run_benchmark

pytestmark = pytest.mark.slow


def _table(stdout: str, first: str) -> list:
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(first))
    return [lines[header].split()] + [line.split() for line in lines[header + 2:] if line.strip()]


def test_forward_batch_prints_every_batch_size_for_both_backbones(tmp_path):
    result = run_benchmark("forward_batch.py", "--tiles", 8, tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ") and "host: " in result.stdout
    header, *rows = _table(result.stdout, "backbone ")
    assert header == ["backbone", "batch", "ms_per_tile", "x64"]
    by_model = {}
    for row in rows:
        by_model.setdefault(row[0], []).append(int(row[-3]))
        assert float(row[-2]) > 0
    assert set(by_model) == {"efficientnet_lite0_imagenet", "vit_small_patch16_224"}, result.stdout
    assert all(sizes == [8, 16, 32, 64] for sizes in by_model.values()), result.stdout


def test_resize_gap_leaves_small_shrinks_exact(tmp_path):
    result = run_benchmark("resize_gap.py", "--sides", "448,1536", "--regions", 2, tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    header, small, large = _table(result.stdout, "side_px ")
    assert header == ["side_px", "ms_exact", "ms_gap", "speed-up", "pixels", "mean|max", "cos_min", "feat_rel"]
    assert small[0] == "448" and small[4:] == ["0.000|0", "1.000000", "0.00e+00"], result.stdout
    assert large[0] == "1536" and large[4] != "0.000|0" and 0.99 < float(large[5]) < 1, result.stdout


def test_forward_memory_reused_blocks_fault_far_less_than_glibcs_default(tmp_path):
    # One batch size (the CPU default): both backbones, both allocators; the full table is docs/compute.md's.
    result = run_benchmark("forward_memory.py", "--tiles", 64, "--batch-sizes", 16, tmp_path=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ") and "host: " in result.stdout
    header, *rows = _table(result.stdout, "backbone ")
    assert header == ["backbone", "batch", "malloc", "ms_per_tile", "system_s", "minor_faults", "peak_over_mib",
                      "default/reused"]
    faults = {(row[0], row[1], row[2]): int(row[5]) for row in rows}
    assert len(faults) == 4, result.stdout
    for (model, batch, malloc), count in faults.items():
        if malloc == "reused":  # the one fact here that is not a timing: the kernel stops faulting pages in
            assert count < faults[(model, batch, "default")] / 4, result.stdout
            assert float(next(r for r in rows if r[:3] == [model, batch, malloc])[-1]) > 0
