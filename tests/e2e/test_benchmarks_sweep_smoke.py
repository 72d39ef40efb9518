"""Smoke tests for benchmarks/sweep_local.py (local sweep vs separate `evalsuite run` processes) at its --quick setting.

Only the exit code and the ratio lines are checked; the seconds and ratios are the benchmark's output to read,
never something a test asserts.
"""

import re

import pytest
from conftest import run_benchmark


def test_sweep_local_help(tmp_path):
    result = run_benchmark("sweep_local.py", "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout and "--quick" in result.stdout and "--repeats" in result.stdout


def test_sweep_local_rejects_zero_repeats(tmp_path):
    result = run_benchmark("sweep_local.py", "--repeats", "0", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2 and "--repeats must be >= 1" in result.stderr, result.stderr


@pytest.mark.slow
def test_sweep_local_quick(tmp_path):
    result = run_benchmark("sweep_local.py", "--quick", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert re.search(r"^ratio B / A: \d+\.\d\d", result.stdout, re.M), result.stdout
    assert re.search(r"^acceptance ratio B / \(A - saved imports\): \d+\.\d\d; target <= 1\.15: (PASS|over) "
                     r"\(host: ", result.stdout, re.M), result.stdout
    assert re.search(r"^leaderboard rows: A (\d+), B \1 \(equal\)$", result.stdout, re.M), result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sweep_local.")]  # temporary outputs removed
