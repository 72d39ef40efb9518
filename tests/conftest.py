"""Shared test helpers: run the CLI as users do, in a subprocess, and read its outputs."""

import csv
import os

# Under pytest-xdist (-n 2, two test files at a time on a 2-core CI host) each worker and the runs it
# starts compute on one thread: two 2-thread OpenMP pools on 2 cores spin against each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_PROGRESS = re.compile(r"\|\s*\d+/\d+ \[")  # a tqdm progress-bar redraw


def run_cli(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`python -m evalsuite ARGS` with the test's interpreter; returns the completed process."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "evalsuite", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_benchmark(name: str, *args, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python benchmarks/NAME ARGS` in tmp_path (its temporary files go there too)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def leaderboard_rows(out_dir: Path) -> list[dict]:
    path = Path(out_dir) / "leaderboard.csv"
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """A user error: non-zero exit, a single `evalsuite: error:` line on stderr naming what is wrong."""
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip() and not _PROGRESS.search(line)]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("evalsuite: error:"), lines[0]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def library_warnings(stderr: str) -> list[str]:
    """Lines of a run's stderr that come from a library's warnings (a normal run prints none)."""
    return [line for line in stderr.replace("\r", "\n").splitlines() if "Warning" in line or "warn(" in line]


class RecordingFeatures:
    """A float16 feature store that records the rows of every read, to check the probes' batch contract."""

    def __init__(self, array):
        assert array.dtype.name == "float16"
        self.array = array
        self.rows_per_read = []
        self.shape, self.ndim, self.dtype = array.shape, array.ndim, array.dtype

    def __len__(self):
        return len(self.array)

    def __getitem__(self, index):
        rows = self.array[index]
        self.rows_per_read.append(len(rows))
        return rows


@pytest.fixture
def cli():
    return run_cli


def noisy_class_split(classes: int, per_class: int, dim: int = 16, noise: float = 1.5, seed: int = 0) -> dict:
    """Gaussian classes around random centres, float16, every other sample in train and test."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, size=(classes, dim))
    labels = np.repeat(np.arange(classes), per_class)
    features = (centres[labels] + rng.normal(0, noise, size=(len(labels), dim))).astype(np.float16)
    return {"train": (features[::2], labels[::2]), "test": (features[1::2], labels[1::2])}
