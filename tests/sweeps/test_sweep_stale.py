"""A cell's `running` record whose process is gone (issue 40, item 6): told from a live runner, taken up by the next
`sweep run`, and `sweep run` never exits 0 while a cell is not done.

Records are written as a runner writes them, naming processes the test starts: a `sleep` (alive, but not the
runner: another start time, or no lock held), a Python child holding the cell's flock (a live runner), an exited
process, another boot, another host.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import assert_one_line_error, run_cli

from evalsuite.errors import EXIT_SWEEP_WAITING
from evalsuite.sweeps.cells import cell_id
from evalsuite.sweeps.liveness import CellHeld, boot_id, hold, start_ticks
from evalsuite.tasks.resources import cards_dir

SWEEP_NAME = "stale"
OTHER_HOST = "crashed-node"
HOLD_LOCK = ("import fcntl, sys, time\n"
             "handle = open(sys.argv[1], 'a')\n"
             "fcntl.flock(handle.fileno(), fcntl.LOCK_EX)\n"
             "print('held', flush=True)\n"
             "time.sleep(300)\n")


def _utc(seconds_ago: float = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def _sweep_file(folder: Path, labels: list) -> Path:
    """One cell per label: test_vit (random init) x a small copy of the demo card, kNN, seed 0."""
    card = yaml.safe_load((cards_dir() / "demo.yaml").read_text())
    card["name"] = "demo_small"
    card["reader"]["args"]["tile_size_px"] = 150
    (folder / "demo_small.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    models = [{"model": "test_vit", "random_init": True, "name": label} for label in labels]
    raw = {"name": SWEEP_NAME, "models": models,
           "tasks": [{"task": "demo_small.yaml", "probes": ["knn"]}], "seeds": [0], "device": "cpu", "num_workers": 0,
           "out": "results"}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _cells(folder: Path) -> Path:
    return folder / "results" / "sweeps" / SWEEP_NAME / "cells"


def _record(folder: Path, label: str, **fields) -> Path:
    """A `running` record of the cell `label`, as a local runner writes it, with `fields` replacing its own."""
    record = {"cell": cell_id(label, "demo_small"), "model": label, "task": "demo_small", "state": "running",
              "updated_utc": _utc(), "host": socket.gethostname(), "jobs": [], **fields}
    path = _cells(folder) / f"{record['cell']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def _sweep(path: Path, *args, timeout=300):
    return run_cli("sweep", *args, path, cwd=path.parent, timeout=timeout)


def _status(path: Path) -> dict:
    result = _sweep(path, "status", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    return {state["model"]: state for state in json.loads(result.stdout)}


@pytest.fixture
def children():
    """start(*argv) -> a child process, killed when the test ends."""
    started = []

    def start(*argv, ready: bool = False):
        child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True)
        started.append(child)
        if ready:
            assert child.stdout.readline().strip() == "held"
        return child

    yield start
    for child in started:
        child.kill()
        child.wait()


def _exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _live_runner(folder: Path, label: str, children) -> subprocess.Popen:
    """A process holding the cell's lock, its record naming it: what a `sweep run` running the cell looks like."""
    lock = _cells(folder) / f"{cell_id(label, 'demo_small')}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = children(sys.executable, "-c", HOLD_LOCK, str(lock), ready=True)
    _record(folder, label, pid=holder.pid, pid_start_ticks=start_ticks(holder.pid), boot_id=boot_id(), locked=True)
    return holder


def test_status_tells_a_live_runner_from_a_dead_one(tmp_path, children):
    path = _sweep_file(tmp_path, ["gone", "reused", "reused_old", "unlocked", "rebooted", "live", "live_old",
                                  "elsewhere"])
    sleeper = children("sleep", "300")
    ticks = start_ticks(sleeper.pid)
    _record(tmp_path, "gone", pid=_exited_pid())
    # The pid is alive but is a `sleep`: the record's start time is another, or (a record without start times)
    # the sleep started after the record was written, or the record says its runner held the lock and none does.
    _record(tmp_path, "reused", pid=sleeper.pid, pid_start_ticks=ticks - 100, boot_id=boot_id(), locked=False)
    _record(tmp_path, "reused_old", pid=sleeper.pid, updated_utc=_utc(seconds_ago=3600))
    _record(tmp_path, "unlocked", pid=sleeper.pid, pid_start_ticks=ticks, boot_id=boot_id(), locked=True)
    _record(tmp_path, "rebooted", pid=sleeper.pid, pid_start_ticks=ticks, boot_id="0" * 8, locked=False)
    _live_runner(tmp_path, "live", children)
    _record(tmp_path, "live_old", pid=os.getpid(), updated_utc=_utc())  # this test's process, started before
    _record(tmp_path, "elsewhere", host=OTHER_HOST, pid=1)

    states = _status(path)
    for label in ("gone", "reused", "reused_old", "unlocked", "rebooted"):
        assert states[label]["state"] == "failed" and not states[label].get("active"), states[label]
        assert "ended without a result" in states[label]["error"], states[label]
    assert "is now another process" in states["reused"]["error"]
    assert "is now another process" in states["reused_old"]["error"]
    assert "the host restarted" in states["rebooted"]["error"]
    for label in ("live", "live_old", "elsewhere"):
        assert states[label]["state"] == "running" and states[label]["active"], states[label]
    assert states["elsewhere"]["host"] == OTHER_HOST and "host" not in states["live"]
    text = _sweep(path, "status", timeout=120).stdout
    assert f"running elsewhere x demo_small: held by a process on {OTHER_HOST}, which this host cannot check" in text
    assert f"`evalsuite sweep run {path} --reclaim {OTHER_HOST}`" in text


def test_sweep_run_exits_5_while_another_process_runs_a_cell(tmp_path, children):
    path = _sweep_file(tmp_path, ["live"])
    _live_runner(tmp_path, "live", children)
    record = (_cells(tmp_path) / f"{cell_id('live', 'demo_small')}.json").read_bytes()
    result = _sweep(path, "run")
    assert result.returncode == EXIT_SWEEP_WAITING, result.stderr
    assert_one_line_error(result, "1 of 1 cells are not done: queued or running elsewhere")
    assert "1 cells are queued or running elsewhere (`sweep status`); left to them" in result.stdout
    assert "sweep stale: 0 done, 1 running, 0 pending, 0 failed of 1 cells" in result.stdout
    assert (_cells(tmp_path) / f"{cell_id('live', 'demo_small')}.json").read_bytes() == record
    assert not (tmp_path / "results" / "leaderboard.csv").exists()


@pytest.mark.slow  # two cells of test_vit on 80 tiles, the second from the first's cache: ~30 s
def test_a_stale_record_is_run_again_and_another_hosts_after_reclaim(tmp_path, children):
    path = _sweep_file(tmp_path, ["reused", "elsewhere"])
    sleeper = children("sleep", "300")
    _record(tmp_path, "reused", pid=sleeper.pid, pid_start_ticks=start_ticks(sleeper.pid) - 100, boot_id=boot_id(),
            locked=True)
    _record(tmp_path, "elsewhere", host=OTHER_HOST, pid=1)

    first = _sweep(path, "run")
    assert first.returncode == EXIT_SWEEP_WAITING, first.stderr
    assert "reused x demo_small: run " in first.stdout and "elsewhere x demo_small: run " not in first.stdout
    assert f"--reclaim {OTHER_HOST}" in first.stdout
    assert {label: s["state"] for label, s in _status(path).items()} == {"reused": "done", "elsewhere": "running"}

    second = _sweep(path, "run", "--reclaim", OTHER_HOST)
    assert second.returncode == 0, second.stderr
    assert "elsewhere x demo_small: run " in second.stdout and "reused x demo_small: run " not in second.stdout
    assert "sweep stale: 2 done, 0 running, 0 pending, 0 failed of 2 cells" in second.stdout


def test_a_cell_whose_lock_another_process_just_took_is_left_to_it(tmp_path, children):
    """Another `sweep run` took the cell's lock but has not written its record yet: the record still names a dead
    process, yet the held lock says the cell is being run."""
    path = _sweep_file(tmp_path, ["taken"])
    lock = _cells(tmp_path) / f"{cell_id('taken', 'demo_small')}.lock"
    lock.parent.mkdir(parents=True)
    children(sys.executable, "-c", HOLD_LOCK, str(lock), ready=True)
    _record(tmp_path, "taken", pid=_exited_pid())
    result = _sweep(path, "run")
    assert result.returncode == EXIT_SWEEP_WAITING, result.stderr
    assert "1 cells are queued or running elsewhere (`sweep status`); left to them" in result.stdout
    assert not (tmp_path / "results" / "leaderboard.csv").exists()


def test_a_runner_does_not_take_a_cell_whose_lock_is_held(tmp_path, children):
    """The lock taken between `sweep run`'s first look and its turn at the cell: the runner leaves the cell."""
    lock = tmp_path / "cell.lock"
    children(sys.executable, "-c", HOLD_LOCK, str(lock), ready=True)
    with pytest.raises(CellHeld), hold(lock):
        pass
