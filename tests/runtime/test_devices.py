"""Device logic, checked for CPU and CUDA with torch.device parameters (no GPU needed)."""

import pytest
import torch
from conftest import assert_one_line_error, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.devices import loader_kwargs, resolve_device


@pytest.mark.parametrize("device, pinned", [(torch.device("cpu"), False), (torch.device("cuda", 0), True)])
def test_pinned_memory_only_for_cuda(device, pinned):
    assert loader_kwargs(device, num_workers=2)["pin_memory"] is pinned


def test_persistent_workers_only_when_reused_and_only_with_workers():
    assert loader_kwargs(torch.device("cpu"), 2, reused=True)["persistent_workers"] is True
    assert loader_kwargs(torch.device("cpu"), 2)["persistent_workers"] is False
    assert "persistent_workers" not in loader_kwargs(torch.device("cpu"), 0, reused=True)


def test_auto_device_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_cuda_requested_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EvalsuiteError, match="CUDA is not available"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("name", ["mps", "meta", "xla", "cuda:x", "gpu"])
def test_a_device_outside_cpu_and_cuda_is_refused_as_a_sweep_refuses_it(name):
    """`--device mps` used to pass torch.device and fail later inside a forward; a sweep file already refused it."""
    with pytest.raises(EvalsuiteError, match=f"unknown device '{name}'; use auto, cpu, cuda or cuda:N"):
        resolve_device(name)


def test_run_with_an_unbuilt_device_type_exits_with_one_line_and_writes_nothing(tmp_path):
    result = run_cli("run", "--task", "demo", "--device", "mps", "--out", tmp_path / "out")
    assert_one_line_error(result, "unknown device 'mps'; use auto, cpu, cuda or cuda:N")
    assert not (tmp_path / "out" / "leaderboard.csv").exists() and not (tmp_path / "out" / "cache").exists()


@pytest.mark.parametrize("env, claim", [
    ({"CUDA_VISIBLE_DEVICES": "0"}, "CUDA_VISIBLE_DEVICES=0"),
    ({"SLURM_JOB_GPUS": "0,1"}, "SLURM_JOB_GPUS=0,1"),
    ({"SLURM_GPUS_ON_NODE": "1"}, "SLURM_GPUS_ON_NODE=1"),
    ({"SLURM_GPUS_PER_NODE": "a100:2"}, "SLURM_GPUS_PER_NODE=a100:2"),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles", "SLURM_GPUS_ON_NODE": "0"}, None),  # Slurm's "no GPU" values
    ({"CUDA_VISIBLE_DEVICES": "-1"}, None),
    ({"CUDA_VISIBLE_DEVICES": ""}, None),
])
def test_auto_device_refuses_the_cpu_when_the_environment_allocated_a_gpu(monkeypatch, env, claim):
    """Issue 25 item 2: a job given a GPU (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS, SLURM_GPUS*) whose torch sees none
    used to run on the CPU without a word; now `auto` names the variable, and no claim still means the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if claim is None:
        assert resolve_device("auto", env) == torch.device("cpu")
        return
    with pytest.raises(EvalsuiteError, match=f"^{claim} says a GPU was allocated but .*pass --device cpu"):
        resolve_device("auto", env)
    assert resolve_device("cpu", env) == torch.device("cpu")


def test_the_reason_names_a_cpu_only_torch_build(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(EvalsuiteError, match=r"is a CPU-only build \(torch.version.cuda is None\)"):
        resolve_device("auto", {"SLURM_GPUS_ON_NODE": "1"})


@pytest.mark.slow  # a whole demo run (test_vit, random init): ~40 s on 2 loaded cores
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine whose torch sees no GPU")
def test_run_on_an_injected_gpu_environment_stops_in_one_line_and_runs_with_device_cpu(tmp_path):
    """The CLI with CUDA_VISIBLE_DEVICES=0 and SLURM_GPUS_ON_NODE=1 on this GPU-less machine: exit 2, one line saying
    what torch reports, nothing written; `--device cpu` runs and the header names the device."""
    claimed = {"CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "0"}
    args = ["run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn", "--num-workers", "0",
            "--out", tmp_path / "out"]
    refused = run_cli(*args, env=claimed)
    assert refused.returncode == 2, refused.stderr
    assert_one_line_error(refused, "CUDA_VISIBLE_DEVICES=0 says a GPU was allocated but torch",
                          f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only build",
                          "pass --device cpu")
    assert not (tmp_path / "out" / "leaderboard.csv").exists()
    budget = run_cli("budget", "--task", "demo", "--model", "test_vit", "--random-init", env=claimed)
    assert budget.returncode == 2 and "says a GPU was allocated" in budget.stderr  # the Slurm gate stops too

    ran = run_cli(*args, "--device", "cpu", env=claimed)
    assert ran.returncode == 0, ran.stderr
    header = next(line for line in ran.stdout.splitlines() if line.startswith("task demo"))
    assert "  device cpu  precision " in header, header
