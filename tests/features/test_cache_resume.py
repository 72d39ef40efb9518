"""Kill-safe, resumable extraction; concurrent runs on one key; preemption; the cache command."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, cache_manifests, leaderboard_rows, run_cli

pytestmark = pytest.mark.slow

# The real backbone, in chunks of 32 samples: train (333) has 11 chunks of ~1 s each here.
RUN = ["run", "--task", "demo", "--probes", "knn", "--chunk-rows", "32", "--batch-size", "16", "--num-workers", "0"]


def _start(out: Path, *extra, new_group: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evalsuite", *RUN, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=new_group)


def _manifest(out: Path, split: str) -> dict | None:
    return cache_manifests(out).get(split)


def _done(manifest) -> int:
    return sum(chunk["done"] for chunk in manifest["chunks"]) if manifest else 0


def _wait_for_chunks(process, out: Path, chunks: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        manifest = _manifest(out, "train")
        if manifest is not None and _done(manifest) >= chunks:
            return
        time.sleep(0.02)
    raise AssertionError(f"extraction did not reach {chunks} chunks: {process.poll()} {process.stderr.read()}")


def _last_run(out: Path) -> dict:
    return json.loads(max((out / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime).read_text())


def _features_bytes(out: Path, split: str) -> bytes:
    return (out / "cache" / _manifest(out, split)["key"] / "features.npy").read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    result = run_cli(*RUN, "--out", out)
    assert result.returncode == 0, result.stderr
    return out


def test_sigkill_then_rerun_gives_a_bitwise_identical_cache_without_recomputing(reference, tmp_path):
    """Killed three times (before any chunk is done, mid-way, near the end), each rerun resuming the
    last: finished chunks are never rewritten and the final cache equals an uninterrupted run's."""
    out = tmp_path / "out"
    finished = {}
    for kill_after_chunks in (0, 4, 9):
        process = _start(out)
        _wait_for_chunks(process, out, kill_after_chunks)
        process.kill()
        process.wait()
        durable = _manifest(out, "train")
        assert not durable["complete"] and _done(durable) < len(durable["chunks"])
        now = {i: c["written_utc"] for i, c in enumerate(durable["chunks"]) if c["done"]}
        assert {i: now[i] for i in finished} == finished  # the killed rerun kept what was already on disk
        finished = now

    rerun = run_cli(*RUN, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    after = _manifest(out, "train")
    assert after["complete"]
    assert {i: after["chunks"][i]["written_utc"] for i in finished} == finished
    assert _last_run(out)["samples_extracted"]["train"] == 333 - sum(
        durable["chunks"][i]["stop"] - durable["chunks"][i]["start"] for i in finished)
    for split in ("train", "val", "test"):
        assert _features_bytes(out, split) == _features_bytes(reference, split)
    assert len({row["run_id"] for row in leaderboard_rows(out)}) == 1


def test_two_processes_on_one_key_extract_each_sample_once(reference, tmp_path):
    out = tmp_path / "out"
    first, second = _start(out), _start(out)
    for process in (first, second):
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr
    runs = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    assert len(runs) == 2
    for split, samples in {"train": 333, "val": 106, "test": 112}.items():
        assert sum(run["samples_extracted"][split] for run in runs) == samples
        assert _features_bytes(out, split) == _features_bytes(reference, split)


def test_sigterm_and_sigusr1_are_the_stop_signals():
    from evalsuite.features.extract import _STOP_SIGNALS

    assert set(_STOP_SIGNALS) == {signal.SIGTERM, signal.SIGUSR1}


def test_preemption_signal_stops_after_the_chunk_and_the_rerun_resumes(reference, tmp_path):
    stop_signal = signal.SIGUSR1  # what Slurm's --signal=B:USR1 sends; SIGTERM takes the same handler
    out = tmp_path / "out"
    process = _start(out)
    _wait_for_chunks(process, out, 2)
    process.send_signal(stop_signal)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 75, stderr
    assert f"stopped on {stop_signal.name}" in stderr and "rerun the same command to resume" in stderr
    stopped = _manifest(out, "train")
    assert not stopped["complete"] and _done(stopped) >= 2
    assert leaderboard_rows(out) == []

    rerun = run_cli(*RUN, "--out", out)
    assert rerun.returncode == 0, rerun.stderr
    assert _last_run(out)["samples_extracted"]["train"] == 333 - 32 * _done(stopped)
    assert _features_bytes(out, "train") == _features_bytes(reference, "train")


def test_sigterm_to_the_whole_process_group_stops_after_the_chunk_with_workers_alive(tmp_path):
    """Slurm and torchrun signal every process of the job: DataLoader workers get SIGTERM too and must
    not die mid-chunk, so the run still ends with the resumable exit code and no traceback."""
    out = tmp_path / "out"
    process = _start(out, "--num-workers", "1", new_group=True)
    _wait_for_chunks(process, out, 2)
    os.killpg(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 75, stderr
    assert "stopped on SIGTERM after chunk" in stderr and "Traceback" not in stderr
    stopped = _manifest(out, "train")
    assert not stopped["complete"] and _done(stopped) >= 2
    assert leaderboard_rows(out) == []


def test_cache_ls_verify_and_rm(reference, tmp_path):
    listing = run_cli("cache", "ls", "--out", reference)
    assert listing.returncode == 0 and listing.stdout.count("complete") == 3
    assert run_cli("cache", "verify", "--out", reference).returncode == 0

    out = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(reference), str(out)], check=True)
    manifest = _manifest(out, "val")
    key, last_chunk = manifest["key"], len(manifest["chunks"]) - 1
    features = out / "cache" / key / "features.npy"
    data = bytearray(features.read_bytes())
    data[-1] ^= 0xFF
    features.write_bytes(bytes(data))
    verify = run_cli("cache", "verify", "--out", out)
    assert f"{key}  CORRUPT chunks [{last_chunk}]" in verify.stdout
    assert_one_line_error(verify, "1 cache(s) not complete and intact", key)

    removed = run_cli("cache", "rm", key[:8], "--out", out)
    assert removed.returncode == 0 and f"removed {key}" in removed.stdout
    assert not (out / "cache" / key).exists()
    assert_one_line_error(run_cli("cache", "rm", "zzzz", "--out", out), "no cache", "matches zzzz")
