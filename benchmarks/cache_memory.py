"""Peak host memory (RSS) of feature extraction and of a linear-probe fit, RAM vs memory-mapped caches.

What is measured
----------------
For every cache size (``--sizes``, GiB of float16 features) the script builds one cache with
the real code path (``FeatureCache.start_or_resume`` + ``extract_to_cache``) from a tiny
backbone (a 1x1 convolution, 3 -> 256 channels, over synthetic 16x16 images, flattened to
rows of 16*16*256 = 65,536 values = 128 KiB in float16) and then fits
``evalsuite.probes.LinearProbe`` on it, opened with ``FeatureCache.open(key, "ram")`` and
with ``FeatureCache.open(key, "memmap")``. The cache is both the train and the val split of
the fit, so the fit reads it in random training batches (``--epochs`` passes) and then again
in sequential evaluation batches, once per head of the grid.

Every phase runs in a fresh subprocess of this script, so no peak leaks from one case into
the next. In that subprocess, after the imports and a small warm-up (so lazily initialised
torch kernels are not charged to the phase), the script records the baseline RSS
(``VmRSS``), resets the peak (``echo 5 > /proc/self/clear_refs`` resets ``VmHWM``), runs the
phase, and reads the peak (``VmHWM``) and the end-of-phase ``RssAnon`` / ``RssFile`` from
``/proc/self/status``. The probe-fit phase includes ``FeatureCache.open``, which is where
``ram`` loads the cache. Extraction does not depend on the mode (the mode only changes how
the finished cache is opened), so it is measured once per size and shown on both rows.
DataLoader workers are separate processes whose memory is not in these numbers; the default
``--num-workers 0`` keeps the whole pipeline in the measured process.

How to read the table
---------------------
- ``ram``: the fit peak grows with the cache (about baseline + the cache size; peak/size
  near or above 1) - the cache is held in host memory.
- ``memmap``: the fit peak should stay roughly flat as the cache grows (baseline + the probe
  working set, i.e. about one evaluation batch of 1024 rows upcast to float32 plus its copies),
  so peak/size falls as the size grows. ``NpyRows`` reads rows with positioned reads and
  maps nothing, so ``fit end RssFile`` should stay near the baseline's (library files); a
  memmap peak that grows with the size means rows are being kept somewhere.
- ``extract peak`` should be flat in the size: rows are written chunk by chunk with
  positioned writes, so it is baseline + one chunk buffer (256 MiB here) and its copies.
Absolute numbers depend on the machine, torch build and allocator; compare rows, not runs.
Sizes are GiB (2**30 bytes) of float16 feature rows; the temporary folder needs that much
free disk for the largest size (one size's cache exists at a time) and is removed at the end.

Run: ``python benchmarks/cache_memory.py`` (defaults: 0.5 1 2 4 GiB; several minutes on 2 cores,
10 on a busy machine).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, read_status, reset_peak

GRID = 16  # rows are GRID x GRID x CHANNELS values
CHANNELS = 256
ROW_VALUES = GRID * GRID * CHANNELS
ROW_BYTES = ROW_VALUES * 2  # float16
NUM_CLASSES = 3
MIB = 1024**2
GIB = 1024**3
HEADER = ("size GiB", "mode", "rows", "extract peak MiB", "fit peak MiB", "baseline MiB", "fit peak/size",
          "fit end RssAnon MiB", "fit end RssFile MiB")


# --- measurement helpers (used inside the worker subprocesses) ------------------------------------





def rows_for(size_gib: float) -> int:
    return max(int(round(size_gib * GIB / ROW_BYTES)), 64)


# --- the tiny backbone and the synthetic dataset -------------------------------------------------

def make_backbone():
    import torch

    class TinyBackbone:
        """A 1x1 convolution: [B, 3, 16, 16] images -> [B, 16*16*256] rows (channels last, flattened)."""

        def __init__(self):
            torch.manual_seed(0)
            self.model = torch.nn.Conv2d(3, CHANNELS, kernel_size=1).eval().requires_grad_(False)

        def pooled_features(self, images):
            return self.model(images).permute(0, 2, 3, 1).flatten(1)

    return TinyBackbone()


def make_dataset(rows: int):
    import numpy as np
    import torch

    class SyntheticImages(torch.utils.data.Dataset):
        """Small random images, deterministic per index, with random labels in `.labels`."""

        def __init__(self, count: int):
            self.labels = np.random.default_rng(0).integers(0, NUM_CLASSES, size=count).astype(np.int64)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, index):
            generator = torch.Generator().manual_seed(int(index))
            return torch.randn(3, GRID, GRID, generator=generator), int(self.labels[index])

    return SyntheticImages(rows)


# --- the two measured phases ------------------------------------------------------------------

def worker_extract(args) -> dict:
    import numpy as np
    import torch

    from evalsuite.features.cache import FeatureCache
    from evalsuite.features.extract import extract_to_cache
    from evalsuite.features.prepare import chunk_rows_for

    backbone = make_backbone()
    dataset = make_dataset(args.rows)
    with torch.inference_mode():  # warm-up: one forward pass outside the measured phase
        backbone.pooled_features(dataset[0][0].unsqueeze(0))
    cache = FeatureCache(Path(args.root))
    row_shape = (ROW_VALUES,)
    chunk_rows = chunk_rows_for(row_shape, args.batch_size, None)  # as a real run sizes its chunks
    baseline = read_status()
    reset = reset_peak()
    writer = cache.start_or_resume(args.key, (len(dataset), *row_shape), dataset.labels,
                                   {"benchmark": "cache_memory", "rows": len(dataset)}, chunk_rows, {})
    forwarded = extract_to_cache(backbone, dataset, writer, torch.device("cpu"), batch_size=args.batch_size,
                                 num_workers=args.num_workers, precision="fp32", description="benchmark")
    end = read_status()
    assert forwarded == len(dataset) and cache.is_complete(args.key)
    return {"baseline_mib": baseline["VmRSS"], "peak_mib": end["VmHWM"], "end": end, "peak_reset": reset,
            "chunk_rows": chunk_rows, "chunk_mib": chunk_rows * ROW_BYTES / MIB,
            "cache_mib": np.prod((len(dataset), *row_shape)) * 2 / MIB}


def worker_fit(args) -> dict:
    import numpy as np
    import torch

    from evalsuite.features.cache import FeatureCache
    from evalsuite.probes import LinearProbe

    def probe():
        return LinearProbe(num_classes=NUM_CLASSES, lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           batch_size=args.batch_size, device=torch.device("cpu"), seed=0)

    # Warm-up on a small array: autograd, Adam and the metric code load outside the measured phase.
    small = np.random.default_rng(0).standard_normal((96, 64)).astype(np.float16)
    small_labels = np.arange(96) % NUM_CLASSES
    probe().fit(small, small_labels, small, small_labels)
    cache = FeatureCache(Path(args.root))
    baseline = read_status()
    reset = reset_peak()
    started = time.perf_counter()
    features, labels = cache.open(args.key, args.mode)
    fitted = probe().fit(features, labels, features, labels)
    seconds = time.perf_counter() - started
    end = read_status()
    return {"baseline_mib": baseline["VmRSS"], "peak_mib": end["VmHWM"], "end": end, "peak_reset": reset,
            "seconds": seconds, "selected_params": fitted.selected_params_}


def run_worker(args) -> None:
    result = (worker_extract if args.worker == "extract" else worker_fit)(args)
    print("RESULT " + json.dumps(result, default=float), flush=True)


# --- the driver -------------------------------------------------------------------------------

def spawn(phase: str, args, root: Path, key: str, rows: int, mode: str = "") -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", phase, "--root", str(root), "--key", key,
               "--rows", str(rows), "--mode", mode or "memmap", "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--num-workers", str(args.num_workers),
               "--lr", *map(str, args.lr), "--weight-decay", *map(str, args.weight_decay)]
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"cache_memory: the {phase} {mode} subprocess for {rows} rows failed "
                         f"(exit {done.returncode})")
    return json.loads(results[-1][len("RESULT "):])


def run_benchmark(args) -> None:
    modes = args.modes
    sizes = sorted(args.sizes)
    need = rows_for(sizes[-1]) * ROW_BYTES
    parent = Path(args.tmp_dir) if args.tmp_dir else Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if need * 1.05 > free:
        raise SystemExit(f"cache_memory: the largest cache needs {need / GIB:.2f} GiB but {parent} has "
                         f"{free / GIB:.2f} GiB free; pass smaller --sizes or --tmp-dir on a larger disk")
    workdir = Path(tempfile.mkdtemp(prefix="evalsuite-cache-memory-", dir=parent))
    print(f"cache_memory: rows of {GRID}x{GRID}x{CHANNELS} float16 ({ROW_BYTES // 1024} KiB), "
          f"linear probe grid lr={args.lr} x wd={args.weight_decay}, {args.epochs} epoch(s), batch {args.batch_size}; "
          f"work folder {workdir}", file=sys.stderr, flush=True)
    table, notes = [], []
    try:
        for size in sizes:
            rows = rows_for(size)
            key = f"size-{rows}"
            started = time.perf_counter()
            extraction = spawn("extract", args, workdir, key, rows)
            print(f"  {size:g} GiB ({rows} rows): extracted in {time.perf_counter() - started:.0f} s, "
                  f"peak {extraction['peak_mib']:.0f} MiB", file=sys.stderr, flush=True)
            actual_gib = rows * ROW_BYTES / GIB
            for mode in modes:
                fit = spawn("fit", args, workdir, key, rows, mode)
                print(f"  {size:g} GiB {mode}: fit in {fit['seconds']:.0f} s, peak {fit['peak_mib']:.0f} MiB",
                      file=sys.stderr, flush=True)
                table.append([f"{actual_gib:.2f}", mode, rows, f"{extraction['peak_mib']:.0f}",
                              f"{fit['peak_mib']:.0f}", f"{fit['baseline_mib']:.0f}",
                              f"{fit['peak_mib'] / (actual_gib * 1024):.2f}",
                              f"{fit['end']['RssAnon']:.0f}", f"{fit['end']['RssFile']:.0f}"])
                if not fit["peak_reset"]:
                    notes.append(f"{size:g} GiB {mode}: could not reset VmHWM; the fit peak includes setup")
            notes.append(f"{actual_gib:.2f} GiB extraction: baseline {extraction['baseline_mib']:.0f} MiB, "
                         f"chunk {extraction['chunk_rows']} rows = {extraction['chunk_mib']:.0f} MiB, "
                         f"end RssAnon {extraction['end']['RssAnon']:.0f} MiB, "
                         f"RssFile {extraction['end']['RssFile']:.0f} MiB"
                         + ("" if extraction["peak_reset"] else " (VmHWM not reset: peak includes setup)"))
            shutil.rmtree(workdir / key, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_table(HEADER, table))
    print()
    print("baseline = RSS before the measured phase (interpreter, torch, warm-up); peaks are VmHWM after a reset;")
    print("fit peak/size = fit peak MiB / cache MiB; extraction is mode-independent (measured once per size).")
    for note in notes:
        print(note)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Peak RSS of extraction and of a linear-probe fit with RAM vs memory-mapped float16 feature "
                    "caches of increasing size (tiny synthetic backbone; every case in a fresh subprocess).")
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1, 2, 4], metavar="GIB",
                        help="cache sizes in GiB of float16 features (default: 0.5 1 2 4)")
    parser.add_argument("--modes", nargs="+", default=["ram", "memmap"], choices=["ram", "memmap"],
                        help="how the probe opens the cache (default: ram memmap)")
    parser.add_argument("--epochs", type=int, default=1, help="linear-probe epochs (default: 1)")
    parser.add_argument("--lr", type=float, nargs="+", default=[1e-3, 1e-4], help="lr grid (default: 1e-3 1e-4)")
    parser.add_argument("--weight-decay", type=float, nargs="+", default=[0.0], help="weight-decay grid (default: 0)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="extraction and probe training batch (default: 64, as probes/linear.yaml)")
    parser.add_argument("--num-workers", type=int, default=0,
                        help="DataLoader workers for extraction (default: 0, so all work is in the measured process)")
    parser.add_argument("--tmp-dir", default=None, help="parent folder of the temporary caches (default: $TMPDIR)")
    # Internal: one measured phase in this (fresh) process.
    parser.add_argument("--worker", choices=["extract", "fit"], help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=["ram", "memmap"], default="memmap", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if any(size <= 0 for size in args.sizes):
        parser.error("--sizes must be positive")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if not Path("/proc/self/status").is_file():
        raise SystemExit("cache_memory: needs Linux /proc/self/status to read RSS")
    if args.worker:
        run_worker(args)
    else:
        run_benchmark(args)


if __name__ == "__main__":
    main()
