"""Smoke test for benchmarks/few_clusters.py at a tiny size: it runs and prints one row per cluster count, model count
and rule; the shares are the benchmark's output to read (tests/metrics/test_few_clusters.py holds the bounds)."""

import re

from conftest import run_benchmark

SHARE = r"\d\.\d{3} ± \d\.\d{3}"


def test_few_clusters_runs_at_a_tiny_size(tmp_path):
    result = run_benchmark("few_clusters.py", "--columns", "10", tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ")
    rows = re.findall(rf"^\s+(\d+)\s+(\d+)\s+(before|now|now: not shown)\s+{SHARE}\s+{SHARE}\s+{SHARE}\s+[\d.]+$",
                      result.stdout, re.M)
    assert len(rows) == 6 * 3 * 2 and ("3", "2", "now: not shown") in rows and ("4", "2", "now") in rows, result.stdout
    assert run_benchmark("few_clusters.py", "--columns", "3", tmp_path=tmp_path, timeout=120).returncode == 2
