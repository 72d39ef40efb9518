"""Smoke tests for the probe-batch and extraction-overhead benchmarks (probe_batches.py, extract_overhead.py) at a tiny setting.

Only the exit code, the table header and the ratio lines are checked; the timings are the
benchmarks' output to read, never something a test asserts.
"""

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_probe_batches_tiny(tmp_path):
    result = run_benchmark("probe_batches.py", "--samples", 600, "--dim", 16, "--batch-size", 32, "--epochs", 1,
                           "--warmup", 0, "--num-workers", 0, 1, "--threads", 1, "--heads", 3,
                           tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["source", "workers", "train", "s/epoch"], result.stdout
    for source in ("dataloader", "resident", "streamed", "step only"):
        assert any(line.startswith(source) for line in lines), (source, result.stdout)
    assert "train ratio (a)/(b):" in result.stdout and "data-only ratio (a)/(b):" in result.stdout
    assert "train ratio ceiling" in result.stdout and "3 head(s)" in result.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-probe-batches-")]  # .npy removed


@pytest.mark.slow
def test_extract_overhead_tiny(tmp_path):
    result = run_benchmark("extract_overhead.py", "--model", "test_vit", "--samples", 6, "--batch-size", 4,
                           "--num-workers", 0, "--chunk-rows", 4, "--repeats", 1, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["measurement", "median", "s"], result.stdout
    assert any(line.startswith("full pipeline") for line in lines) and "chunk writes (2)" in result.stdout
    assert "pipeline / pure forward:" in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-extract-overhead-")]  # caches removed


def test_probe_batches_refuses_a_missing_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --device cuda is valid here")
    result = run_benchmark("probe_batches.py", "--samples", 64, "--dim", 8, "--batch-size", 32, "--device", "cuda",
                           tmp_path=tmp_path)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith("probe_batches: device 'cuda' requested but CUDA")
