"""Shard extraction without Slurm: the elements a Slurm sweep would run (`sweep run --executor slurm --dry-run`
writes the plan), run by hand. Two shards fill one cache byte for byte as one process does; a shard stopped by
a signal mid-extraction exits 75 and, run again, finishes from the chunks on disk."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cache_manifests, leaderboard_rows, run_cli

pytestmark = pytest.mark.slow

SETTINGS = ["--model", "test_vit", "--random-init", "--device", "cpu", "--num-workers", "0", "--chunk-rows", "32",
            "--batch-size", "32", "--probes", "knn"]


def _planned_sweep(folder: Path) -> Path:
    sweep = folder / "sweep.yaml"
    sweep.write_text("name: shards\nmodels:\n  - {name: tiny, model: test_vit, random_init: true}\n"
                     "tasks:\n  - {task: demo, shards: 2}\nseeds: [0]\nprobes: [knn]\ndevice: cpu\nnum_workers: 0\n"
                     "chunk_rows: 32\nbatch_size: 32\nout: out\n")
    result = run_cli("sweep", "run", sweep, "--executor", "slurm", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"would run: sbatch --parsable --array=0-1 --mem=\d+M \S+array-dry-run.sbatch 0\n", result.stdout)
    assert re.search(r"would run: sbatch --parsable --array=0 --mem=\d+M '--dependency=afterany:<ARRAY1>_0:<ARRAY1>_1' "
                     r"\S+array-dry-run.sbatch 2\n", result.stdout), result.stdout  # the probe element, after both
    assert not (folder / "out" / "leaderboard.csv").exists()
    plan = next(line for line in result.stdout.splitlines() if line.startswith("plan: "))[len("plan: "):]
    assert plan.endswith("plan-dry-run.json")
    return Path(plan)


def _element(plan: Path, index: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evalsuite", "sweep", "element", str(plan), str(index)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _a_train_chunk_of_shard_0_done(cache: Path) -> bool:
    train = cache_manifests(cache.parent).get("train")
    return bool(train and train["chunks"][0]["done"])


def test_two_shards_fill_the_cache_a_stopped_shard_resumes_and_the_bytes_equal_one_process(tmp_path):
    plan = _planned_sweep(tmp_path)
    cache = tmp_path / "out" / "cache"
    first = _element(plan, 0)
    deadline = time.monotonic() + 120
    while not _a_train_chunk_of_shard_0_done(cache):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    first.send_signal(signal.SIGUSR1)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 75, stderr  # stopped after the chunk in hand; the rest is pending
    manifests = [json.loads(p.read_text()) for p in cache.glob("*/manifest.json")]
    assert not any(m["complete"] for m in manifests)
    for index in (0, 1, 2):  # shard 0 again (resumes), shard 1, then the cell's probes
        done = _element(plan, index)
        out, err = done.communicate(timeout=300)
        assert done.returncode == 0, err
    rows = leaderboard_rows(tmp_path / "out")
    assert {(r["model"], r["probe"], r["seed"]) for r in rows} == {("tiny", "knn", "0")}
    state = json.loads((plan.parent / "cells").glob("tiny__demo-*.shard0.json").__next__().read_text())
    assert state["state"] == "done"

    single = tmp_path / "single"
    assert run_cli("run", "--task", "demo", *SETTINGS, "--out", single).returncode == 0
    keys = sorted(p.parent.name for p in (single / "cache").glob("*/features.npy"))
    assert len(keys) == 3
    for key in keys:
        assert (single / "cache" / key / "features.npy").read_bytes() == (cache / key / "features.npy").read_bytes()
