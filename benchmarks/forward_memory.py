"""The CPU forward with glibc's default malloc against the forward with freed memory kept (runtime/allocator.py).

What is measured
----------------
The backbone's forward alone (eval mode, ``torch.inference_mode``, float32, the layout extraction uses) over
``--tiles`` random 224x224 inputs after one warm-up batch, at batch 16 (evalsuite's CPU default) and 32 (eva's), for
evalsuite's ``efficientnet_lite0_imagenet`` (real weights) and timm's ``vit_small_patch16_224`` (random weights:
speed does not depend on them). Each (backbone, batch, allocator) runs in a fresh process, since glibc's adaptive
threshold cannot be restored once set:

- ``default``: glibc as the process starts (blocks above 32 MiB at most are mmapped, and unmapped when freed);
- ``reused``: inside ``reuse_freed_memory()``, as `evalsuite run` extracts.

Printed per row: ms per tile, the forward's system seconds and minor page faults (getrusage), the peak RSS of the
process over its RSS before the forward (MiB, the activations' cost), and default / reused (the speed-up).

Why: a forward allocates and frees the same large activations every batch; unmapped memory is faulted in and zeroed
by the kernel again at the next batch. Timings move with load: the host line is printed before and after.

Run: ``python benchmarks/forward_memory.py [--tiles 400]`` (about a minute on 2 idle cores).
"""

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time

from _shared import format_table, host_tag, machine_line, read_status, reset_peak

MODELS = ("efficientnet_lite0_imagenet", "vit_small_patch16_224")
BATCH_SIZES = (16, 32)
MODES = ("default", "reused")


def build(name: str):
    """(module, memory format) as extraction runs it."""
    import timm
    import torch

    from evalsuite.models.backbones import build_backbone

    if name == "efficientnet_lite0_imagenet":
        return build_backbone(name).model.eval().to(memory_format=torch.channels_last), torch.channels_last
    return timm.create_model(name, pretrained=False, num_classes=0).eval(), torch.contiguous_format


def measure(name: str, batch_size: int, mode: str, tiles: int) -> dict:
    """One process's forward: ms per tile, system seconds, minor faults, peak RSS over the RSS before (MiB)."""
    import torch

    from evalsuite.runtime.allocator import reuse_freed_memory

    model, memory_format = build(name)
    batch = torch.randn(batch_size, 3, 224, 224).contiguous(memory_format=memory_format)
    batches = -(-tiles // batch_size)
    reset_peak()
    resident_before_mib = read_status()["VmRSS"]
    reuse = reuse_freed_memory() if mode == "reused" else contextlib.nullcontext()
    with reuse, torch.inference_mode():
        model(batch)  # first-call allocations and kernel selection are not the steady forward
        usage = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        for _ in range(batches):
            model(batch.clone())  # a fresh input each batch, as extraction decodes one
        wall_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        peak_mib = read_status()["VmHWM"]
    return {"ms_per_tile": wall_s / (batches * batch_size) * 1000, "system_s": after.ru_stime - usage.ru_stime,
            "faults": after.ru_minflt - usage.ru_minflt, "activations_mib": peak_mib - resident_before_mib}


def in_child(name: str, batch_size: int, mode: str, tiles: int) -> dict:
    command = [sys.executable, __file__, "--child", json.dumps([name, batch_size, mode, tiles])]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"forward_memory: {name} batch {batch_size} {mode} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=400, help="tiles timed per row (default 400)")
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)),
                        help="comma-separated batch sizes (default 16,32; the smoke test times one)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*json.loads(args.child))))
        return 0
    print(machine_line())
    print(host_tag())
    rows = []
    for name in MODELS:
        for size in (int(size) for size in args.batch_sizes.split(",")):
            timed = {mode: in_child(name, size, mode, args.tiles) for mode in MODES}
            ratio = timed["default"]["ms_per_tile"] / timed["reused"]["ms_per_tile"]
            rows += [[name, size, mode, f"{m['ms_per_tile']:.2f}", f"{m['system_s']:.2f}", m["faults"],
                      f"{m['activations_mib']:.0f}", f"{ratio:.2f}" if mode == "reused" else ""]
                     for mode, m in timed.items()]
    print(host_tag())
    print(format_table(["backbone", "batch", "malloc", "ms_per_tile", "system_s", "minor_faults", "peak_over_mib",
                        "default/reused"], rows, left=3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
