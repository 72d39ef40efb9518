"""How a run shares the CPUs it may use between torch's intra-op threads and DataLoader workers.

The CPUs are those of the process's affinity mask (Slurm's and taskset's cpuset), not the
machine's: on a shared node `os.cpu_count()` counts every core of the node, and torch's
default would start that many threads on a 16-CPU allocation.

Extraction: each DataLoader worker decodes with one thread (torch sets that in workers); the
main process runs the forward with `--threads` intra-op threads, by default its share of the usable CPUs,
because decoding is light next to the forward and a worker mostly waits
(benchmarks/demo_wall_time.py measures the choices). With 2 or fewer CPUs and no GPU there is no
core to spare and the main process decodes (`default_num_workers`). Probes run on the same threads, except
work too small to share between threads (threads_for_steps, one_thread).
"""

import os
from contextlib import contextmanager

# A training step below this many FLOPs runs on one intra-op thread (threads_for_steps).
SMALL_STEP_FLOPS = 256e6


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# Workers beside a CPU forward take cores from its threads; beside a GPU forward they are what feeds it. On one H100
# (benchmarks/gpu_check.py, docs/compute.md) a ViT-L/14 needed more than 4 workers on slide tiles (4: 0.64 of the
# forward rate once started; 12: 0.96).
CPU_FORWARD_MAX_WORKERS = 4
GPU_FORWARD_MAX_WORKERS = 12


def default_num_workers(device_type: str | None = None) -> int:
    """DataLoader workers, so decoding runs beside the forward. Beside a GPU forward: this process's share of the
    CPUs less one (the main process), at most 12. Beside a CPU forward: min(4, CPUs - 1), and none when this
    process's share of the CPUs is 2 or fewer: there a worker can only run on a core the forward's threads use, and
    every parallel step of the forward waits for the thread it displaced: on 2 cores one worker slowed the 2-thread
    forward by 20-38 %, more than reading the tiles in the main process costs (benchmarks/slide_extract.py).
    `device_type` None: "cuda" where a GPU is visible, else "cpu"."""
    if device_type is None:
        import torch

        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type != "cpu":
        return max(1, min(GPU_FORWARD_MAX_WORKERS, _cpu_share() - 1))
    return max(1, min(CPU_FORWARD_MAX_WORKERS, usable_cpus() - 1)) if _cpu_share() > 2 else 0


def _cpu_share() -> int:
    """This process's share of the usable CPUs (torchrun starts LOCAL_WORLD_SIZE processes that share them)."""
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    return max(1, usable_cpus() // max(1, ranks_here))


def intra_op_threads(requested: int = 0) -> int:
    """`--threads`; 0: OMP_NUM_THREADS when set (the user's or the launcher's choice), else this process's
    share of the usable CPUs (torchrun starts LOCAL_WORLD_SIZE processes that share them)."""
    if requested > 0:
        return requested
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        return int(os.environ["OMP_NUM_THREADS"])
    return _cpu_share()


def use_threads(requested: int = 0) -> int:
    """Set torch's intra-op threads for this process; returns the number set."""
    import torch

    threads = intra_op_threads(requested)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


@contextmanager
def threads_for_steps(step_flops: float):
    """One intra-op thread inside the block when each training step does fewer than SMALL_STEP_FLOPS, else the
    threads already set. Why: a small step is a few dozen tiny parallel ops, and each parallel op waits for every
    thread; when another process holds one of the cores, that wait is a scheduler time slice per op, and the
    linear probe's 64-row steps ran 10-20x slower (benchmarks/probe_contention.py, docs/compute.md). On one
    thread they lose nothing when a core is taken, and little when it is free: 2 threads help only once the
    step's GEMMs dominate (1.5x at 2,560 dimensions x 108 head outputs, 106 MFLOP a step)."""
    if step_flops >= SMALL_STEP_FLOPS:
        import torch

        yield torch.get_num_threads()
        return
    with one_thread():
        yield 1


@contextmanager
def one_thread():
    """torch on one intra-op thread inside the block (per-image transforms, small steps: see threads_for_steps),
    the previous setting restored after it."""
    import torch

    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def cpu_description() -> str:
    """One line for benchmark output: model, usable CPUs, torch's SIMD level and native bf16,
    the facts a speed or precision figure depends on."""
    import torch

    from evalsuite.runtime.precision import cpu_has_native_bf16

    native = "yes" if cpu_has_native_bf16() else "no"
    return (f"{cpu_model_name()}, {usable_cpus()} usable CPUs, capability "
            f"{torch.backends.cpu.get_cpu_capability()}, native bf16: {native}")


def cpu_model_name() -> str:
    import platform

    try:
        with open("/proc/cpuinfo") as handle:
            return next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
