"""Compute precision of the frozen backbone: the `--precision` policy and the autocast it means.

`auto`: bf16 autocast where the hardware computes in bf16 (CUDA devices that support it; CPUs
with native bf16, i.e. AVX512-BF16 or AMX), fp16 autocast on older GPUs, float32 everywhere
else. On a CPU without native bf16 (e.g. AVX2-only) torch emulates bf16 and a forward pass is
5-10x slower than float32 (benchmarks/precision_neutrality.py prints the ratio), so `auto`
never picks it there. A registry entry may pin the precision its published numbers need; `auto`
then takes the pin. `device`: what `auto` picks for the device, whatever a registry pin says, so
every model on one kind of node computes in one precision (a sweep's default: like with like).
An explicit `--precision` is obeyed as asked. Features are cached as float16 whatever the compute
precision.

torch is imported inside the functions: the command line reads PRECISIONS before it loads torch.
"""

import contextlib
from dataclasses import dataclass

from evalsuite.errors import EvalsuiteError

PRECISIONS = ("auto", "device", "bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Capabilities:
    """What the hardware computes natively; injected in tests, read from torch otherwise."""

    cuda_bf16: bool
    cpu_bf16: bool

    @classmethod
    def of(cls, device) -> "Capabilities":
        import torch

        cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
        return cls(cuda_bf16=cuda_bf16, cpu_bf16=device.type == "cpu" and cpu_has_native_bf16())


def cpu_has_native_bf16() -> bool:
    """True on CPUs with bf16 instructions (AVX512-BF16, AMX): oneDNN asks the same for its kernels."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch build without oneDNN has no fast bf16 path either
        return False


def resolve_precision(requested: str, device, pinned: str | None = None,
                      capabilities: Capabilities | None = None) -> str:
    """The precision a run computes in: `requested` unless it is `auto` (see the module docstring)."""
    if requested not in PRECISIONS:
        raise EvalsuiteError(f"unknown precision '{requested}'; use {', '.join(PRECISIONS)}")
    if requested not in ("auto", "device"):
        return requested
    if pinned and requested == "auto":
        return pinned
    capabilities = capabilities or Capabilities.of(device)
    if device.type == "cuda":
        return "bf16" if capabilities.cuda_bf16 else "fp16"
    if device.type == "cpu" and capabilities.cpu_bf16:
        return "bf16"
    return "fp32"


def autocast_context(device, precision: str = "fp32"):
    """Autocast to the precision's dtype on the device; fp32 runs without autocast.

    Inference only, so fp16 needs no GradScaler; an overflow shows up as inf features, which
    extraction refuses to cache."""
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return torch.autocast(device_type=device.type, dtype=dtype)
