"""Seconds and peak memory of one slide-encoder forward per slide, at 1,000 to 50,000 tiles, beside the estimate a
run refuses a slide with (evalsuite/models/slide/memory.py forward_bytes).

What is measured
----------------
Every slide encoder of the registry (``evalsuite.models.slide.entries.SLIDE_ENCODERS``; ``--models``) at its
published size, built by ``build_slide_encoder(name, random_init=True)`` (seeded random weights: no figure here
depends on them), float32 (no autocast, TF32 off on a GPU), under ``torch.inference_mode()`` as a run's
slide-embedding stage calls it (features/slide_embeddings.py SlideForward). Per (model, device, tile count), in a
fresh subprocess of this script:

- the input: ``tiles`` random-normal float32 tile features [tiles, tile_dim], and level-0 coordinates on a square
  grid (``ceil(sqrt(tiles))`` columns) whose step is the entry's tile side at level 0, ``tile_size_px x target_mpp
  / LEVEL0_MPP`` (a 40x scan, 0.25 um/px: TITAN's 512 px at 0.5 um/px is 1,024 level-0 px), passed as
  ``patch_size_level0``: every tile its own grid cell, as on a real slide;
- after the build, one untimed forward on 64 tiles of their own (kernel selection, thread pools, the allocator's
  first blocks: what a run's first slide leaves for the next), then the forward on all the tiles, repeated while
  the repeats take under ``--repeat-seconds`` (default 2 s; at most 5 forwards); ``s/slide`` is the fastest
  (other load on a shared host only ever adds time), ``median s`` their median;
- the peak, host: the RSS after the build and the warm-up (``VmRSS``) is read and the peak reset (``echo 5 >
  /proc/self/clear_refs`` resets ``VmHWM``) before the inputs are made; peak = ``VmHWM`` after the forwards less
  that RSS (where the kernel refuses the reset, ``getrusage(RUSAGE_SELF).ru_maxrss`` less it, which then holds
  the build's own peak too, flagged). GPU: ``torch.cuda.max_memory_allocated`` (statistics reset after the
  build) less the weights' ``memory_allocated``. So both count the inputs, the activations and the allocator's
  blocks, not the weights: what ``forward_bytes`` estimates.
- ``estimate``: ``forward_bytes(spec, tiles)``; ``peak / estimate`` > 1 is an underestimate (a run would start a
  slide that cannot fit).

Limits: a point's process (start-up, build and all) is killed at ``--max-seconds`` (default 300) and printed as
``skipped``, and so are the model's larger points after it. A point is also skipped without running when the
two smaller points already measured put it past the cap (the time at the larger count is taken to grow at least
as fast as between those two); such a row prints the expected seconds as ``expected >= N``, never as a
measurement. On the host, each process may take at most ``--max-memory-gib`` (default 70 % of ``MemAvailable``
at start) beyond what it holds after building the model (``RLIMIT_AS``): past it the allocation fails inside the
child, which prints ``out of memory``, instead of the kernel's OOM killer choosing among the host's processes.

Then, unless ``--no-run``, a whole slide-encoder run's time split: ``python -m evalsuite run --task demo_slide
--model chief --random-init --out <tmp>`` (CHIEF: CTransPath tiles, the cheapest), its run JSON's ``timings_s``
(``features_s`` holds tiling, tile extraction and the slide-encoder stage), the tile extraction's seconds from its
``throughput`` (``extract_s`` per split), and the slide-encoder forwards timed here, in this process, at the
demo's per-slide tile counts (read from its tile caches' slide tables) in the run's precision on its device.

How to read it
--------------
- ``peak / estimate`` per row; the lines under the table give it per model at its largest measured count and name
  an underestimate of more than 1.5x there (forward_bytes then needs the module's own rule: memory.py). At a
  small count the peak is mostly constants (the allocator's blocks, a model's fixed-size latents), not tiles.
- ``scaling``: per model, time and peak at the largest measured count over the smallest, beside the tile ratio:
  about equal for a model linear in tiles, its square for attention over all tiles.
- Timings are wall clock on whatever else the host does: the host line (CPU capability, native bf16, usable
  cores, load average) is printed before and after; compare rows of one run.

Run: ``python benchmarks/slide_encoders.py [--models NAME ...] [--tiles N ...] [--max-seconds S]
[--devices cpu cuda] [--repeat-seconds S] [--no-run]`` (10.5 min on 2 loaded AVX-512 cores with the defaults,
TITAN's and Prov-GigaPath's 50,000 tiles skipped: docs/compute.md).
"""

import argparse
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, host_tag, machine_line, read_status, reset_peak

TILES = (1000, 10000, 50000)
LEVEL0_MPP = 0.25  # a 40x scan: the level-0 side of a tile at the entry's tiling
WARMUP_TILES = 64
REPEAT_BUDGET_S = 2.0
MAX_REPEATS = 5
MEMORY_SHARE = 0.7  # of MemAvailable at start, the default --max-memory-gib
UNDERESTIMATE_LIMIT = 1.5
MIB = 1024**2
GIB = 1024**3
SEED = 0
DEMO_RUN = ("run", "--task", "demo_slide", "--model", "chief", "--random-init")
DEMO_RUN_TIMEOUT_S = 3600


# --- the inputs and one measured forward (also used by gpu_check.py) -------------------------------------------

def level0_side_px(spec) -> int:
    """The entry's tile side in level-0 pixels of a LEVEL0_MPP scan."""
    return int(round(spec.tiling["tile_size_px"] * spec.tiling["target_mpp"] / LEVEL0_MPP))


def slide_inputs(spec, tiles: int, device):
    """(features [tiles, tile_dim] random normal, coords_level0 [tiles, 2] on a square grid, level-0 tile side)."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    features = torch.randn(tiles, spec.tile_dim, generator=generator)
    side = level0_side_px(spec)
    columns = math.ceil(math.sqrt(tiles))
    index = torch.arange(tiles)
    coords = torch.stack([index % columns, index // columns], dim=1).to(torch.float32) * side
    return features.to(device), coords.to(device), side


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(encoder, device) -> None:
    """One forward on WARMUP_TILES tiles of their own: kernel selection, thread pools, the allocator's first blocks,
    as a run's first slide leaves them for the next (before the peak is reset)."""
    import torch

    features, coords, side = slide_inputs(encoder.spec, WARMUP_TILES, device)
    with torch.inference_mode():
        encoder.model(features, coords, side)
    synchronize(device)


def timed_forwards(model, features, coords, side: int, device, repeat_s: float = REPEAT_BUDGET_S) -> list:
    """Seconds of each forward over all tiles: at least one, repeated while the repeats take under `repeat_s`."""
    import torch

    seconds = []
    with torch.inference_mode():
        while not seconds or (len(seconds) < MAX_REPEATS and sum(seconds) < repeat_s):
            started = time.perf_counter()
            embedding = model(features, coords, side)
            synchronize(device)
            seconds.append(time.perf_counter() - started)
    if not torch.isfinite(embedding).all():
        raise RuntimeError("non-finite slide embedding")
    return seconds


def summary(seconds: list) -> dict:
    """The fastest forward (other load on a shared host only ever adds time), the median and the count."""
    return {"seconds": min(seconds), "median_s": statistics.median(seconds), "repeats": len(seconds)}


def cuda_point(encoder, tiles: int, device, repeat_s: float = REPEAT_BUDGET_S) -> dict:
    """One (model, tiles) point on a GPU, in this process: seconds and the peak over the weights (bytes)."""
    import torch

    warm_up(encoder, device)
    torch.cuda.empty_cache()
    weights_bytes = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    features, coords, side = slide_inputs(encoder.spec, tiles, device)
    seconds = timed_forwards(encoder.model, features, coords, side, device, repeat_s)
    peak = torch.cuda.max_memory_allocated(device) - weights_bytes
    del features, coords
    return {**summary(seconds), "peak_bytes": peak}


def build_on(name: str, device):
    from evalsuite.models.slide.encoder import build_slide_encoder

    encoder = build_slide_encoder(name, random_init=True)
    encoder.model.to(device)
    return encoder


# --- one point in a fresh process --------------------------------------------------------------------------------

def cap_address_space(cap_bytes: int) -> None:
    """At most `cap_bytes` more address space for this process: a larger allocation fails here, in this process."""
    size_bytes = int(read_status(wanted=("VmSize",))["VmSize"] * MIB)
    resource.setrlimit(resource.RLIMIT_AS, (size_bytes + cap_bytes, resource.RLIM_INFINITY))


def host_point(encoder, tiles: int, device, cap_bytes: int | None, repeat_s: float) -> dict:
    """One (model, tiles) point on the CPU: seconds and the peak RSS over the RSS after the build (bytes)."""
    warm_up(encoder, device)
    resident_bytes = read_status()["VmRSS"] * MIB
    was_reset = reset_peak()
    if cap_bytes:
        cap_address_space(cap_bytes)
    features, coords, side = slide_inputs(encoder.spec, tiles, device)
    seconds = timed_forwards(encoder.model, features, coords, side, device, repeat_s)
    if was_reset:
        peak_bytes = read_status()["VmHWM"] * MIB
    else:
        peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    return {**summary(seconds), "peak_bytes": int(peak_bytes - resident_bytes), "peak_includes_build": not was_reset}


def child(name: str, tiles: int, device_name: str, cap_bytes: int | None, repeat_s: float = REPEAT_BUDGET_S) -> dict:
    import torch

    from evalsuite.runtime.cpus import use_threads

    use_threads()  # as `evalsuite run` sets them
    device = torch.device(device_name)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # float32 proper on a GPU
    encoder = build_on(name, device)
    try:
        if device.type == "cuda":
            return cuda_point(encoder, tiles, device, repeat_s)
        return host_point(encoder, tiles, device, cap_bytes, repeat_s)
    except (MemoryError, RuntimeError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        if not isinstance(exc, MemoryError) and "alloc" not in str(exc) and "out of memory" not in str(exc):
            raise
        where = "on the GPU" if device.type == "cuda" else f"past the host cap of {cap_bytes / GIB:.1f} GiB"
        return {"skipped": f"out of memory {where}"}


def in_child(name: str, tiles: int, device: str, max_seconds: float, cap_bytes: int | None, repeat_s: float) -> dict:
    """The point measured in a fresh process of this script, killed at `max_seconds`."""
    command = [sys.executable, __file__, "--child", json.dumps([name, tiles, device, cap_bytes, repeat_s])]
    started = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=max_seconds, check=False)
    except subprocess.TimeoutExpired:
        return {"skipped": f"killed at --max-seconds {max_seconds:g}", "timed_out": True}
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit {result.returncode}"]
        if result.returncode < 0:
            return {"skipped": f"killed by signal {-result.returncode}"}
        raise SystemExit(f"slide_encoders: {name} at {tiles} tiles on {device} failed: {lines[-1]}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    measured["process_s"] = time.perf_counter() - started
    return measured


# --- the table ---------------------------------------------------------------------------------------------------

def expected_seconds(measured: list, tiles: int) -> float | None:
    """A lower bound of the time at `tiles` from the last two measured (tiles, seconds): their slope carried on."""
    if len(measured) < 2:
        return None
    (small_tiles, small_s), (large_tiles, large_s) = measured[-2:]
    slope = max(0.0, (large_s - small_s) / (large_tiles - small_tiles))
    return large_s + slope * (tiles - large_tiles)


def measure_model(name: str, device: str, tile_counts: list, args) -> list:
    """Rows of one model on one device, smallest count first; larger points skipped after a skipped one."""
    from evalsuite.models.slide.entries import SLIDE_ENCODERS
    from evalsuite.models.slide.memory import forward_bytes

    spec, rows, measured, stopped = SLIDE_ENCODERS[name], [], [], None
    for tiles in tile_counts:
        row = {"model": name, "device": device, "tiles": tiles, "estimate_bytes": forward_bytes(spec, tiles)}
        expected = expected_seconds(measured, tiles)
        if stopped:
            row["skipped"] = f"the {stopped}-tile point was skipped"
        elif expected is not None and expected > args.max_seconds:
            row["skipped"] = (f"expected >= {expected:.0f} s (from the {measured[-2][0]} and {measured[-1][0]}-tile "
                              f"points) over --max-seconds {args.max_seconds:g}")
        else:
            print(f"slide_encoders: {name} {tiles} tiles on {device} ...", file=sys.stderr, flush=True)
            cap = int(args.max_memory_gib * GIB) if device == "cpu" else None
            row.update(in_child(name, tiles, device, args.max_seconds, cap, args.repeat_seconds))
        if "skipped" in row:
            stopped = stopped or tiles
        else:
            measured.append((tiles, row["seconds"]))
        rows.append(row)
    return rows


def table_rows(rows: list) -> tuple:
    """(table rows, footnotes): a skipped row says why below the table, numbered."""
    table, notes = [], []
    for row in rows:
        estimate_mib = f"{row['estimate_bytes'] / MIB:.0f}"
        head = [row["model"], row["device"], row["tiles"]]
        if "skipped" in row:
            notes.append(f"({len(notes) + 1}) {row['model']} on {row['device']} at {row['tiles']} tiles: "
                         f"{row['skipped']}")
            table.append(head + [f"skipped ({len(notes)})", "", "", "", estimate_mib, ""])
            continue
        flag = "*" if row.get("peak_includes_build") else ""
        table.append(head + [f"{row['seconds']:.3f}", f"{row['median_s']:.3f}", row["repeats"],
                             f"{row['peak_bytes'] / MIB:.0f}{flag}", estimate_mib,
                             f"{row['peak_bytes'] / row['estimate_bytes']:.2f}"])
    if any(row.get("peak_includes_build") for row in rows):
        notes.append("* the kernel refused to reset VmHWM: the peak is ru_maxrss, the build's own peak included")
    return table, notes


HEADER = ["model", "device", "tiles", "s/slide", "median s", "forwards", "peak MiB", "estimate MiB", "peak / estimate"]


def verdict_lines(rows: list) -> list:
    """Per model and device, at its largest measured count: peak / estimate, named an underestimate past
    UNDERESTIMATE_LIMIT (a small count's peak is mostly the allocator's and thread pools' constants); and the
    scaling from its smallest to its largest measured count."""
    lines = []
    for key in dict.fromkeys((row["model"], row["device"]) for row in rows):
        done = [row for row in rows if (row["model"], row["device"]) == key and "skipped" not in row]
        if not done:
            continue
        small, large = done[0], done[-1]
        ratio = large["peak_bytes"] / large["estimate_bytes"]
        word = f"UNDERESTIMATE (> {UNDERESTIMATE_LIMIT})" if ratio > UNDERESTIMATE_LIMIT else "ok"
        line = (f"{key[0]} on {key[1]} at {large['tiles']} tiles: peak / forward_bytes {ratio:.2f}, {word}")
        if len(done) >= 2:
            line += (f"; scaling {large['tiles']} / {small['tiles']} tiles (ratio "
                     f"{large['tiles'] / small['tiles']:.0f}): time {large['seconds'] / small['seconds']:.1f}, "
                     f"peak {large['peak_bytes'] / max(small['peak_bytes'], 1):.1f}")
        lines.append(line)
    return lines


# --- a whole run's time split ------------------------------------------------------------------------------------

def demo_run(out: Path) -> dict:
    """`python -m evalsuite run --task demo_slide --model chief --random-init --out <out>`'s run JSON."""
    command = [sys.executable, "-m", "evalsuite", *DEMO_RUN, "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=DEMO_RUN_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise SystemExit(f"slide_encoders: {shlex.join(['python', *command[1:]])} failed: "
                         f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    [path] = sorted((out / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)[-1:]
    return {"record": json.loads(path.read_text()), "wall_s": time.perf_counter() - started}


def slide_tile_counts(out: Path, model: str) -> list:
    """Tiles per slide of every tile cache the run wrote with `model` (the slide tables of their manifests)."""
    import numpy as np

    from evalsuite.features.cache import FeatureCache

    cache, counts = FeatureCache(out / "cache"), []
    for path in sorted((out / "cache").glob("*/manifest.json")):
        manifest = cache.manifest(path.parent.name)
        if manifest and manifest.get("slides") and manifest["fields"].get("model") == model:
            counts += np.diff(manifest["slides"]["offsets"]).tolist()
    return counts


def slide_stage_seconds(name: str, counts: list, device_name: str, precision: str) -> float:
    """The slide encoder's forwards over slides of `counts` tiles, summed, as the run's stage calls them."""
    import torch

    from evalsuite.runtime.precision import autocast_context

    device = torch.device(device_name)
    encoder = build_on(name, device)
    total = 0.0
    with torch.inference_mode(), autocast_context(device, precision):
        for tiles in counts:
            features, coords, side = slide_inputs(encoder.spec, tiles, device)
            encoder.model(features, coords, side)  # per slide shape: the run met each once too, but warm
            synchronize(device)
            started = time.perf_counter()
            encoder.model(features, coords, side)
            synchronize(device)
            total += time.perf_counter() - started
    return total


def run_split_table() -> tuple:
    from evalsuite.models.slide.entries import SLIDE_ENCODERS

    slide_name = DEMO_RUN[DEMO_RUN.index("--model") + 1]
    with tempfile.TemporaryDirectory(prefix="evalsuite-slide-encoders-") as folder:
        out = Path(folder)
        run = demo_run(out)
        record = run["record"]
        counts = slide_tile_counts(out, SLIDE_ENCODERS[slide_name].tile_encoder)
    timings, splits = record["timings_s"], (record.get("throughput") or {}).get("splits", {})
    features_s = timings["features_s"]
    extract_s = sum(split.get("extract_s", 0.0) for split in splits.values())
    slide_s = slide_stage_seconds(slide_name, counts, record["device"], record["precision"])
    rows = [["features_s (tiling, tile extraction, slide encoder)", f"{features_s:.2f}", "1.000"],
            [f"  tile extraction (throughput extract_s, {len(splits)} splits)", f"{extract_s:.2f}",
             f"{extract_s / features_s:.3f}"],
            [f"  {slide_name} forwards ({len(counts)} slides, {sum(counts)} tiles, timed here)", f"{slide_s:.3f}",
             f"{slide_s / features_s:.4f}"],
            ["  rest (tiling, cache set-up and writes)", f"{features_s - extract_s - slide_s:.2f}",
             f"{(features_s - extract_s - slide_s) / features_s:.3f}"],
            ["probes_s", f"{timings['probes_s']:.2f}", ""], ["setup_s", f"{timings['setup_s']:.2f}", ""]]
    title = (f"run: python -m evalsuite {shlex.join(DEMO_RUN)} --out <tmp>: {run['wall_s']:.1f} s wall, device "
             f"{record['device']}, precision {record['precision']}, {len(counts)} slides of {min(counts)}-"
             f"{max(counts)} tiles")
    return title, format_table(["stage", "seconds", "share of features_s"], rows, left=1), slide_s / features_s


# --- main ----------------------------------------------------------------------------------------------------------

def full_host_line() -> str:
    import torch

    bf16 = "yes" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "no"
    return f"{host_tag()}, native bf16 {bf16}"


def available_gib() -> float:
    """MemAvailable of /proc/meminfo, GiB."""
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2  # kB
    raise SystemExit("slide_encoders: /proc/meminfo has no MemAvailable; pass --max-memory-gib")


def parse_args(argv=None):
    from evalsuite.models.slide.entries import SLIDE_ENCODERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(SLIDE_ENCODERS), default=list(SLIDE_ENCODERS),
                        help="slide encoders to measure (default: all)")
    parser.add_argument("--tiles", nargs="+", type=int, default=list(TILES),
                        help="tiles per slide (default: %(default)s)")
    parser.add_argument("--devices", nargs="+", choices=("cpu", "cuda"), default=None,
                        help="devices (default: cpu, and cuda where a GPU is visible)")
    parser.add_argument("--max-seconds", type=float, default=300.0,
                        help="a point's process is killed after this and printed as skipped (default: %(default)s)")
    parser.add_argument("--max-memory-gib", type=float, default=None,
                        help="address space a host point may add after its build (default: 70%% of MemAvailable)")
    parser.add_argument("--repeat-seconds", type=float, default=REPEAT_BUDGET_S,
                        help=f"repeat a point's forward while the repeats take under this (at most {MAX_REPEATS}; "
                             "0: one forward; default: %(default)s)")
    parser.add_argument("--no-run", action="store_true", help="leave out the demo run's time split")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return args
    if min(args.tiles) < 1:
        parser.error("--tiles must be >= 1")
    if args.max_seconds <= 0 or (args.max_memory_gib is not None and args.max_memory_gib <= 0):
        parser.error("--max-seconds and --max-memory-gib must be > 0")
    if args.repeat_seconds < 0:
        parser.error("--repeat-seconds must be >= 0")
    if args.devices is None:
        import torch

        args.devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    elif "cuda" in args.devices:
        import torch

        if not torch.cuda.is_available():
            parser.error("--devices cuda: no CUDA device is visible")
    args.max_memory_gib = args.max_memory_gib or MEMORY_SHARE * available_gib()
    args.tiles = sorted(set(args.tiles))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return 0
    print(machine_line())
    print(full_host_line())
    print(f"float32, level-0 tile side at {LEVEL0_MPP} um/px, --max-seconds {args.max_seconds:g}, host cap "
          f"{args.max_memory_gib:.1f} GiB a point", flush=True)
    rows = [row for name in args.models for device in args.devices
            for row in measure_model(name, device, args.tiles, args)]
    print(full_host_line())
    table, notes = table_rows(rows)
    print(format_table(HEADER, table, left=2))
    print("\n".join(notes))
    print("\n".join(verdict_lines(rows)), flush=True)
    if not args.no_run:
        title, table, share = run_split_table()
        print()
        print(title)
        print(table)
        print(f"slide-encoder share of features_s: {share:.4f}")
        print(full_host_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
