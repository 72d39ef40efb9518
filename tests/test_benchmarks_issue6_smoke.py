"""Smoke tests for the issue #6 benchmarks (probe_batches.py, extract_overhead.py) at a tiny setting.

Only the exit code, the table header and the ratio lines are checked; the timings are the
benchmarks' output to read, never something a test asserts.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def run_benchmark(name: str, *args, tmp_path: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["probe_batches.py", "extract_overhead.py"])
def test_help(name, tmp_path):
    result = run_benchmark(name, "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.slow
def test_probe_batches_tiny(tmp_path):
    result = run_benchmark("probe_batches.py", "--samples", 600, "--dim", 16, "--batch-size", 32, "--epochs", 1,
                           "--warmup", 0, "--num-workers", 0, 1, "--threads", 1, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["source", "workers", "train", "s/epoch"], result.stdout
    for source in ("dataloader", "resident", "streamed", "step only"):
        assert any(line.startswith(source) for line in lines), (source, result.stdout)
    assert "train ratio (a)/(b):" in result.stdout and "data-only ratio (a)/(b):" in result.stdout
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
