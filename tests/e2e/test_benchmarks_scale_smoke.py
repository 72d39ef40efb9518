"""Smoke tests for benchmarks/scale.py (every stage after extraction on synthetic caches, against its floor) at --quick.

Only the exit code and the shape of the table are checked: one row per stage with numeric time, floor, ratio,
peak RSS, GEMM rate and load columns. The seconds and ratios are the benchmark's output to read, never something a
test asserts.
"""

import re

import pytest
from conftest import run_benchmark

pytestmark = pytest.mark.slow

STAGES = ("open", "linear", "knn", "fewshot", "retrieval", "bootstrap", "calibration", "ranks", "abmil", "meanpool",
          "leaderboard")


def test_scale_help(tmp_path):
    result = run_benchmark("scale.py", "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:")
    for option in ("--quick", "--sizes", "--stages", "--cache-mode", "--scratch"):
        assert option in result.stdout, (option, result.stdout)


def test_scale_quick(tmp_path):
    result = run_benchmark("scale.py", "--quick", tmp_path=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert re.search(r"^cache mode memmap; host: \S+, \d+ cores, load [\d.]+ [\d.]+ [\d.]+$", result.stdout,
                     re.M), result.stdout
    header = next(i for i, line in enumerate(lines) if line.startswith("stage "))
    assert lines[header].split()[:6] == ["stage", "size", "time_s", "floor_s", "ratio", "peak_rss_mib"], lines[header]
    assert lines[header].split()[6:9] == ["bound", "gflops", "load"], lines[header]
    rows = [line.split(None, 9) for line in lines[header + 2:] if line.strip()]
    assert sorted(row[0] for row in rows) == sorted(STAGES), result.stdout
    for row in rows:
        assert row[1] == "quick", row
        for cell in row[2:6] + row[7:9]:
            float(cell)  # numeric (a ValueError fails the test)
        assert row[6] in ("gemm", "read", "mem", "sort", "step_gemm"), row
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("scale.")]  # the caches are removed
