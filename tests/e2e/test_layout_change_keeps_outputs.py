"""The package's new layout (issue 50) changed no output: the demo run by the revision before it and by this
checkout gives the same leaderboard rows (apart from run ids, timestamps and the measured rates), the same run
JSON scores, and the same cache keys and cache bytes.

The earlier revision is BASELINE, the last commit before the files moved; it is taken from this checkout's own
history (`git archive`), so a fresh clone runs it offline. Each side runs in its own process and output folder;
nothing is shared but the demo data, which ship with the package."""

import csv
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

BASELINE = "d132953894370ef54738abdf5558a0fa21dbe76d"  # main before issue 50's layout
# One data folder for both sides: the demo card's `package:` root would be each code tree's own copy, and the
# data folder is part of a cache key.
RUN = ("run", "--task", "demo", "--seeds", "0", "--probes", "linear,knn",
       "--data-root", str(REPO / "evalsuite" / "data" / "hgsc_nest"))
# What differs between two runs of the same code: identities, clocks and the host's measured speed.
VARYING = {"run_id", "timestamp_utc", "throughput_img_s", "forward_img_s", "device_hours_est", "host_load_1m"}
CACHE_FILES = ("features.npy", "labels.npy")


def _baseline_tree(target: Path) -> Path:
    archive = target / "baseline.tar"
    made = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), BASELINE],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"revision {BASELINE[:7]} is not in this checkout's history ({made.stderr.strip()})")
    with tarfile.open(archive) as tar:
        tar.extractall(target / "baseline", filter="data")
    return target / "baseline"


def _run(code_root: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root), "TQDM_DISABLE": "1"}
    result = subprocess.run([sys.executable, "-m", "evalsuite", *RUN, "--out", str(out)], cwd=out.parent, env=env,
                            capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    (record_path,) = (out / "runs").glob("*.json")
    return json.loads(record_path.read_text())


def _rows(out: Path) -> list:
    with open(out / "leaderboard.csv", newline="") as handle:
        return [{name: value for name, value in row.items() if name not in VARYING} for row in csv.DictReader(handle)]


def test_the_demo_gives_the_same_rows_scores_and_cache_bytes_before_and_after_the_layout_change(tmp_path):
    baseline_root = _baseline_tree(tmp_path)
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before = _run(baseline_root, tmp_path / "before" / "out")
    after = _run(REPO, tmp_path / "after" / "out")
    assert _rows(tmp_path / "before" / "out") == _rows(tmp_path / "after" / "out")
    assert [probe["metrics"] for probe in before["probes"]] == [probe["metrics"] for probe in after["probes"]]
    assert before["cache"]["keys"] == after["cache"]["keys"]
    for key in after["cache"]["keys"].values():
        for name in CACHE_FILES:
            assert (tmp_path / "before" / "out" / "cache" / key / name).read_bytes() == \
                (tmp_path / "after" / "out" / "cache" / key / name).read_bytes(), (key, name)
