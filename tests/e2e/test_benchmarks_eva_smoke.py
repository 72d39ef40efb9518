"""Smoke test for benchmarks/eva_side_by_side.py (kaiko-eva against `evalsuite run` on BACH) on a tiny set.

eva is pointed at a path that does not exist, so the script must say it skips eva in one line and still measure
the forward floor and the evalsuite run. Only the exit code and the shape of the table are checked; the seconds
and accuracies are the benchmark's output to read, never something a test asserts.
"""

import re

import pytest
from conftest import run_benchmark

pytestmark = pytest.mark.slow


def test_eva_side_by_side_skips_a_missing_eva_and_still_times_evalsuite(tmp_path):
    missing = tmp_path / "no-eva" / "bin" / "eva"
    result = run_benchmark("eva_side_by_side.py", "--size", "64x48", "--per-class", "12", "--eva", missing,
                           "--data", tmp_path / "bach", tmp_path=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "torch " in lines[0], result.stdout
    assert re.search(r"^host: \S+, \d+ cores, load [\d.]+ [\d.]+ [\d.]+$", result.stdout, re.M), result.stdout
    skips = [line for line in lines if "skipping eva" in line]
    assert skips == [f"eva_side_by_side: kaiko-eva is not installed (no executable at {missing}); skipping eva"]
    header = next(i for i, line in enumerate(lines) if line.startswith("suite "))
    assert lines[header].split() == ["suite", "wall_s", "x_floor", "x_fastest", "eva/evalsuite", "test_bal_acc",
                                     "per_seed"]
    body = [line.strip() for line in lines[header + 2:] if line.strip()]
    rows = {}
    for line in body:  # the label may hold single spaces; columns are two or more apart
        label = re.split(r"\s{2,}", line)[0]
        rows[label] = line[len(label):].split()
    forwards = ["forward only, batch 16", "forward only, batch 32, memory reused",
                "forward only, batch 16, memory reused"]
    assert set(rows) == {"floor (forward only, batch 32)", *forwards, "evalsuite (linear)", "evalsuite (knn)"}, \
        result.stdout
    floor_s, ours = rows["floor (forward only, batch 32)"], rows["evalsuite (linear)"]
    assert float(floor_s[0]) > 0 and floor_s[1] == "1.00" and float(floor_s[2]) >= 1
    fastest = [rows[label] for label in ["floor (forward only, batch 32)", *forwards] if rows[label][2] == "1.00"]
    assert len(fastest) >= 1 and all(float(rows[label][1]) > 0 for label in forwards), result.stdout
    assert float(ours[0]) > 0 and float(ours[2]) >= float(ours[1]) > 0, result.stdout  # x_fastest >= x_floor
    assert 0 <= float(ours[3]) <= 1 and len(ours) == 4 + 3, result.stdout  # wall, 2 ratios, mean and three seeds
    assert (tmp_path / "bach" / "LICENSE").exists()  # the real H&E's licence travels with the made set
