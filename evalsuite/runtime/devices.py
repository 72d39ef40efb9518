"""Device choice and the per-device settings that follow from it (pinned memory; compute precision is evalsuite.runtime.precision)."""

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


def loader_kwargs(device: torch.device, num_workers: int, reused: bool = False) -> dict:
    """DataLoader settings: pinned host memory only helps host-to-GPU copies."""
    kwargs = {"num_workers": num_workers, "pin_memory": device.type == "cuda"}
    if num_workers > 0:
        kwargs["persistent_workers"] = reused
    return kwargs
