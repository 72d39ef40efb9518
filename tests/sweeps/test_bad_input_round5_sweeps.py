"""Sweep inputs and cell records that misled or crashed `sweep run` and `sweep status` (issue 48).

Records are written as `sweep run` writes them, into a sweep of one or two cells (test_vit, random init, x a small
copy of the demo card): a cell submitted to Slurm whose jobs this host cannot query (no squeue/sacct on PATH), a
running record that names no host, a record that is no JSON object, a live cell of another host. The sweep file's
`slurm:` values are checked before anything runs.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import assert_one_line_error

from evalsuite import cli
from evalsuite.errors import EXIT_SWEEP_INCOMPLETE, EXIT_SWEEP_WAITING, EXIT_USER
from evalsuite.sweeps.cells import cell_id
from evalsuite.tasks.resources import cards_dir

SWEEP_NAME = "round5"
OTHER_HOST = "login-7"
HOLD_LOCK = ("import fcntl, sys, time\n"
             "handle = open(sys.argv[1], 'a')\n"
             "fcntl.flock(handle.fileno(), fcntl.LOCK_EX)\n"
             "print('held', flush=True)\n"
             "time.sleep(300)\n")


def _sweep_file(folder: Path, labels: list, data_root: str | None = None, **changes) -> Path:
    """One cell per label: test_vit x demo_small, kNN, seed 0. `data_root` "nowhere" makes a cell fail at once."""
    card = yaml.safe_load((cards_dir() / "demo.yaml").read_text())
    card["name"] = "demo_small"
    card["reader"]["args"]["tile_size_px"] = 150
    (folder / "demo_small.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    task = {"task": "demo_small.yaml", "probes": ["knn"], **({"data_root": data_root} if data_root else {})}
    raw = {"name": SWEEP_NAME, "models": [{"model": "test_vit", "random_init": True, "name": label} for label in labels],
           "tasks": [task], "seeds": [0], "device": "cpu", "num_workers": 0, "out": "results", **changes}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _record_path(folder: Path, label: str) -> Path:
    return folder / "results" / "sweeps" / SWEEP_NAME / "cells" / f"{cell_id(label, 'demo_small')}.json"


def _record(folder: Path, label: str, record) -> Path:
    path = _record_path(folder, label)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def _submitted(folder: Path, label: str, host: str) -> Path:
    """The record `sweep run --executor slurm` leaves on `host` after submitting the cell as job 4242_0."""
    return _record(folder, label, {"cell": cell_id(label, "demo_small"), "model": label, "task": "demo_small",
                                   "state": "submitted", "updated_utc": "2026-11-27T09:00:00Z", "host": host,
                                   "jobs": ["4242_0"], "job": None, "error": None})


def _without_slurm(folder: Path) -> dict:
    """A PATH with no squeue, sacct or sbatch: a host outside the cluster that sees the out folder."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    return {"PATH": str(bin_dir)}


@pytest.fixture
def sweep_cli(capsys, monkeypatch):
    """`evalsuite sweep ARGS FILE` through the CLI's main() in this process, in the sweep file's folder and with `env`
    set for the call: torch is imported once for the file, not once per call (CI time)."""
    def call(path: Path, *args, env=None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as patched:
            patched.chdir(path.parent)
            for name, value in (env or {}).items():
                patched.setenv(name, value)
            capsys.readouterr()
            code = cli.main(["sweep", *map(str, args), str(path)])
            captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)
    return call


# ---- 1. Slurm jobs that this host cannot query

@pytest.mark.parametrize("host", ["this", OTHER_HOST], ids=["submitted-here", "submitted-elsewhere"])
def test_jobs_that_cannot_be_queried_say_so_and_reclaim_of_their_host_frees_the_cell(sweep_cli, tmp_path, host):
    """Before: the cell stayed `pending` with no word why, `sweep run` exited 5 for ever, and `--reclaim` of this
    host (where it was submitted) did not free it."""
    host = socket.gethostname() if host == "this" else host
    path = _sweep_file(tmp_path, ["vit"], data_root="nowhere")
    _submitted(tmp_path, "vit", host)
    env = _without_slurm(tmp_path)
    why = "its Slurm job 4242_0 cannot be queried: no squeue/sacct on this host"
    reclaim = f"`evalsuite sweep run {path} --reclaim {host}` takes the cell over"

    status = sweep_cli(path, "status", env=env)
    assert status.returncode == 0, status.stderr
    assert f"pending vit x demo_small: {why}; if it is gone, {reclaim}" in status.stdout
    cell = json.loads(sweep_cli(path, "status", "--json", env=env).stdout)[0]
    assert (cell["state"], cell["active"], cell["host"], cell["unchecked"]) == ("pending", True, host, why)

    waiting = sweep_cli(path, "run", env=env)
    assert waiting.returncode == EXIT_SWEEP_WAITING, waiting.stderr
    assert_one_line_error(waiting, "1 of 1 cells are not done", "1 of them this host cannot check")
    assert why in waiting.stdout and reclaim in waiting.stdout

    # Given up: the cell runs here (and fails at once on its missing data: it was run, not left pending).
    freed = sweep_cli(path, "run", "--reclaim", host, env=env)
    assert freed.returncode == EXIT_SWEEP_INCOMPLETE, freed.stdout + freed.stderr
    assert "vit x demo_small: failed in" in freed.stdout
    assert "missing data file" in json.loads(_record_path(tmp_path, "vit").read_text())["error"]


# ---- 2. A running record that names no host

def test_a_record_without_host_or_pid_never_advises_reclaim_of_a_glob(sweep_cli, tmp_path):
    """Before: `sweep status` advised `--reclaim ?`, a shell glob that matches any one-letter file name."""
    path = _sweep_file(tmp_path, ["vit"])
    record = _record(tmp_path, "vit", {"cell": cell_id("vit", "demo_small"), "model": "vit", "task": "demo_small",
                                       "state": "running", "jobs": []})
    status = sweep_cli(path, "status")
    assert status.returncode == 0, status.stderr
    assert "--reclaim ?" not in status.stdout and "'?'" not in status.stdout
    assert ("running vit x demo_small: its record names no host (nor a Slurm job), so no host can check its "
            f"process; if nothing runs it, remove {record} and `evalsuite sweep run` runs the cell again"
            ) in status.stdout
    cell = json.loads(sweep_cli(path, "status", "--json").stdout)[0]
    assert "host" not in cell and cell["state"] == "running", cell

    waiting = sweep_cli(path, "run")
    assert waiting.returncode == EXIT_SWEEP_WAITING, waiting.stderr
    assert_one_line_error(waiting, "1 of them this host cannot check")
    assert "--reclaim ?" not in waiting.stdout + waiting.stderr and str(record) in waiting.stdout


# ---- 3. A record that is no JSON object

@pytest.mark.parametrize("record, problem", [
    ([], "holds a JSON list instead of an object"),
    ("running", "holds a JSON string instead of an object"),
    (None, "holds a JSON null instead of an object"),
    ({"state": "submitted", "jobs": "4242_0"}, 'its jobs is "4242_0", not a list of job ids'),
    ({"state": "running", "host": ["a", "b"]}, 'its host is ["a", "b"], a JSON list'),
], ids=["list", "string", "null", "jobs-string", "host-list"])
def test_a_cell_record_that_is_no_record_is_one_line_naming_it(sweep_cli, tmp_path, record, problem):
    """Before: an internal error (`'list' object has no attribute 'get'`) that named no file."""
    path = _sweep_file(tmp_path, ["vit"])
    file = _record(tmp_path, "vit", record)
    _refused_naming_the_record(sweep_cli(path, "status"), file, problem)


@pytest.mark.parametrize("args", [("run",), ("run", "--dry-run")], ids=["run", "dry-run"])
def test_run_refuses_a_record_that_is_no_record_before_any_cell_runs(sweep_cli, tmp_path, args):
    path = _sweep_file(tmp_path, ["vit", "other"])
    file = _record(tmp_path, "other", [])
    result = sweep_cli(path, *args)
    _refused_naming_the_record(result, file, "holds a JSON list instead of an object")
    assert "vit x demo_small" not in result.stdout
    assert not (tmp_path / "results" / "leaderboard.csv").exists()


def _refused_naming_the_record(result, file: Path, problem: str) -> None:
    assert_one_line_error(result, f"sweep cell record {file}: {problem}", "remove the file to rerun the cell")
    assert result.returncode == EXIT_USER, result.stderr


# ---- 4. The dry run says what the run does

def test_dry_run_leaves_to_their_holders_the_cells_the_run_leaves(sweep_cli, tmp_path):
    """Before: the dry run said `seeds 0 with knn` for a live cell of another host and for one a local `sweep run`
    holds, which the real run leaves alone."""
    path = _sweep_file(tmp_path, ["elsewhere", "locked"])
    _record(tmp_path, "elsewhere", {"cell": cell_id("elsewhere", "demo_small"), "model": "elsewhere",
                                    "task": "demo_small", "state": "running", "host": OTHER_HOST, "pid": 1,
                                    "jobs": []})
    lock = _record_path(tmp_path, "locked").with_suffix(".lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        dry = sweep_cli(path, "run", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            (f"elsewhere x demo_small: left to its holder, running elsewhere (held by a process on {OTHER_HOST}, "
             "which this host cannot check; `sweep status` says how to take it over)"),
            "locked x demo_small: left to its holder, running elsewhere (a live `sweep run` on this host)"]
        real = sweep_cli(path, "run")
        assert real.returncode == EXIT_SWEEP_WAITING, real.stderr
        assert "0 to run" in real.stdout and " x demo_small: run " not in real.stdout

        reclaimed = sweep_cli(path, "run", "--dry-run", "--reclaim", OTHER_HOST)
        assert reclaimed.returncode == 0, reclaimed.stderr
        assert "elsewhere x demo_small: seeds 0 with knn" in reclaimed.stdout
        assert "locked x demo_small: left to its holder" in reclaimed.stdout
    finally:
        holder.kill()
        holder.wait()


# ---- 5. slurm: values refused at the file check

@pytest.mark.parametrize("slurm, fragments", [
    ({"extra": ["--qos=normal\n--time=01:00:00"]},
     ["slurm.extra '--qos=normal\\n--time=01:00:00' holds a line break", "as its own list entry"]),
    ({"extra": "--qos=normal\n--time=01:00:00\n"},
     ["slurm.extra '--qos=normal\\n--time=01:00:00' holds a line break"]),
    ({"max_mem_gb": 0}, ["slurm.max_mem_gb must be a number of GB above 0", "got 0"]),
    ({"max_mem_gb": float("inf")}, ["slurm.max_mem_gb must be a number of GB above 0", "got inf"]),
    ({"mem_margin_gb": None}, ["slurm.mem_margin_gb must be a number of GB at least 0", "got None"]),
], ids=["extra-list-entry", "extra-block", "max-mem-0", "max-mem-inf", "margin-null"])
def test_a_slurm_value_that_would_be_misread_is_refused_naming_the_file(sweep_cli, tmp_path, slurm, fragments):
    """Before: an `extra` entry with a line break became two #SBATCH lines, `max_mem_gb: 0` was taken as no limit,
    `.inf` overflowed at submission and a null margin was an internal error there. The file check is the same for
    every command (`sweep run --executor slurm --dry-run` would first plan every cell, loading its model)."""
    path = _sweep_file(tmp_path, ["vit"], slurm=slurm)
    result = sweep_cli(path, "run", "--dry-run")
    assert_one_line_error(result, f"sweep file {path}: ", *fragments)
    assert result.returncode == EXIT_USER, result.stderr
    assert not (tmp_path / "results").exists()


def test_the_entries_sbatch_reads_as_one_line_each_and_a_positive_max_mem_are_kept(tmp_path):
    """Each list entry is one #SBATCH line, as written; before, one entry with a line break became two lines. A YAML
    block's closing line break is no second line, and 0.5 GB is a limit."""
    from evalsuite.sweeps.scripts import array_script
    from evalsuite.sweeps.spec import load_sweep

    path = _sweep_file(tmp_path, ["vit"], slurm={"extra": ["qos=normal\n", " --constraint=a100"], "max_mem_gb": 0.5,
                                                  "mem_margin_gb": 0})
    sweep = load_sweep(path)
    assert (sweep.slurm.extra, sweep.slurm.max_mem_gb) == (["qos=normal", "--constraint=a100"], 0.5)
    assert "#SBATCH --qos=normal\n#SBATCH --constraint=a100\n" in array_script(sweep, tmp_path, tmp_path / "p.json")
