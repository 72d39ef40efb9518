"""Smoke tests for the benchmarks that compare this checkout with a baseline revision (startup.py,
probe_contention.py, cache_write.py) at small sizes: exit code and the shape of their lines only; the seconds and
ratios are the benchmarks' output to read, never something a test asserts."""

import re

import pytest
from conftest import run_benchmark

pytestmark = pytest.mark.slow

FIGURE = r"\d+\.\d+ s"


def test_startup_quick_compares_the_leaderboard_with_the_baseline_revision(tmp_path):
    result = run_benchmark("startup.py", "--quick", "--repeats", "1", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("leaderboard"))
    assert re.search(rf"baseline +{FIGURE} +this +{FIGURE} +this/baseline \d+\.\d+", line), line
    assert "machine: " in line


def test_probe_contention_quick_prints_both_sides_beside_every_competitor(tmp_path):
    result = run_benchmark("probe_contention.py", "--quick", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if re.match(r" *(baseline|this) +bach ", line)]
    assert [(r[0], r[1], r[2]) for r in rows] == [(side, shape, beside) for shape in ("bach",)
                                                  for beside in ("alone", "spinner", "torch")
                                                  for side in ("baseline", "this")], result.stdout
    assert all(re.fullmatch(r"\d+\.\d+", r[3]) and re.fullmatch(r"\d+\.\d+", r[4]) for r in rows), result.stdout
    assert all(float(r[4]) == 1.0 for r in rows if r[2] == "alone"), result.stdout


def test_cache_write_compares_the_sizes_the_baseline_runs_and_prints_each_sides_growth(tmp_path):
    result = run_benchmark("cache_write.py", "--slides", "12,40", "--baseline-up-to", "12", "--tiles", "2", "--dim",
                           "8", "--scratch", tmp_path, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if re.match(r" *(12|40) ", line)}
    assert re.fullmatch(r"\d+\.\d+", rows["12"][-1]) and rows["40"][2:4] == ["-", "-"], result.stdout
    assert re.search(r"growth, this: \d+\.\d+ \(ms a chunk at 40 slides / at 12\)", result.stdout), result.stdout
    assert "growth, baseline: -" in result.stdout and "host: " in result.stdout
