"""Milliseconds a tile of the backbone's forward at each extraction batch size, on this machine (the CPU default).

What is measured
----------------
The forward alone (eval mode, ``torch.inference_mode``, float32, the tensor layout extraction uses: channels-last
for a CNN) over random 224x224 inputs, at batch sizes 8, 16, 32 and 64, for two backbones: evalsuite's
``efficientnet_lite0_imagenet`` (real weights) and timm's ``vit_small_patch16_224`` (random weights: speed does not
depend on them). Each size gets one warm-up batch, then ``--tiles`` tiles (rounded up to whole batches).
``x64`` is a size's ms per tile over batch 64's: below 1, that size is faster a tile. Everything runs inside
``reuse_freed_memory()`` as extraction does (runtime/allocator.py; with glibc's default malloc the larger batches
also pay the kernel for their activations' pages every batch: benchmarks/forward_memory.py).

Why: a CPU forward at batch 64 moves a layer's activations (64 x 32 x 112 x 112 floats = 100 MB after
EfficientNet's stem) through memory, while smaller batches stay closer to the cores' caches. `evalsuite run`
extracts at batch 16 on the CPU and 64 on a GPU (config.default_batch_size); this prints what that choice is
worth here. Timings move with load: the host line is printed before and after; compare ratios of one run.

Run: ``python benchmarks/forward_batch.py [--tiles 256]`` (about a minute on 2 idle cores).
"""

import argparse
import sys
import time

from _shared import format_table, host_tag, machine_line

BATCH_SIZES = (8, 16, 32, 64)


def models():
    """(name, module, memory format) of each backbone measured."""
    import timm
    import torch

    from evalsuite.models.backbones import build_backbone

    cnn = build_backbone("efficientnet_lite0_imagenet").model.eval().to(memory_format=torch.channels_last)
    vit = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=0).eval()
    return [("efficientnet_lite0_imagenet", cnn, torch.channels_last),
            ("vit_small_patch16_224 (random)", vit, torch.contiguous_format)]


def ms_per_tile(model, memory_format, batch_size: int, tiles: int) -> float:
    import torch

    batch = torch.randn(batch_size, 3, 224, 224).contiguous(memory_format=memory_format)
    batches = -(-tiles // batch_size)
    with torch.inference_mode():
        model(batch)  # first-call allocations and kernel selection are not the steady forward
        started = time.perf_counter()
        for _ in range(batches):
            model(batch)
    return (time.perf_counter() - started) / (batches * batch_size) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=256, help="tiles timed per batch size (default 256)")
    args = parser.parse_args()
    from evalsuite.runtime.allocator import reuse_freed_memory

    print(machine_line())
    print(host_tag())
    rows = []
    with reuse_freed_memory():
        for name, model, memory_format in models():
            timed = {size: ms_per_tile(model, memory_format, size, args.tiles) for size in BATCH_SIZES}
            rows += [[name, size, f"{ms:.2f}", f"{ms / timed[64]:.2f}"] for size, ms in timed.items()]
    print(host_tag())
    print(format_table(["backbone", "batch", "ms_per_tile", "x64"], rows, left=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
