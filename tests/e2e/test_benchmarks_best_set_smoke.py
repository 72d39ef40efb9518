"""Smoke test for benchmarks/best_set_error.py at a tiny size: it runs and prints its two tables; the shares are the
benchmark's output to read (tests/metrics/test_best_set_error.py holds the error bound)."""

import re

from conftest import run_benchmark


def test_best_set_error_runs_at_a_tiny_size(tmp_path):
    result = run_benchmark("best_set_error.py", "--columns", "10", tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ")
    rows = re.findall(r"^\s+(2|5|10|30)\s+\d\.\d{3} ± \d\.\d{3}\s+\d\.\d{3} ± \d\.\d{3}\s+\d\.\d{3} ± \d\.\d{3}\s+[\d.]+$",
                      result.stdout, re.M)
    assert rows == ["2", "5", "10", "30"], result.stdout
    assert re.search(r"^\s+30\s+\d\.\d{3} ± \d\.\d{3}\s+\d\.\d{3} ± \d\.\d{3}$", result.stdout, re.M), result.stdout
    assert run_benchmark("best_set_error.py", "--columns", "3", tmp_path=tmp_path, timeout=120).returncode == 2
