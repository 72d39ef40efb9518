"""The sbatch templates as files: valid bash, one shared common part, the directives issue #7 asks for.

Runs anywhere (no Slurm needed); tests/test_slurm.py submits them to a real Slurm.
"""

import re
import subprocess

import pytest

from conftest import REPO

TEMPLATES = {path.name: path.read_text() for path in sorted((REPO / "sbatch").glob("*.sbatch"))}
COMMON = re.compile(r"# ---- common part.*?# ---- end of the common part ----\n", re.S)


def _directives(text: str) -> list[str]:
    return [line.split(None, 1)[1].strip() for line in text.splitlines() if line.startswith("#SBATCH ")]


def test_the_three_templates_exist():
    assert set(TEMPLATES) == {"train_1gpu.sbatch", "train_multigpu.sbatch", "train_multinode.sbatch"}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_is_valid_bash(name):
    result = subprocess.run(["bash", "-n", str(REPO / "sbatch" / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_common_part_is_identical_in_every_template():
    parts = {name: COMMON.findall(text) for name, text in TEMPLATES.items()}
    assert all(len(found) == 1 for found in parts.values()), {name: len(found) for name, found in parts.items()}
    assert len({found[0] for found in parts.values()}) == 1, "edit the common part in all three templates alike"


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
