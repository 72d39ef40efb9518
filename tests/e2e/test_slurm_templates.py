"""The sbatch templates as files: valid bash, one shared common part, the directives issue #7 asks for.

Runs anywhere (no Slurm needed); tests/e2e/test_slurm.py submits them to a real Slurm.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

TEMPLATES = {path.name: path.read_text() for path in sorted((REPO / "sbatch").glob("*.sbatch"))}


def _directives(text: str) -> list[str]:
    return [line.split(None, 1)[1].strip() for line in text.splitlines() if line.startswith("#SBATCH ")]


def test_the_three_templates_exist():
    assert set(TEMPLATES) == {"train_1gpu.sbatch", "train_multigpu.sbatch", "train_multinode.sbatch"}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_is_valid_bash(name):
    result = subprocess.run(["bash", "-n", str(REPO / "sbatch" / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_template_sources_the_one_common_part():
    common = (REPO / "sbatch" / "_common.sh").read_text()
    functions = re.findall(r"^(\w+)\(\) \{", common, re.M)
    assert {"activate_env", "budget_gate", "launch", "finish"} <= set(functions)
    for name, text in TEMPLATES.items():
        assert 'source "$COMMON_DIR/_common.sh"' in text, name
        assert not [f for f in functions if re.search(rf"^{f}\(\) \{{", text, re.M)], f"{name} redefines a common function"


def test_common_part_is_found_from_the_submitted_path_when_slurm_runs_a_spool_copy(tmp_path):
    """Slurm runs a copy of the template from its spool folder, where sbatch/_common.sh is not beside it: the
    template finds it through scontrol's Command= (a stub scontrol here), before anything else runs."""
    spool = tmp_path / "spool"
    spool.mkdir()
    copy = spool / "slurm_script"
    copy.write_text(TEMPLATES["train_1gpu.sbatch"])
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "scontrol").write_text(f"#!/bin/sh\necho '   Command={REPO / 'sbatch' / 'train_1gpu.sbatch'}'\n")
    (stub / "scontrol").chmod(0o755)
    env = {"PATH": f"{stub}:/usr/bin:/bin", "SLURM_JOB_ID": "1", "SLURM_SUBMIT_DIR": str(tmp_path),
           "EVALSUITE_VENV": str(tmp_path / "no-venv")}
    result = subprocess.run(["bash", str(copy)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert "_common.sh not found" not in result.stdout
    assert "EVALSUITE_VENV=" in result.stdout and "has no bin/activate" in result.stdout  # _common.sh ran
    stub.joinpath("scontrol").write_text("#!/bin/sh\nexit 1\n")
    result = subprocess.run(["bash", str(copy)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "sbatch/_common.sh not found; set EVALSUITE_HOME" in result.stdout


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_requeues_on_usr1_and_logs_to_slurm_jobid_out(name):
    directives = _directives(TEMPLATES[name])
    assert any(re.fullmatch(r"--signal=B:USR1@\d+", d) for d in directives), directives
    assert "--requeue" in directives and "--open-mode=append" in directives
    assert "--output=slurm-%j.out" in directives


def test_1gpu_template_asks_for_one_gpu_and_85g():
    directives = _directives(TEMPLATES["train_1gpu.sbatch"])
    assert "--gres=gpu:1" in directives and "--mem=85G" in directives
    assert any(d.startswith("--cpus-per-task=") for d in directives)
    assert any(d.startswith("--time=") for d in directives)


def test_torchrun_templates_launch_as_issue_7_says():
    multigpu, multinode = TEMPLATES["train_multigpu.sbatch"], TEMPLATES["train_multinode.sbatch"]
    assert 'torchrun --standalone --nproc_per_node="$NPROC" -m evalsuite run' in multigpu
    assert "NPROC=${NPROC_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}" in multigpu
    assert "--exclusive" in _directives(multigpu) and "--nodes=1" in _directives(multigpu)
    assert "launch srun " in multinode and "--rdzv_backend=c10d" in multinode
    assert 'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)' in multinode
    assert '--rdzv_endpoint="$HEAD_NODE:$MASTER_PORT"' in multinode


def _run_template_without_slurm(tmp_path, **settings) -> subprocess.CompletedProcess:
    """train_1gpu.sbatch run by bash as a batch job would (no scontrol: _common.sh found beside it), with this
    test's python on PATH."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "EVALSUITE_VENV": "", "HF_HUB_OFFLINE": "1",
           "HOME": str(tmp_path), "EVALSUITE_DATA_HOME": os.environ.get("EVALSUITE_DATA_HOME", ""), **settings}
    return subprocess.run(["bash", str(REPO / "sbatch" / "train_1gpu.sbatch")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_export_value_cut_at_a_comma_stops_before_the_gate(tmp_path):
    """Issue 25 item 1: what `sbatch --export=ALL,EXTRA_ARGS=--data-root /d,x --batch-size 8` leaves the job: EXTRA_ARGS
    cut at the comma, the whole option in SLURM_EXPORT_ENV. The job stops with exit 2 naming the lost pieces."""
    result = _run_template_without_slurm(
        tmp_path, SLURM_EXPORT_ENV="ALL,TASK=demo,EXTRA_ARGS=--data-root /d,x --batch-size 8,MODEL=test_vit",
        EXTRA_ARGS="--data-root /d", MODEL="test_vit")
    assert result.returncode == 2, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("summary: FAILED task=demo model=test_vit exit=2: sbatch --export split EXTRA_ARGS "
                           "(lost: 'x --batch-size 8') at commas"), last
    assert "RAM budget gate" not in result.stdout


def test_argument_files_reach_budget_and_run_with_their_commas_and_spaces(tmp_path):
    """EXTRA_ARGS_FILE: one flag and its value per line, comments and blank lines skipped, a value with spaces kept
    whole. The gate sees exactly those arguments; --mem 1M (after the allocation's) makes it refuse at once."""
    out = tmp_path / "my out"
    (tmp_path / "extra.args").write_text(f"# budget and run\n--device cpu\n\n--random-init\n--out {out}\n--mem 1M\n")
    result = _run_template_without_slurm(tmp_path, MODEL="test_vit", EXTRA_ARGS="--batch-size 8",
                                         EXTRA_ARGS_FILE="extra.args", RUN_ARGS_FILE="missing.args")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "summary: FAILED task=demo model=test_vit exit=2: RUN_ARGS_FILE=missing.args: no such file" in result.stdout
    (tmp_path / "run.args").write_text("--probes linear,knn\n")
    result = _run_template_without_slurm(tmp_path, MODEL="test_vit", EXTRA_ARGS="--batch-size 8",
                                         EXTRA_ARGS_FILE="extra.args", RUN_ARGS_FILE="run.args")
    assert (f"arguments for budget and run: '--batch-size' '8' '--device' 'cpu' '--random-init' '--out' '{out}' "
            "'--mem' '1M'; for run only: '--probes' 'linear,knn'") in result.stdout, result.stdout
    assert result.returncode == 3, result.stdout + result.stderr  # evalsuite.errors.EXIT_REFUSE: 1 MiB fits nothing
    assert result.stdout.strip().splitlines()[-1].startswith("summary: REFUSED task=demo model=test_vit")


@pytest.mark.parametrize("variable", ["SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"])
def test_slurm_zero_memory_is_the_whole_node_not_a_zero_byte_gate(tmp_path, variable):
    """Review of issue 24 item 8: the template passed Slurm's 0 ("all the node's memory") on as `--mem 0M`, so every
    such job was refused. The gate now gets no --mem from it (--mem 1M from the file only makes it refuse at once)."""
    (tmp_path / "extra.args").write_text("--device cpu\n--random-init\n--mem 1M\n")
    result = _run_template_without_slurm(tmp_path, MODEL="test_vit", EXTRA_ARGS_FILE="extra.args", **{variable: "0"})
    gate = next(line for line in result.stdout.splitlines() if "RAM budget gate: python -m evalsuite budget" in line)
    assert "--mem 0M" not in gate and gate.endswith("--mem 1M"), gate
    assert result.returncode == 3, result.stdout + result.stderr


def test_a_failed_gate_says_its_reason_once(tmp_path):
    """Issue 41 item 7: a job given a GPU that torch cannot see printed the reason three times (the budget command's
    own line, the script's error line, the summary). Now the summary line alone says it."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: CUDA_VISIBLE_DEVICES=0 is not a GPU it cannot use")
    result = _run_template_without_slurm(tmp_path, MODEL="test_vit", EXTRA_ARGS="--random-init",
                                         CUDA_VISIBLE_DEVICES="0")
    assert result.returncode == 2, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if "says a GPU was allocated" in line]
    assert len(said) == 1 and said[0].startswith("summary: FAILED task=demo model=test_vit exit=2: the budget "
                                                 "command failed (exit 2): CUDA_VISIBLE_DEVICES=0 says"), said
    assert said[0] == result.stdout.strip().splitlines()[-1]
