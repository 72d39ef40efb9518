"""Device choice and the per-device settings that follow from it (autocast, pinned memory)."""

import torch

from evalsuite.errors import EvalsuiteError


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` takes the local CUDA device when one is visible, else the CPU."""
    if name == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise EvalsuiteError(f"unknown device '{name}'; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise EvalsuiteError(f"device '{name}' requested but CUDA is not available; use --device cpu")
    return device


def autocast_context(device: torch.device, enabled: bool = True):
    """bf16 autocast on CPU and CUDA alike: no GradScaler is needed for inference in bf16."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def loader_kwargs(device: torch.device, num_workers: int, reused: bool = False) -> dict:
    """DataLoader settings: pinned host memory only helps host-to-GPU copies."""
    kwargs = {"num_workers": num_workers, "pin_memory": device.type == "cuda"}
    if num_workers > 0:
        kwargs["persistent_workers"] = reused
    return kwargs
