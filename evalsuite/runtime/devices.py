"""Device choice and the per-device settings that follow from it (pinned memory; compute precision is evalsuite.runtime.precision)."""

import os
import re

import torch

from evalsuite.errors import EvalsuiteError

# Variables naming allocated GPUs (device lists) and counting them (Slurm's SLURM_GPUS* family).
_GPU_LISTS = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS")
_GPU_COUNT_PREFIX = "SLURM_GPUS"


def _names_a_device(value: str) -> bool:
    """CUDA_VISIBLE_DEVICES=0 or GPU-<uuid> names one; '', -1 and Slurm's NoDevFiles name none."""
    return any(re.fullmatch(r"\d+|(GPU|MIG)-[\w-]+", item.strip()) for item in value.split(","))


def _counts_a_gpu(value: str) -> bool:
    """SLURM_GPUS_ON_NODE=1, SLURM_GPUS_PER_NODE=a100:2 or a list of such: any count above zero."""
    return any(int(count) > 0 for count in re.findall(r"(?:^|:|,)(\d+)(?=,|$)", value.strip()))


def allocated_gpu_claim(env=None) -> str | None:
    """'NAME=value' of the first variable saying a GPU was allocated to this process, else None."""
    env = os.environ if env is None else env
    for name in _GPU_LISTS:
        if _names_a_device(env.get(name, "")):
            return f"{name}={env[name]}"
    for name in sorted(env):
        if name.startswith(_GPU_COUNT_PREFIX) and _counts_a_gpu(env[name]):
            return f"{name}={env[name]}"
    return None


def why_no_cuda() -> str:
    """Why torch sees no GPU, in torch's words: a CPU-only build, or the CUDA runtime's own complaint."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None) and sees none; install a CUDA build of torch"
    reason = "torch.cuda.is_available() is False"
    try:  # torch.cuda.init() raises with the driver's reason (no driver, driver older than the build, ...)
        torch.cuda.init()
    except Exception as error:  # noqa: BLE001 - any failure text is the diagnosis we want to show
        reason = f"{reason}: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
    return (f"torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees none ({reason}); check nvidia-smi: "
            f"a driver older than CUDA {torch.version.cuda} needs a torch built for an older CUDA")


def resolve_device(name: str = "auto", env=None) -> torch.device:
    """`auto` takes the local CUDA device when one is visible, else the CPU, except where the environment says a
    GPU was allocated: a job that asked for a GPU must not run for hours on the CPU without a word."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        claim = allocated_gpu_claim(env)
        if claim:
            raise EvalsuiteError(f"{claim} says a GPU was allocated but {why_no_cuda()}; "
                                 "pass --device cpu to run on the CPU anyway")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    # The device types built and tested here, and the ones a sweep file takes (sweeps/spec.py): MPS, XLA, meta not.
    if device is None or device.type not in ("cpu", "cuda"):
        raise EvalsuiteError(f"unknown device '{name}'; use auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise EvalsuiteError(f"device '{name}' requested but CUDA is not available: {why_no_cuda()}; "
                             "use --device cpu")
    return device


def loader_kwargs(device: torch.device, num_workers: int, reused: bool = False) -> dict:
    """DataLoader settings: pinned host memory only helps host-to-GPU copies."""
    kwargs = {"num_workers": num_workers, "pin_memory": device.type == "cuda"}
    if num_workers > 0:
        kwargs["persistent_workers"] = reused
    return kwargs
