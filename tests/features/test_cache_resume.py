"""Kill-safe, resumable extraction; concurrent runs on one key; preemption; the cache command.

The demo-backbone tests are `slow`; the issue-24 cases at the end (a signal in a split's last chunk, labels in the
cache key, checksums on open, a cache removed or locked by another process, flock refused, an unreadable manifest)
run in this process through the CLI's main() on a tiny CRC layout and timm's test_vit.
"""

import errno
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, cache_manifests, leaderboard_rows, make_crc, run_cli
from PIL import Image

from evalsuite import cli
from evalsuite.features import extract
from evalsuite.features.cache import CacheWriter, FeatureCache

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ---- issue 24: the feature cache and extraction, fast cases on a tiny CRC layout --------------------------------

TINY = ["run", "--task", "crc", "--no-count-check", "--model", "test_vit", "--random-init", "--precision", "fp32",
        "--num-workers", "0", "--probes", "knn"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny CRC data (every split one chunk) and a complete cached run of it."""
    base = tmp_path_factory.mktemp("tiny")
    data = make_crc(base / "data", train_per_class=2, test_per_class=1, size=(16, 16))
    assert cli.main([*TINY, "--data-root", str(data), "--out", str(base / "cached")]) == 0
    return {"data": data, "cached": base / "cached"}


def _main(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI's main() in this process, as a completed process."""
    capsys.readouterr()
    code = cli.main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def _tiny_run(capsys, tiny, out, *extra) -> subprocess.CompletedProcess:
    return _main(capsys, *TINY, "--data-root", tiny["data"], "--out", out, *extra)


def _copy_of_cached(tiny, tmp_path) -> Path:
    out = tmp_path / "out"
    subprocess.run(["cp", "-r", str(tiny["cached"]), str(out)], check=True)
    return out


def test_stop_signal_during_a_splits_last_chunk_stops_the_run(capsys, tiny, tmp_path, monkeypatch):
    """Item 3: every split here is one chunk, and SIGUSR1 arriving during it was ignored (exit 0, all splits
    extracted). Reference: exit 75 after chunk 1 of 1 of train, nothing of val/test, no leaderboard row."""
    real_autocast = extract.autocast_context

    def preempted_during_the_forward(*args):
        os.kill(os.getpid(), signal.SIGUSR1)  # Slurm's preemption notice (`--signal=B:USR1`)
        return real_autocast(*args)

    monkeypatch.setattr(extract, "autocast_context", preempted_during_the_forward)
    out = tmp_path / "out"
    stopped = _tiny_run(capsys, tiny, out)
    assert stopped.returncode == 75, stopped.stderr
    assert_one_line_error(stopped, "crc/train: stopped on SIGUSR1 after chunk 1 of 1", "rerun the same command")
    assert set(cache_manifests(out)) == {"train"} and not cache_manifests(out)["train"]["complete"]
    assert leaderboard_rows(out) == []

    monkeypatch.undo()
    resumed = _tiny_run(capsys, tiny, out)
    assert resumed.returncode == 0, resumed.stderr
    assert _last_run(out)["samples_extracted"]["train"] == 0  # the stopped chunk was done; nothing redone
    for split in ("train", "val", "test"):
        assert _features_bytes(out, split) == _features_bytes(tiny["cached"], split)


TILE_CARD = """name: relabelled
kind: classification
reader: {{name: tile_csv, args: {{manifest: tiles.csv}}}}
classes: [a, b]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [knn]
data_root: {root}
"""


def _tile_cohort(root: Path, labels: list[str]) -> Path:
    (root / "tiles").mkdir(parents=True, exist_ok=True)
    rows = ["image_path,label,split"]
    for number, label in enumerate(labels):
        Image.new("RGB", (16, 16), (number * 20, 80, 160)).save(root / "tiles" / f"{number}.png")
        rows.append(f"tiles/{number}.png,{label},{('train', 'train', 'val', 'test')[number % 4]}")
    (root / "tiles.csv").write_text("\n".join(rows) + "\n")
    card = root / "relabelled.yaml"
    card.write_text(TILE_CARD.format(root=root))
    return card


def _train_keys(out: Path) -> set:
    return {path.parent.name for path in (out / "cache").glob("*/manifest.json")
            if json.loads(path.read_text())["fields"]["split"] == "train"}


def test_corrected_labels_in_tiles_csv_are_not_served_from_the_old_cache(capsys, tmp_path):
    """Item 4: the cache key held the image list and not the labels, so a rerun after fixing tiles.csv trained on
    the old labels. Reference: the train cache's labels after the fix are the corrected ones, [1, 1, 0, 0, 1, 1]."""
    wrong = ["a", "a", "a", "a", "b", "b", "b", "b", "a", "a", "b", "b"]
    fixed = ["b", "b", "a", "a", "a", "a", "b", "b", "b", "b", "b", "b"]
    out = tmp_path / "out"
    card = _tile_cohort(tmp_path / "cohort", wrong)
    run_args = ["run", "--task", card, "--model", "test_vit", "--random-init", "--precision", "fp32",
                "--num-workers", "0", "--out", out]
    assert _main(capsys, *run_args).returncode == 0
    (old_key,) = _train_keys(out)
    _tile_cohort(tmp_path / "cohort", fixed)
    rerun = _main(capsys, *run_args)
    assert rerun.returncode == 0, rerun.stderr
    (new_key,) = _train_keys(out) - {old_key}
    assert np.load(out / "cache" / new_key / "labels.npy").tolist() == [1, 1, 0, 0, 1, 1]
    assert _last_run(out)["samples_extracted"]["train"] == 6  # a new cache, not the old one with its labels


def test_bytes_flipped_to_finite_values_in_a_chunk_stop_the_run(capsys, tiny, tmp_path):
    """Item 4: flipped bytes that stay finite were used by `run` without a word. Reference: exit 2 naming chunk 0
    and its checksum; the run JSONs and leaderboard stay as they were."""
    out = _copy_of_cached(tiny, tmp_path)
    manifest = _manifest(out, "train")
    features = out / "cache" / manifest["key"] / "features.npy"
    data = bytearray(features.read_bytes())
    data[manifest["data_offset_bytes"] + 3] ^= 0x01  # a low mantissa bit of row 0: still a finite float16
    features.write_bytes(bytes(data))
    board, runs = (out / "leaderboard.csv").read_bytes(), sorted((out / "runs").iterdir())

    result = _tiny_run(capsys, tiny, out)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"feature cache {features.parent} is corrupt", "chunk 0 (samples 0-",
                          "does not match its checksum", f"evalsuite cache rm {manifest['key']}")
    assert (out / "leaderboard.csv").read_bytes() == board and sorted((out / "runs").iterdir()) == runs


def test_cache_rm_waiting_for_a_running_extraction_cannot_remove_the_cache_before_it_is_opened(
        capsys, tiny, tmp_path, monkeypatch):
    """Item 5: `cache rm KEY` waited for the run's lock and deleted the cache between the run's unlock and its
    open (TypeError, exit 1). The real `cache rm` is started just before the run opens the train cache; reference:
    the run exits 0 and rm removes the cache after the run has opened it."""
    out, real_open, remover = tmp_path / "out", FeatureCache.open, []

    def open_while_rm_asks_for_the_lock(self, key, mode="memmap"):
        if not remover:
            remover.append(subprocess.Popen([sys.executable, "-m", "evalsuite", "cache", "rm", key, "--out", str(out)],
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            ready, _, _ = select.select([remover[0].stderr], [], [], 120)  # a watchdog, not a timing assert
            assert ready, "cache rm neither waited for the lock nor finished"
            remover.append(remover[0].stderr.readline())
        return real_open(self, key, mode)

    monkeypatch.setattr(FeatureCache, "open", open_while_rm_asks_for_the_lock)
    result = _tiny_run(capsys, tiny, out)
    assert result.returncode == 0, result.stderr
    key = remover[0].args[5]
    assert remover[1].startswith(f"evalsuite: waiting for the lock {out / 'cache' / '.locks' / key}.lock")
    stdout, _ = remover[0].communicate(timeout=120)
    assert remover[0].returncode == 0 and f"removed {key}" in stdout


def test_cache_folder_removed_mid_extraction_is_one_line(capsys, tiny, tmp_path, monkeypatch):
    """Item 5: a scratch purge removing the cache folder under the extraction ended in FileNotFoundError from
    `writer.reload()` (exit 1), hiding the real error. Reference: exit 2, one line naming the folder."""
    real_write = CacheWriter.write_chunk

    def purged_then_written(self, index, rows):
        shutil.rmtree(self.folder)
        return real_write(self, index, rows)

    monkeypatch.setattr(CacheWriter, "write_chunk", purged_then_written)
    out = tmp_path / "out"
    result = _tiny_run(capsys, tiny, out)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"feature cache {out / 'cache'}", "was removed while this run was writing it",
                          "rerun the same command")
    assert leaderboard_rows(out) == []


def test_flock_not_supported_names_the_file_system_and_the_fix(capsys, tiny, tmp_path, monkeypatch):
    """Item 5: Lustre mounted without flock answers ENOSYS, which was an internal error. Reference: exit 2, one line
    naming the lock file, the file system type and mount point of --out (findmnt's), and `-o flock`."""
    def no_flock(_fd, _operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    out = tmp_path / "out"
    if not shutil.which("findmnt"):
        pytest.skip("needs util-linux's findmnt for the reference file system")
    fs_type, mount_point = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,TARGET", "-T", str(tmp_path)],
                                          capture_output=True, text=True, check=True).stdout.split(maxsplit=1)
    mount_point = mount_point.strip()
    result = _tiny_run(capsys, tiny, out)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"cannot lock {out / 'cache' / '.locks'}",
                          f"the {fs_type} file system mounted at {mount_point} does not support flock", "-o flock")
    assert leaderboard_rows(out) == []


def test_one_truncated_manifest_is_reported_and_the_other_caches_still_listed(capsys, tiny, tmp_path):
    """Item 8: one truncated manifest.json made `cache ls` and `cache verify` stop at it. Reference: ls lists all 3
    caches (2 complete, 1 CORRUPT manifest, exit 0); verify names that one cache and exits 2."""
    out = _copy_of_cached(tiny, tmp_path)
    key = _manifest(out, "val")["key"]
    path = out / "cache" / key / "manifest.json"
    path.write_bytes(path.read_bytes()[:40])

    listing = _main(capsys, "cache", "ls", "--out", out)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.count("complete") == 2 and f"{key}" in listing.stdout and "CORRUPT manifest" in listing.stdout
    verify = _main(capsys, "cache", "verify", "--out", out)
    assert f"{key}  CORRUPT manifest ({path} is not valid JSON)" in verify.stdout
    assert verify.stdout.count("  complete") == 2
    assert_one_line_error(verify, "1 cache(s) not complete and intact", key)


def test_cache_rm_waiting_for_a_lock_says_so_naming_the_lock_file(capsys, tiny, tmp_path):
    """Item 8: a `cache rm` (or a second run) waiting for another run's lock printed nothing. Reference: one line
    naming the lock file while it waits; the cache is removed once the lock is released."""
    out = _copy_of_cached(tiny, tmp_path)
    key = _manifest(out, "test")["key"]
    lock_path = out / "cache" / ".locks" / f"{key}.lock"
    with open(lock_path, "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another run extracting this cache
        remover = subprocess.Popen([sys.executable, "-m", "evalsuite", "cache", "rm", key, "--out", str(out)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([remover.stderr], [], [], 120)  # a watchdog, not a timing assert
        line = remover.stderr.readline() if ready else ""
        assert (out / "cache" / key).is_dir()
    stdout, _ = remover.communicate(timeout=120)
    assert line == f"evalsuite: waiting for the lock {lock_path}, held by another evalsuite process (a run or " \
                   "`cache rm` on the same cache)\n"
    assert remover.returncode == 0 and f"removed {key}" in stdout and not (out / "cache" / key).exists()
