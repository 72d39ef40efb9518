"""Smoke tests for benchmarks/startup.py and benchmarks/probe_contention.py at --quick: exit code and the shape of
their lines only; the seconds and ratios are the benchmarks' output to read, never something a test asserts."""

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


def test_probe_contention_quick_prints_every_configuration_with_its_ratio(tmp_path):
    result = run_benchmark("probe_contention.py", "--quick", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    names = ["alone", "alone, 1 thread", "busy", "busy, 1 thread", "busy, OMP_WAIT_POLICY=PASSIVE"]
    lines = result.stdout.splitlines()[1:]
    assert [line[:32].strip() for line in lines] == names, result.stdout
    assert all(re.search(rf"{FIGURE} +ratio to alone +\d+\.\d+", line) for line in lines), result.stdout
