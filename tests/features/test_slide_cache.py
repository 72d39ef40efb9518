"""Slide caches: a SIGKILL mid-extraction then a rerun gives the same bytes; torchrun's 2 ranks equal 1 process."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import cache_manifests, leaderboard_rows, run_cli

pytestmark = pytest.mark.slow

# A tiny ViT in chunks of 8 tiles: a demo slide (10-14 tiles) spans two chunks, so a kill can land mid-slide; the
# decoding of slide tiles, the cache and the resume are what is tested, not the backbone.
RUN = ["run", "--task", "demo_slide", "--model", "test_vit", "--random-init", "--probes", "meanpool",
       "--chunk-rows", "8", "--batch-size", "8", "--num-workers", "0", "--threads", "1"]
FILES = ("features.npy", "labels.npy", "coords_level0.npy")


def _done(manifest) -> int:
    return sum(chunk["done"] for chunk in manifest["chunks"]) if manifest else 0


def _cache_bytes(out: Path) -> dict:
    return {(split, name): (out / "cache" / manifest["key"] / name).read_bytes()
            for split, manifest in cache_manifests(out).items() for name in FILES}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    result = run_cli(*RUN, "--out", out)
    assert result.returncode == 0, result.stderr
    return out


def test_sigkill_mid_slide_then_rerun_gives_byte_identical_slide_caches(reference, tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "evalsuite", *RUN, "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None and _done(cache_manifests(out).get("train")) < 2:
        time.sleep(0.02)
    process.kill()
    process.wait()
    killed = cache_manifests(out)["train"]
    assert not killed["complete"] and 2 <= _done(killed) < len(killed["chunks"])
    kept = {i: c["written_utc"] for i, c in enumerate(killed["chunks"]) if c["done"]}

    rerun = run_cli(*RUN, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    resumed = cache_manifests(out)["train"]
    assert {i: resumed["chunks"][i]["written_utc"] for i in kept} == kept  # finished chunks were not redone
    assert resumed["slides"] == killed["slides"]  # the tiling was read back from the cache, not redone
    assert _cache_bytes(out) == _cache_bytes(reference)
    assert len({row["run_id"] for row in leaderboard_rows(out)}) == 1


def test_torchrun_two_ranks_share_slides_and_match_one_process(reference, tmp_path):
    multi = tmp_path / "multi"
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    result = subprocess.run([*launcher, "--standalone", "--nproc_per_node=2", "-m", "evalsuite", *RUN,
                             "--out", str(multi)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert _cache_bytes(multi) == _cache_bytes(reference)
    record = json.loads(next((multi / "runs").glob("*.json")).read_text())
    per_rank = record["distributed"]["samples_extracted_per_rank"]
    assert record["distributed"]["world_size"] == 2 and all(min(counts) > 0 for counts in per_rank.values())
    assert {split: sum(counts) for split, counts in per_rank.items()} == \
        {split: info["tiles"] for split, info in record["slides"].items()}
    single = {r["metric"]: float(r["value"]) for r in leaderboard_rows(reference) if r["split"] == "test"}
    assert {r["metric"]: float(r["value"]) for r in leaderboard_rows(multi) if r["split"] == "test"} == single
    assert result.stdout.count("results:") == 1


def test_budget_counts_slides_times_tiles_times_dim(reference):
    result = run_cli("budget", "--task", "demo_slide", "--model", "test_vit", "--random-init", "--json", "--out",
                     reference)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    tiles = {split: len(np.load(reference / "cache" / m["key"] / "coords_level0.npy"))
             for split, m in cache_manifests(reference).items()}
    for split_plan in plan["splits"]:
        assert split_plan["samples"] == tiles[split_plan["split"]] and split_plan["cached"]
        assert split_plan["cache_bytes"] == tiles[split_plan["split"]] * split_plan["row_shape"][0] * 2
