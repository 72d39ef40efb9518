"""Smoke test for benchmarks/feed_rate.py at --quick: it runs every reader family through the real extraction path
and prints one row per reader and worker count; the rates are the benchmark's output to read, never asserted."""

import re

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_feed_rate_quick_prints_every_reader_with_one_and_two_workers(tmp_path):
    result = run_benchmark("feed_rate.py", "--quick", tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ")
    row = r"^(pcam|crc|mhist|bach|slides)\s+\d+\s+([12])\s+\d+\s+\d+\s+\d+\s+(PASS|below)\s+[\d.]+\s+\d+\s+\d+\s+\d+$"
    rows = re.findall(row, result.stdout, re.M)
    assert [(reader, workers) for reader, workers, _ in rows] == [
        (reader, workers) for reader in ("pcam", "crc", "mhist", "bach", "slides") for workers in ("1", "2")], \
        result.stdout
    assert re.search(r"goal 1500 img/s per worker \(host: \S+, \d+ cores, load [\d.]+ [\d.]+ [\d.]+\)$", result.stdout,
                     re.M), result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("feed_rate.")]  # the data folder is removed
