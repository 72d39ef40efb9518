"""How `sweep run --executor slurm` cuts a sweep into job arrays, with stand-ins for `scontrol` (answering as a
cluster with a small MaxArraySize, or a partition with a MaxMemPerNode, would) and `sbatch` (recording its calls) at
the front of PATH: arrays whose task ids stay below MaxArraySize, one array per memory class, the array script
mapping a task to its element, and a cell above the partition's memory refused before anything is submitted.
tests/e2e/test_slurm_sweep.py submits to a real Slurm."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import assert_one_line_error, run_cli

from evalsuite.errors import EXIT_USER

MODEL = {"name": "vit", "model": "test_vit", "random_init": True}

# What `scontrol show config` and `scontrol -o show partition` print (Slurm 22.05), cut to the lines read.
CONFIG = """Configuration data as of 2026-11-27T09:00:00
EnforcePartLimits       = ALL
MaxArraySize            = {max_array_size}
MaxJobCount             = 10000
SchedulerParameters     = (null)
"""
PARTITIONS = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllocNodes=ALL Default=NO QoS=N/A DefaultTime=NONE "
    "MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=localhost State=UP DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED\n"
    "PartitionName=ci AllowGroups=ALL AllowAccounts=ALL AllocNodes=ALL Default=YES QoS=N/A DefaultTime={default_time} "
    "MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=localhost State=UP DefMemPerNode=UNLIMITED "
    "MaxMemPerNode={max_mem_per_node}\n")
SCONTROL = """#!/bin/sh
here=$(dirname "$0")
case "$*" in
    "show config") cat "$here/config.txt" ;;
    "-o show partition") cat "$here/partitions.txt" ;;
    *) echo "scontrol stand-in: not answered: $*" >&2; exit 1 ;;
esac
"""
SBATCH = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/sbatch.calls"
echo 4242
"""


def _slurm_stand_in(folder: Path, max_array_size: int = 1001, max_mem_per_node="UNLIMITED",
                    default_time="NONE") -> dict:
    """The environment of a CLI call that finds the stand-ins first on PATH."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "config.txt").write_text(CONFIG.format(max_array_size=max_array_size))
    (bin_dir / "partitions.txt").write_text(PARTITIONS.format(max_mem_per_node=max_mem_per_node,
                                                              default_time=default_time))
    for name, text in (("scontrol", SCONTROL), ("sbatch", SBATCH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _sweep_file(folder: Path, models: list, tasks: list, **slurm) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "arrays", "models": models, "tasks": tasks, "seeds": [0],
                                    "probes": ["knn"], "device": "cpu", "num_workers": 0, "out": "out",
                                    "slurm": slurm}, sort_keys=False))
    return path


def _dry_run(path: Path, env: dict) -> subprocess.CompletedProcess:
    result = run_cli("sweep", "run", path, "--executor", "slurm", "--dry-run", cwd=path.parent, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _arrays(stdout: str) -> list:
    """[(task ids, --mem, the first element (the script's argument), the sbatch line)] of each array submitted."""
    found = []
    for line in stdout.splitlines():
        match = re.match(r"would run: sbatch --parsable --array=(\d+)(?:-(\d+))?\S* --mem=(\d+)M .* (\d+)$", line)
        if match:
            low, high, mem_mb, first = match.groups()
            found.append((list(range(int(low), int(high or low) + 1)), int(mem_mb), int(first), line))
    return found


def _plan(stdout: str) -> dict:
    return json.loads(Path(next(line[len("plan: "):] for line in stdout.splitlines()
                                if line.startswith("plan: "))).read_text())


@pytest.mark.slow  # plans its cells (a model build, a forward pass, the task's data): 10-60 s
def test_25_cells_under_max_array_size_10_go_in_as_3_arrays_with_task_ids_below_10(tmp_path):
    env = _slurm_stand_in(tmp_path, max_array_size=10)
    models = [{"name": f"vit{i:02d}", "model": "test_vit", "random_init": True} for i in range(25)]
    path = _sweep_file(tmp_path, models, ["demo"], time="02:00:00", warn_before_limit_s=900)
    result = _dry_run(path, env)
    assert "MaxArraySize 10, 10 tasks an array; partition ci: MaxMemPerNode unlimited" in result.stdout

    arrays = _arrays(result.stdout)
    assert len(arrays) == 3, result.stdout
    assert all(max(task_ids) < 10 for task_ids, _, _, _ in arrays), [line for *_, line in arrays]
    elements = [first + task for task_ids, _, first, _ in arrays for task in task_ids]
    assert sorted(elements) == list(range(25))  # every element exactly once
    plan = _plan(result.stdout)
    assert sorted(e["ref"]["model"] for e in plan["elements"]) == [m["name"] for m in models]
    assert "#SBATCH --signal=B:USR1@900" in result.stdout
    assert not (tmp_path / "bin" / "sbatch.calls").exists()  # a dry run submits nothing


@pytest.mark.slow
def test_the_array_script_runs_its_first_element_plus_the_task_id(tmp_path):
    """The script of a dry run, started as Slurm starts task 3 of an array given 20: it runs element 23 (the jobs'
    interpreter is a stand-in that prints what it was asked to run)."""
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "ran: $*"\n')
    python.chmod(0o755)
    path = _sweep_file(tmp_path, [MODEL], ["demo"],
                       python=str(python))
    _dry_run(path, _slurm_stand_in(tmp_path))
    script = tmp_path / "out" / "sweeps" / "arrays" / "array-dry-run.sbatch"
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}
    started = subprocess.run(["bash", str(script), "20"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    plan = tmp_path / "out" / "sweeps" / "arrays" / "plan-dry-run.json"
    assert f"ran: -m evalsuite sweep element {plan} 23" in started.stdout, started.stdout
    assert "element 23 of" in started.stdout and "job 77_3" in started.stdout


@pytest.mark.slow
def test_cells_of_two_memory_classes_go_in_as_two_arrays_at_their_class(tmp_path):
    """The margin is chosen from a first dry run so that 4096 MB (a power of two always ends a class) falls between
    the two cells' requests; with array_parallelism the second array waits for the first."""
    env = _slurm_stand_in(tmp_path)
    model = [MODEL]
    tasks = ["demo", {"task": "demo_seg", "probes": ["seg_linear"]}]
    first = _plan(_dry_run(_sweep_file(tmp_path, model, tasks, mem_margin_gb=0), env).stdout)
    request_mb = {e["ref"]["task"]: e["request_mb"] for e in first["elements"]}
    small, large = sorted(request_mb.values())
    assert small < large, request_mb  # the two tasks' caches differ, so their plans do
    margin_mb = 4096 - small  # the smaller request becomes 4096, the larger one more

    result = _dry_run(_sweep_file(tmp_path, model, tasks, mem_margin_gb=margin_mb / 1024, array_parallelism=2),
                      env)
    arrays = _arrays(result.stdout)
    large_class_mb = -(-(large + margin_mb) // 1024) * 1024  # 4097-8192 MB: classes are whole GiB
    assert [(task_ids, mem_mb) for task_ids, mem_mb, _, _ in arrays] == [([0], 4096), ([0], large_class_mb)], \
        result.stdout
    assert "--dependency=afterany:<ARRAY1>" in arrays[1][3]
    elements = _plan(result.stdout)["elements"]
    for _, mem_mb, first_index, _ in arrays:
        element = elements[first_index]
        assert element["mem_mb"] == mem_mb and element["request_mb"] <= mem_mb
        assert element["request_mb"] == request_mb[element["ref"]["task"]] + margin_mb


@pytest.mark.slow
@pytest.mark.parametrize("partition_mb, max_mem_gb, limit", [(2048, None, "partition ci's MaxMemPerNode (2048M)"),
                                                              ("UNLIMITED", 1, "slurm.max_mem_gb (1024M)")],
                         ids=["MaxMemPerNode", "max_mem_gb"])
def test_a_cell_above_the_memory_limit_is_refused_before_anything_is_submitted(tmp_path, partition_mb, max_mem_gb,
                                                                              limit):
    """The demo cell plans about 4.3 GB (the 4 GB margin): above the limit even memory-mapped. One line naming the
    cell, its plan, the limit and the fixes; exit 2; sbatch never called."""
    env = _slurm_stand_in(tmp_path, max_mem_per_node=partition_mb)
    slurm = {"max_mem_gb": max_mem_gb} if max_mem_gb else {}
    path = _sweep_file(tmp_path, [MODEL], ["demo"], **slurm)
    result = run_cli("sweep", "run", path, "--executor", "slurm", cwd=tmp_path, env=env, timeout=300)
    assert_one_line_error(result, str(path), "cell vit x demo plans --mem=", "even with memory-mapped caches",
                          limit, "nothing was submitted", "slurm.partition")
    assert result.returncode == EXIT_USER
    assert not (tmp_path / "bin" / "sbatch.calls").exists()


def test_a_warning_not_shorter_than_the_partitions_default_time_is_refused(tmp_path):
    """Without slurm.time the jobs get the partition's DefaultTime (5 min here): the default 1200 s warning would stop
    every element at once. Refused before any cell is planned."""
    env = _slurm_stand_in(tmp_path, default_time="00:05:00")
    path = _sweep_file(tmp_path, [MODEL], ["demo"])
    result = run_cli("sweep", "run", path, "--executor", "slurm", cwd=tmp_path, env=env, timeout=120)
    assert_one_line_error(result, str(path), "slurm.warn_before_limit_s (1200 s)",
                          "partition ci's time limit (300 s)", "slurm.time")
    assert not (tmp_path / "bin" / "sbatch.calls").exists()
