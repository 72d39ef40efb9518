"""`sweep run` with its `out` on a full file system (issue 40): the cell's state write fails with ENOSPC outside the
cell's error handling. It must be one line naming the file and the fix, exit 2, the previous state file as it was
and no temp file left. The fault is injected at the state file's fsync (any machine), and comes from a real full
tmpfs (needs root to mount; skipped without)."""

import errno
import json
import os
import subprocess
from pathlib import Path

import yaml
from conftest import assert_one_line_error, fill_leaving, run_cli

from evalsuite import cli
from evalsuite.sweeps.cells import cell_id

CELL = cell_id("vit_a", "demo")
EARLIER = {"cell": CELL, "model": "vit_a", "task": "demo", "state": "failed", "error": "an earlier failure",
           "updated_utc": "2026-01-01T00:00:00Z", "host": "elsewhere", "pid": 1}


def _sweep_file(folder: Path, out: Path) -> Path:
    raw = {"name": "full", "models": [{"model": "test_vit", "random_init": True, "name": "vit_a"}],
           "tasks": [{"task": "demo", "probes": ["knn"]}], "seeds": [0], "device": "cpu", "num_workers": 0,
           "out": str(out)}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _earlier_state(out: Path) -> Path:
    path = out / "sweeps" / "full" / "cells" / f"{CELL}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(EARLIER))
    return path


def _debris(folder: Path) -> list:
    return [str(p) for p in folder.rglob("*") if p.name.endswith(".tmp")]


def _expect_disk_full(result, state: Path) -> None:
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"cannot write {state}: no space left on the device",
                          "free space there or set out: in the sweep file to a folder on a disk with room")
    assert json.loads(state.read_text()) == EARLIER
    assert not _debris(state.parents[3])
    assert not (state.parents[3] / "leaderboard.csv").exists()


def test_state_write_hitting_a_full_disk_is_one_line_and_keeps_the_earlier_state(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    state = _earlier_state(out)
    path = _sweep_file(tmp_path, out)
    real_fsync = os.fsync

    def full(descriptor):  # the state file's temp copy (.CELL.json.PID.tmp) cannot reach the disk
        if Path(os.readlink(f"/proc/self/fd/{descriptor}")).name.startswith(f".{CELL}.json."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full)
    capsys.readouterr()
    code = cli.main(["sweep", "run", str(path)])
    captured = capsys.readouterr()
    _expect_disk_full(subprocess.CompletedProcess([], code, captured.out, captured.err), state)


def test_sweep_out_on_a_full_file_system(tmp_path, tmpfs):
    full_tmpfs = tmpfs(1024**2)
    out = full_tmpfs / "out"
    state = _earlier_state(out)
    path = _sweep_file(tmp_path, out)
    fill_leaving(full_tmpfs, 0)
    _expect_disk_full(run_cli("sweep", "run", path, cwd=tmp_path, timeout=300), state)


def test_a_plan_write_hitting_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    """The Slurm executor's plan (and weights_ids.json) go through the same writer as the cell states: a full disk
    there was an internal error (OSError) before."""
    from test_sweep_arrays import _slurm_stand_in
    from test_sweep_arrays import _sweep_file as _slurm_sweep_file

    for name, value in _slurm_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    path = _slurm_sweep_file(tmp_path, [{"name": "vit", "model": "test_vit", "random_init": True}], ["demo"])
    monkeypatch.chdir(tmp_path)
    real_fsync = os.fsync

    def full(descriptor):
        if Path(os.readlink(f"/proc/self/fd/{descriptor}")).name.startswith(".plan-"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full)
    capsys.readouterr()
    code = cli.main(["sweep", "run", str(path), "--executor", "slurm", "--dry-run"])
    captured = capsys.readouterr()
    assert_one_line_error(subprocess.CompletedProcess([], code, captured.out, captured.err), "cannot write ",
                          "plan-dry-run.json: no space left on the device; free space there or set out: in the sweep "
                          "file to a folder on a disk with room")
    assert code == 2 and not _debris(tmp_path / "out")
