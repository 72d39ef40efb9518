"""Smoke tests for the scripts in benchmarks/: each runs once at a tiny setting and prints its table.

Only the exit code and the table header are checked; the numbers (memory, metrics) are the
benchmarks' output to read, not something a test asserts.
"""

import pytest

from conftest import run_benchmark


@pytest.mark.parametrize("name", ["cache_memory.py", "fp16_neutrality.py", "probe_batches.py",
                                  "extract_overhead.py"])
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
