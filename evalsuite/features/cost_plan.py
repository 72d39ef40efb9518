"""What a run costs on a GPU before it runs: GPU memory and device-hours on a named reference GPU.

Both come from the backbone's architecture alone (a meta module will do: models/meta_build.py) and the images a run
extracts, against the figures measured on one H100 (docs/compute.md, "gpu_check on one H100": bf16 autocast, batch
64, 224 px, 12 DataLoader workers):

| model | GFLOP/image | forward img/s | effective TFLOP/s | extraction / forward | peak GPU GiB (weights) |
|---|---|---|---|---|---|
| ViT-L/14 | 162.0 | 2,135 | 345.9 | 0.904-0.920 | 1.80 (1.13) |
| ViT-H/14 | 334.6 | 1,146 | 383.4 | 0.929-0.933 | 3.22 (2.35) |
| ViT-g/14 | 534.1 | 756 | 403.7 | 0.896-0.924 | 4.76 (3.77) |

Rules (docs/compute.md "Cost before running" states them to users):

- device-hours = images still to extract / extraction img/s / 3600. The forward's rate is the model's GFLOP per image
  (models/flops.py) at the effective TFLOP/s of the table, interpolated in log GFLOP between its rows and held at the
  end rows outside them; extraction = 0.90 x forward (the lowest measured ratio, rounded), and never above 1,965
  img/s, the fastest extraction measured (smaller backbones are feed-bound there: the readers' workers decide). In
  fp32 (a model the registry pins to it, or --precision fp32) the rate is bf16's x 67/989, the H100 SXM's fp32 and
  dense bf16 peaks (NVIDIA's datasheet; not measured). Probes, which train on the cached features, are not counted.
- GPU memory = weights x (1 + 0.6 x batch / 64 x pixels / 224^2, doubled in fp32): the weights as stored (float32
  under autocast: params x 4 bytes) and activations at 0.6 x the weights at batch 64 and 224 px, the largest ratio
  measured (peak 1.26-1.59x the weights), scaled with the batch and the image's pixels. The CUDA context comes on top.
"""

import itertools
import math

import torch

from evalsuite.features.budget import human_bytes, model_bytes
from evalsuite.models.flops import forward_cost
from evalsuite.runtime.precision import Capabilities, resolve_precision

REFERENCE_GPU = "NVIDIA H100 80GB HBM3"
REFERENCE_SOURCE = 'docs/compute.md "gpu_check on one H100" (2026-11-27: bf16 autocast, batch 64, 224 px)'
# (model, GFLOP per image at 224 px as models/flops.py counts it, forward img/s measured) on the reference GPU.
MEASURED_FORWARD = (("ViT-L/14", 162.024, 2135.0), ("ViT-H/14", 334.588, 1146.0), ("ViT-g/14", 534.06, 756.0))
EXTRACTION_PER_FORWARD = 0.90
FASTEST_EXTRACTION_IMG_S = 1965.0  # ViT-L/14 on slide tiles, 12 workers
FP32_PER_BF16 = 67.0 / 989.0  # H100 SXM datasheet: fp32 67 TFLOP/s, dense bf16 989 TFLOP/s
ACTIVATIONS_PER_WEIGHTS = 0.6  # (peak - weights) / weights, the largest measured: ViT-L/14 (1.80 - 1.13) / 1.13
MEASURED_BATCH, MEASURED_PIXELS = 64, 224 * 224
SECONDS_PER_HOUR = 3600.0


def reference_precision(requested: str, pinned: str | None) -> str:
    """The precision a run would use on the reference GPU (which computes bf16 natively)."""
    return resolve_precision(requested, torch.device("cuda"), pinned, Capabilities(cuda_bf16=True, cpu_bf16=False))


def effective_tflops(gflops: float) -> float:
    """The reference GPU's effective TFLOP/s for a forward of `gflops` per image (module docstring)."""
    points = [(math.log(g), g * rate / 1e3) for _, g, rate in MEASURED_FORWARD]
    x = math.log(max(gflops, 1e-9))
    if x <= points[0][0]:
        return points[0][1]
    for (x0, t0), (x1, t1) in itertools.pairwise(points):
        if x <= x1:
            return t0 + (t1 - t0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def extraction_img_s(gflops: float, precision: str) -> float:
    forward = effective_tflops(gflops) * 1e3 / max(gflops, 1e-9)
    if precision == "fp32":
        forward *= FP32_PER_BF16
    return min(forward * EXTRACTION_PER_FORWARD, FASTEST_EXTRACTION_IMG_S)


def gpu_memory_bytes(weights_bytes: int, batch_size: int, input_size_px, precision: str) -> int:
    height, width = input_size_px
    scale = batch_size / MEASURED_BATCH * height * width / MEASURED_PIXELS * (2 if precision == "fp32" else 1)
    return math.ceil(weights_bytes * (1 + ACTIVATIONS_PER_WEIGHTS * scale))


def backbone_cost(backbone) -> dict:
    """What the architecture costs whatever the task: parameters, weight bytes, GFLOP per image (one forward count)."""
    cost = forward_cost(backbone)
    return {**cost, "weights_bytes": model_bytes(backbone.model)}


def run_cost(backbone_figures: dict, images: int, precision: str, batch_size: int) -> dict:
    """The cost block of one run (one cell): GPU memory and device-hours on the reference GPU."""
    rate = extraction_img_s(backbone_figures["gflops_per_image"], precision)
    return {"reference_gpu": REFERENCE_GPU, "params": backbone_figures["params"],
            "weights_bytes": backbone_figures["weights_bytes"],
            "gflops_per_image": backbone_figures["gflops_per_image"],
            "input_size_px": backbone_figures["input_size_px"], "precision": precision, "batch_size": batch_size,
            "gpu_memory_bytes": gpu_memory_bytes(backbone_figures["weights_bytes"], batch_size,
                                                 backbone_figures["input_size_px"], precision),
            "images": int(images), "extraction_img_s": round(rate, 1),
            "device_hours": round(images / rate / SECONDS_PER_HOUR, 4)}


def images_to_extract(plan) -> int:
    """Samples of the splits with a cache of their own (an alias shares another's) not cached yet."""
    return sum(s.samples for s in plan.splits if s.cache_bytes > 0 and not s.cached)


def assumptions(precisions: set, batch_sizes: set) -> dict:
    rates = ", ".join(f"{name} {rate:,.0f} img/s ({g * rate / 1e3:.0f} TFLOP/s)" for name, g, rate in MEASURED_FORWARD)
    return {
        "reference_gpu": f"{REFERENCE_GPU}, one GPU; figures from {REFERENCE_SOURCE}",
        "rates": (f"forward at the measured effective TFLOP/s ({rates}), interpolated in log GFLOP per image and held "
                  f"at the end rows; extraction = {EXTRACTION_PER_FORWARD:.2f} x forward, at most "
                  f"{FASTEST_EXTRACTION_IMG_S:,.0f} img/s (the fastest extraction measured); fp32 at bf16's rate x "
                  f"67/989 (datasheet peaks, not measured)"),
        "precision": (", ".join(sorted(precisions)) + " (the run's --precision on a bf16 GPU; autocast keeps the "
                      "weights float32)"),
        "batch_size": ", ".join(str(b) for b in sorted(batch_sizes)) + " (--batch-size, else a GPU run's 64)",
        "gpu_memory": (f"weights x (1 + {ACTIVATIONS_PER_WEIGHTS} x batch/64 x pixels/224^2, x2 in fp32): peak GPU "
                       "memory measured 1.26-1.59x the weights at batch 64, 224 px; the CUDA context comes on top"),
        "not_counted": "the probes (they train on the cached features: docs/compute.md 'Every stage at scale'), "
                       "data downloads, queueing",
    }


def format_cost(cost: dict) -> list:
    if "error" in cost:
        return [f"cost on the reference GPU ({REFERENCE_GPU}): {cost['error']}"]
    h, w = cost["input_size_px"]
    return [f"cost on the reference GPU ({cost['reference_gpu']}):",
            (f"  backbone: {cost['params'] / 1e6:,.1f}M parameters, {human_bytes(cost['weights_bytes'])} of weights, "
            f"{cost['gflops_per_image']:,.1f} GFLOP per image at {h}x{w} px"),
            (f"  GPU memory: {human_bytes(cost['gpu_memory_bytes'])} ({cost['precision']}, batch "
            f"{cost['batch_size']})"),
            (f"  device-hours: {cost['device_hours']:.3f} ({cost['images']:,} images to extract at "
            f"{cost['extraction_img_s']:,.0f} img/s)")]


_LABELS = {"reference_gpu": "reference GPU", "rates": "rates used", "gpu_memory": "GPU memory"}


def format_assumptions(block: dict) -> list:
    return ["assumptions:"] + [f"  {_LABELS.get(key, key.replace('_', ' '))}: {value}" for key, value in block.items()]
