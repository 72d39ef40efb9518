"""Smoke tests for the scripts in benchmarks/: each runs once at a tiny setting and prints its table.

Only the exit code and the table header are checked; the numbers (memory, metrics) are the
benchmarks' output to read, not something a test asserts.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def run_benchmark(name: str, *args, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["cache_memory.py", "fp16_neutrality.py"])
def test_help(name, tmp_path):
    result = run_benchmark(name, "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.slow
def test_cache_memory_tiny(tmp_path):
    result = run_benchmark("cache_memory.py", "--sizes", "0.02", "--lr", "1e-3", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    header = result.stdout.splitlines()[0].split()
    assert header[:4] == ["size", "GiB", "mode", "rows"] and "peak/size" in header, result.stdout
    assert " ram " in result.stdout and " memmap " in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("evalsuite-cache-memory-")]  # work folder removed


@pytest.mark.slow
def test_fp16_neutrality_tiny(tmp_path):
    result = run_benchmark("fp16_neutrality.py", "--max-samples", "12", "--no-rerun", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].split() == ["probe", "split", "metric", "fp32", "fp16", "delta"]
    assert "max |delta|" in result.stdout and "median relative error" in result.stdout
