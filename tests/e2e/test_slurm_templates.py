"""The sbatch templates as files: valid bash, one shared common part, the directives issue #7 asks for.

Runs anywhere (no Slurm needed); tests/e2e/test_slurm.py submits them to a real Slurm.
"""

import re
import subprocess

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
