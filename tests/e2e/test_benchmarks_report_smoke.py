"""Smoke tests for benchmarks/report_scale.py (`evalsuite report` on a large synthetic output folder) at --quick.

Only the exit code and the shape of the time and size lines are checked; the seconds and megabytes are the
benchmark's output to read, never something a test asserts.
"""

import re

import pytest
from conftest import run_benchmark


def test_report_scale_help(tmp_path):
    result = run_benchmark("report_scale.py", "--help", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:") and "--quick" in result.stdout and "--keep" in result.stdout


def test_report_scale_rejects_a_single_model(tmp_path):
    result = run_benchmark("report_scale.py", "--quick", "--models", "1", tmp_path=tmp_path, timeout=120)
    assert result.returncode == 2 and "--models >= 2" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_report_scale_quick(tmp_path):
    result = run_benchmark("report_scale.py", "--quick", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert re.search(r"^out folder: 3 models x 2 tasks x 2 seeds, .*: 6 runs, \d+ leaderboard rows", result.stdout,
                     re.M), result.stdout
    host = r"\(host: \S+, \d+ cores, load [\d.]+ [\d.]+ [\d.]+\)$"
    for figure in (r"collect: \d+\.\d\d s ", r"html_report: \d+\.\d\d s "):
        assert re.search(f"^{figure}{host}", result.stdout, re.M), (figure, result.stdout)
    assert re.search(r"^collect \+ html_report in process: \d+\.\d\d s; target < 10 s: (PASS|over) " + host,
                     result.stdout, re.M), result.stdout
    assert re.search(r"^CLI `python -m evalsuite report --out DIR`: \d+\.\d\d s wall, peak RSS \d+ MiB; "
                     r"target < 10 s: (PASS|over) " + host, result.stdout, re.M), result.stdout
    assert re.search(r"^HTML size: \d+\.\d\d MB \(in process \d+\.\d\d MB\); target < 5 MB: (PASS|over) " + host,
                     result.stdout, re.M), result.stdout
    assert re.search(r"^best sets: \d+-\d+ of 3 models per task; the random-init floor is outside the set on \d+ of 2 "
                     r"tasks \(largest MCS p [\d.]+\): (PASS|INSIDE)$", result.stdout, re.M), result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("report_scale.")]  # the folder is removed
