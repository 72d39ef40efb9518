"""Tiles per second of slide-level extraction through the full pipeline vs the pure backbone forward (issue #16).

What is measured
----------------
``--slides N`` of the offline demo slides (``evalsuite.readers.demo.demo_slides.demo_slides_folder()``, built on first
use under ``EVALSUITE_DATA_HOME``, by default a temporary folder here; the N are evenly spaced over the manifest,
so SVS-like and generic-TIFF files and all three splits are in) are tiled once as a run tiles them
(``evalsuite.readers.slides.base.tile_slides`` with the ``demo_slide`` card's tiling: tissue detection in DataLoader
workers). A backbone (``--model``, default ``efficientnet_lite0_imagenet``, the run's default model, built by
``evalsuite.models.backbones.build_backbone``; ``--random-init`` for seeded random weights, same timing) then
embeds every tile two (or three) ways, the order rotating every round, ``--rounds`` times:

- ``full pipeline``: ``FeatureCache.start_or_resume`` with the slide ``CacheLayout``
  (``evalsuite.features.slide_features.cache_layout``: chunks never cross a slide, the slide table in the
  manifest, ``coords_level0.npy`` beside it) and ``evalsuite.features.extract.extract_to_cache`` as a run calls it
  on a ``SlideTiles`` dataset: tiles read with OpenSlide on cached handles (PIL-resized when the model's input
  size differs) as uint8, by ``--num-workers`` DataLoader workers, or with 0 workers in the main process on a
  pool of as many threads as the forward's; each batch converted to the model's normalised float input in the
  main process (``SlideTiles.prepare_batch``, bit-identical to the per-tile transform); the forward in the
  memory format extraction uses (channels-last for a CNN) under ``torch.inference_mode()`` and the compute
  precision; the NaN / float16-range checks, the float16 chunk buffer, and per chunk (one slide here) a pwrite,
  fsync, sha256 and atomic manifest update; ``finish``.
- ``pure forward``: ``backbone.pooled_features`` on the same batches (the chunk-aligned batches
  ``extract_to_cache`` makes: at most ``--batch-size`` tiles, never across a slide), read, converted and put in
  the same memory format beforehand, in RAM; same threads, precision and malloc setting
  (``runtime/allocator.py``'s ``reuse_freed_memory``, as extraction); nothing else.
- with ``--full-batches``, ``pure forward, full batches``: the same tiles in batches of exactly ``--batch-size``
  across slides: whether slide-bounded batches (10-14 tiles on the demo slides, up to ``--batch-size`` on real
  ones) cost anything. (Seen: no; efficientnet_lite0 ran 1.5-1.7x slower per tile in batches of 64 than of ~11
  on the 2-core host, from page faults on its larger activation buffers.)
Before the rounds, one untimed pipeline run warms everything up (kernels for every batch shape, the slide
files into the page cache: the timed runs are warm runs) and is where the peak RSS is measured.

How to read it
--------------
- ``pipeline / pure forward`` is the headline (issue #16's target: <= 1.15 on CPU), as the fastest of each (on a
  shared machine other load only ever adds time), the medians and the median of back-to-back pairs.
- ``steady state``: the pipeline less its one-off start-up (until the first forward: forking the workers, their
  first slide opens and tiles) and its end (after the last chunk: ``finish``, stopping the workers), i.e. the
  per-tile cost a split much larger than this one approaches.
- The ``pipeline:`` rows split its wall time; ``between batches`` is reading the tiles (no worker) or waiting for
  the workers, plus the batch conversion, the checks and the float16 cast. ``forward`` in the pipeline above
  ``pure forward``: the workers took CPU from the forward.
- ``other load``: CPUs busy with other processes during a measurement (``/proc/stat`` less this process's and
  its reaped workers' CPU time). With a 2-thread forward on 2 cores, one busy core stalls every parallel region:
  forwards then take 3-5x longer. Rows measured under other load say little; compare quiet ones.
- ``separately:``: tiling (once per split, not in the ratio; the line ``with the split's tiling`` adds it) and
  reading every tile as the pipeline's loader does (one thread with workers, else the forward's threads), then
  converting the batches in the main process.
- ``peak RSS``: ``VmHWM`` of this process over the warm-up pipeline run (reset with ``echo 5 >
  /proc/self/clear_refs`` just before it, nothing pre-decoded yet) beside the RSS before it (interpreter, torch,
  backbone, tile layout). The workers are separate processes; their ``VmHWM``, sampled at every chunk write, is
  printed after it (pages shared copy-on-write with this process count in each).
Timings are wall clock: compare rows of one run, not runs.

Seen on the project's 2-core host (quiet: other load <= 0.02 CPUs, efficientnet_lite0 fp32, 136 tiles): pipeline /
pure forward 1.12 (fastest) / 1.13 (medians and pairs) with the run's default on 2 CPUs, no worker: the forward
inside the pipeline as fast as alone, reading ~0.9 ms/tile on 2 threads plus ~0.26 ms/tile of batch conversion
against ~11.8 ms of forward. With 1 worker the same code measured ~1.5: the worker's reads (~1.5 ms/tile on one
core) stall the 2-thread forward by 33-38 %, more than the reads cost serially. Before (per-tile ToTensor +
Normalize in 1 worker): 1.33-1.37. Tiling the 12 demo slides costs ~0.47-0.65 s (3.4-4.8 ms/tile: they hold ~11
tiles each); counted in, the ratio is ~1.4. The forward itself is ~40 % kernel time there (page faults on
activation buffers glibc maps and unmaps per call; ~6,200 minor faults a tile); with ``MALLOC_MMAP_THRESHOLD_``
and ``MALLOC_TRIM_THRESHOLD_`` at 4 GiB it runs ~2x faster and the fixed cost of reading weighs more.

Run: ``python benchmarks/slide_extract.py`` (defaults: 12 demo slides (about 140 tiles), batch 64, workers,
threads and precision as ``evalsuite run`` picks them here (no worker on <= 2 CPUs without a GPU), 5 rounds;
about 1 minute on 2 quiet cores, up to 3 under load).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, machine_line, read_status, reset_peak

DEFAULT_SLIDES = 12  # ~140 tiles: 5 rounds of 2 measurements take ~1 minute on 2 quiet cores
QUIET_CPUS = 0.25  # other load below this is a quiet measurement
HEADER = ("measurement", "median s", "range s", "ms/tile", "/ pure forward", "other load")


# --- machine state -------------------------------------------------------------------------------





def child_pids() -> list[int]:
    """Processes this process's main thread started and that still run (the DataLoader workers)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as handle:
            return [int(pid) for pid in handle.read().split()]
    except OSError:
        return []


class OtherLoad:
    """CPUs used by other processes over a stretch of wall time: the machine's busy time (/proc/stat, steal
    included) less this process's and its reaped children's CPU time."""

    def __enter__(self):
        self.started, self.busy, self.own = time.perf_counter(), self._machine_busy(), self._own()
        return self

    def __exit__(self, *exc_info):
        wall = time.perf_counter() - self.started
        others = (self._machine_busy() - self.busy) - (self._own() - self.own)
        self.cpus = max(0.0, others / wall) if wall > 0 else 0.0

    @staticmethod
    def _machine_busy() -> float:
        try:
            with open("/proc/stat") as handle:
                user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, handle.readline().split()[1:9])
        except (OSError, ValueError):
            return 0.0
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own() -> float:
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system


# --- setup ---------------------------------------------------------------------------------------

def use_benchmark_data_home() -> None:
    """Unless EVALSUITE_DATA_HOME says otherwise, the demo slides are built in a temporary folder named after
    the builder's source (a changed builder builds afresh), not in the user's ~/.cache."""
    import hashlib

    import evalsuite.readers.demo.demo_slides as builder

    digest = hashlib.sha256(Path(builder.__file__).read_bytes()).hexdigest()[:12]
    os.environ.setdefault("EVALSUITE_DATA_HOME",
                          str(Path(tempfile.gettempdir()) / f"evalsuite-bench-data-{os.getuid()}-{digest}"))


def demo_records(count: int):
    """(card, `count` demo slide records evenly spaced over the manifest, how many the demo has)."""
    import numpy as np

    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    card = load_card("demo_slide")
    reader = build_reader(card)
    records = [record for split in card.splits for record in reader.split_records(split)]
    if count > len(records):
        raise SystemExit(f"slide_extract: --slides {count} but the demo has {len(records)} slides")
    chosen = np.unique(np.linspace(0, len(records) - 1, count).round().astype(int))
    return card, [records[i] for i in chosen], len(records)


# --- the measurements ----------------------------------------------------------------------------

class TimedForward:
    """features_of for extract_to_cache: the backbone's pooled features, timed, with the first call's start and
    the last call's end."""

    def __init__(self, backbone):
        self.backbone, self.seconds, self.first_start, self.last_end = backbone, 0.0, None, None

    def __call__(self, images):
        started = time.perf_counter()
        output = self.backbone.pooled_features(images)
        self.last_end = time.perf_counter()
        self.seconds += self.last_end - started
        self.first_start = self.first_start or started
        return output


def time_pipeline(backbone, dataset, layout, root: Path, row_shape, chunk_rows, args, device) -> dict:
    """One extraction of every tile into a new slide cache under `root`, timed by part; the cache is removed."""
    from evalsuite.features.cache import FeatureCache
    from evalsuite.features.extract import extract_to_cache
    from evalsuite.features.slide_features import cache_layout

    cache = FeatureCache(root)
    key = "slide-extract"
    forward = TimedForward(backbone)
    writes = {"seconds": 0.0, "chunks": 0, "last_end": None}
    workers_peak = {}
    baseline = read_status()["VmRSS"]
    reset = reset_peak()
    with OtherLoad() as load:
        started = time.perf_counter()
        writer = cache.start_or_resume(key, (len(dataset), *row_shape), dataset.labels,
                                       {"benchmark": "slide_extract", "model": backbone.name}, chunk_rows, {},
                                       cache_layout(layout, chunk_rows))
        setup = time.perf_counter() - started
        write_chunk = writer.write_chunk

        def timed_write_chunk(index, rows):
            began = time.perf_counter()
            write_chunk(index, rows)
            writes["last_end"] = time.perf_counter()
            writes["seconds"] += writes["last_end"] - began
            writes["chunks"] += 1
            for pid in child_pids():  # the workers are alive until the loop ends
                peak = read_status(pid).get("VmHWM")
                if peak:
                    workers_peak[pid] = max(peak, workers_peak.get(pid, 0.0))

        writer.write_chunk = timed_write_chunk
        forwarded = extract_to_cache(backbone, dataset, writer, device, batch_size=args.batch_size,
                                     num_workers=args.num_workers, precision=args.precision,
                                     description="slide_extract", features_of=forward, show_progress=False,
                                     pad_to_batch=False)  # as a run fills a slide cache
        ended = time.perf_counter()
    peak = read_status()["VmHWM"]
    if forwarded != len(dataset) or not cache.is_complete(key):
        raise SystemExit(f"slide_extract: the pipeline forwarded {forwarded} of {len(dataset)} tiles")
    shutil.rmtree(root, ignore_errors=True)
    total = ended - started
    startup = forward.first_start - started - setup
    tail = ended - writes["last_end"]
    return {"total": total, "setup": setup, "startup": startup, "forward": forward.seconds, "writes": writes["seconds"],
            "chunks": writes["chunks"], "tail": tail,
            "between": total - setup - startup - forward.seconds - writes["seconds"] - tail,
            "steady": total - setup - startup - tail, "load": load.cpus,
            "baseline_mib": baseline, "peak_mib": peak, "peak_reset": reset,
            "workers_peak_mib": sorted(workers_peak.values())}


def time_pure_forward(backbone, decoded, device, precision) -> dict:
    import torch

    from evalsuite.runtime.allocator import reuse_freed_memory
    from evalsuite.runtime.precision import autocast_context

    with OtherLoad() as load:
        started = time.perf_counter()
        # Freed memory reused as extract_to_cache reuses it (runtime/allocator.py): the forward alone, same malloc.
        with reuse_freed_memory(), torch.inference_mode(), autocast_context(device, precision):
            for images in decoded:
                backbone.pooled_features(images)
        seconds = time.perf_counter() - started
    return {"total": seconds, "load": load.cpus}


def run(args) -> None:
    import torch

    from evalsuite.errors import EvalsuiteError
    from evalsuite.features.extract import _memory_format, chunk_aligned_batches
    from evalsuite.features.prepare import chunk_rows_for
    from evalsuite.features.slide_features import cache_layout
    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.transforms import build_transform
    from evalsuite.readers.slides.base import SlideTiles, tile_slides, tiling_of
    from evalsuite.runtime.cpus import usable_cpus, use_threads
    from evalsuite.runtime.precision import autocast_context, resolve_precision

    if not Path("/proc/self/status").is_file():
        raise SystemExit("slide_extract: needs Linux /proc/self/status to read RSS")
    use_benchmark_data_home()
    threads = use_threads(args.threads)  # as `evalsuite run` sets them
    device = torch.device("cpu")
    started = time.perf_counter()
    try:
        card, records, available = demo_records(args.slides)
        backbone = build_backbone(args.model, random_init=args.random_init)
        tiling_started = time.perf_counter()
        layout = tile_slides(records, tiling_of(card), False, args.num_workers, "slide_extract")
        tiling_seconds = time.perf_counter() - tiling_started
    except EvalsuiteError as exc:
        raise SystemExit(f"slide_extract: {exc}") from None
    args.precision = precision = resolve_precision(args.precision, device, backbone.precision)
    dataset = SlideTiles(layout, build_transform(backbone.data_config))
    tiles = len(dataset)
    backbone.model.to(device)
    with torch.inference_mode(), autocast_context(device, precision):
        row_shape = tuple(backbone.pooled_features(dataset.prepare_batch(dataset[0][0].unsqueeze(0))).shape[1:])
    chunk_rows = chunk_rows_for(row_shape, args.batch_size, None)  # as a run sizes them
    bounds = cache_layout(layout, chunk_rows).bounds
    batches = chunk_aligned_batches([(i, a, b) for i, (a, b) in enumerate(bounds)], args.batch_size)
    counts = [int(n) for n in (layout.offsets[1:] - layout.offsets[:-1])]
    print(f"slide_extract: {backbone.label} ({row_shape} features) on {len(records)} of {available} demo slides, "
          f"{tiles} tiles ({min(counts)}-{max(counts)} a slide), batch {args.batch_size} -> {len(batches)} "
          f"chunk-aligned batches of {tiles / len(batches):.1f} tiles on average, {args.num_workers} worker(s), "
          f"{threads} torch thread(s), precision {precision}; set up in {time.perf_counter() - started:.1f} s",
          file=sys.stderr, flush=True)

    parent = Path(args.tmp_dir) if args.tmp_dir else Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="evalsuite-slide-extract-", dir=parent))
    results = {"pure": [], "full": [], "pipeline": []}
    try:
        # Warm-up and the memory measurement: one whole pipeline run before anything is pre-decoded.
        warm = time_pipeline(backbone, dataset, layout, workdir / "warm-up", row_shape, chunk_rows, args, device)
        print(f"  warm-up pipeline run: {warm['total']:.2f} s, peak RSS {warm['peak_mib']:.0f} MiB",
              file=sys.stderr, flush=True)

        # Read and transform every tile (timed, with the one thread torch gives each DataLoader worker).
        memory_format = _memory_format(backbone.model)
        decode_threads = 1 if args.num_workers > 0 else threads
        torch.set_num_threads(decode_threads)
        decode_started = time.perf_counter()
        images = [tile for batch in batches for tile, _slide in dataset.__getitems__(batch)]  # as the loader fetches
        decode_seconds = time.perf_counter() - decode_started
        torch.set_num_threads(threads)
        prepare_started = time.perf_counter()  # the batch conversion, in the main process as the pipeline does it
        decoded = [dataset.prepare_batch(torch.stack(images[batch[0]:batch[-1] + 1])).contiguous(
            memory_format=memory_format) for batch in batches]
        prepare_seconds = time.perf_counter() - prepare_started
        full_batches = []
        if args.full_batches:
            stacked = dataset.prepare_batch(torch.stack(images))
            full_batches = [stacked[i:i + args.batch_size].contiguous(memory_format=memory_format)
                            for i in range(0, tiles, args.batch_size)]
            del stacked
            with torch.inference_mode(), autocast_context(device, precision):  # the full batches' shapes are new
                for batch in {tuple(batch.shape): batch for batch in full_batches}.values():
                    backbone.pooled_features(batch)
        del images

        kinds = ("pure", "pipeline", "full") if args.full_batches else ("pure", "pipeline")
        for number in range(args.rounds):
            # Rotate the order, so a slow stretch of a shared machine hits every measurement alike.
            for kind in kinds[number % len(kinds):] + kinds[:number % len(kinds)]:
                if kind == "pipeline":
                    results[kind].append(time_pipeline(backbone, dataset, layout, workdir / f"round-{number}",
                                                       row_shape, chunk_rows, args, device))
                else:
                    results[kind].append(time_pure_forward(backbone, decoded if kind == "pure" else full_batches,
                                                           device, precision))
            print(f"  round {number + 1}/{args.rounds}: " + ", ".join(
                f"{kind} {results[kind][-1]['total']:.2f} s (other load {results[kind][-1]['load']:.2f} CPUs)"
                for kind in kinds), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(args, results, warm, tiles, len(records), threads, decode_threads, decode_seconds, prepare_seconds,
           tiling_seconds, usable_cpus(), device)


def report(args, results, warm, tiles, slides, threads, decode_threads, decode_seconds, prepare_seconds,
           tiling_seconds, cpus, device) -> None:
    median = statistics.median
    pure, full, pipelines = results["pure"], results["full"], results["pipeline"]
    pure_fast, pure_median = min(p["total"] for p in pure), median(p["total"] for p in pure)

    def row(name, runs, part="total", load=True):
        values = [run[part] for run in runs] if isinstance(runs, list) else [runs]
        middle = median(values)
        spread = f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else "-"
        loads = f"{median(run['load'] for run in runs):.2f}" if load and isinstance(runs, list) else "-"
        return [name, f"{middle:.3f}", spread, f"{1000 * middle / tiles:.2f}", f"{middle / pure_median:.3f}", loads]

    table = [row("pure forward (pre-decoded, the pipeline's batches)", pure),
             *([row(f"pure forward, full batches of {args.batch_size} across slides", full)] if full else []),
             row("full pipeline (extract_to_cache, slide cache)", pipelines),
             row("  pipeline: cache setup", pipelines, "setup", False),
             row("  pipeline: start-up to the first forward", pipelines, "startup", False),
             row("  pipeline: forward", pipelines, "forward", False),
             row(f"  pipeline: chunk writes ({pipelines[0]['chunks']})", pipelines, "writes", False),
             row("  pipeline: between batches (reads/waits, conversion, checks)", pipelines, "between", False),
             row("  pipeline: after the last chunk (finish, workers stop)", pipelines, "tail", False),
             row(f"separately: tiling {slides} slides (tissue detection)", tiling_seconds),
             row(f"separately: read tiles (+ PIL steps), 1 process, {decode_threads} thread(s)", decode_seconds),
             row(f"separately: uint8 batches -> model input, {threads} thread(s)", prepare_seconds)]
    print(machine_line(device))
    print(format_table(HEADER, table, left=1))
    print()
    totals = [p["total"] for p in pipelines]
    paired = [p["total"] / q["total"] for p, q in zip(pipelines, pure)]
    print(f"pipeline / pure forward: {min(totals) / pure_fast:.3f} (fastest of {args.rounds} each), "
          f"{median(totals) / pure_median:.3f} (medians), {median(paired):.3f} (median of the {args.rounds} "
          f"back-to-back pairs: {', '.join(f'{r:.3f}' for r in paired)}); issue #16 target <= 1.15 on CPU")
    print(f"with the split's tiling (tissue detection, once per split, outside the rows above) / pure forward: "
          f"{(min(totals) + tiling_seconds) / pure_fast:.3f} (fastest): the demo slides hold ~11 tiles each, real "
          f"ones thousands, so there tiling weighs far less")
    print(f"steady state (pipeline less its one-off start-up and end) / pure forward: "
          f"{min(p['steady'] for p in pipelines) / pure_fast:.3f} (fastest): the per-tile cost a split much larger "
          f"than {tiles} tiles approaches")
    inside = [p["forward"] for p in pipelines]
    print(f"forward inside the pipeline / pure forward: {min(inside) / pure_fast:.3f} (fastest), "
          f"{median(inside) / pure_median:.3f} (medians); above 1: workers (or other load) took CPU from the forward")
    if full:
        print(f"slide-bounded batches / full batches of {args.batch_size}, pure forward: "
              f"{pure_fast / min(f['total'] for f in full):.3f} (fastest)")
    decode_ms, forward_ms = 1000 * (decode_seconds + prepare_seconds) / tiles, 1000 * pure_fast / tiles
    print(f"per tile: read + transform {decode_ms:.2f} ms ({decode_threads} thread(s)), forward {forward_ms:.2f} ms "
          f"({threads} thread(s), fastest): {decode_ms / forward_ms:.2f} of the forward; {args.num_workers} worker(s) "
          f"+ {threads} forward thread(s) on {cpus} usable CPU(s)")
    fastest_pure = min(pure, key=lambda p: p["total"])
    fastest_pipeline = min(pipelines, key=lambda p: p["total"])
    quiet = max(fastest_pure["load"], fastest_pipeline["load"]) < QUIET_CPUS
    print(f"other load: {fastest_pure['load']:.2f} CPUs during the fastest pure forward, "
          f"{fastest_pipeline['load']:.2f} during the fastest pipeline"
          + ("" if quiet else f" - above {QUIET_CPUS}: the machine was busy, the ratios above are unreliable; "
                              f"rerun with more --rounds or on a quiet machine"))
    print(f"tiles/s: pipeline {tiles / min(totals):.1f}, pure forward {tiles / pure_fast:.1f} (fastest)")
    workers = warm["workers_peak_mib"]
    print(f"peak RSS of the pipeline run: {warm['peak_mib']:.0f} MiB (VmHWM; {warm['baseline_mib']:.0f} MiB before "
          f"it, +{warm['peak_mib'] - warm['baseline_mib']:.0f} MiB)"
          + ("" if warm["peak_reset"] else " [VmHWM could not be reset: the peak includes the setup]")
          + (f"; DataLoader workers: {', '.join(f'{w:.0f}' for w in workers)} MiB each (VmHWM)" if workers else ""))


def parse_args(argv=None):
    from evalsuite.config import DEFAULT_MODEL
    from evalsuite.runtime.cpus import default_num_workers

    parser = argparse.ArgumentParser(
        description="Tiles/s of slide extraction through the full evalsuite pipeline (OpenSlide reads in DataLoader "
                    "workers, transform, forward, float16 chunk writes into a slide FeatureCache) vs the pure "
                    "backbone forward on the same pre-decoded tiles; the offline demo slides.")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="registry name or timm architecture, built by build_backbone (default: %(default)s)")
    parser.add_argument("--random-init", action="store_true",
                        help="seeded random weights instead of the model's own (same timing; e.g. for test_vit)")
    parser.add_argument("--slides", type=int, default=DEFAULT_SLIDES,
                        help="demo slides, evenly spaced over the manifest (default: %(default)s, about 140 tiles; "
                             "the demo has 52, about 620 tiles)")
    parser.add_argument("--batch-size", type=int, default=16, help="extraction batch (default: 16, as a run on the "
                        "CPU; the demo slides' batches hold 10-14 tiles, one slide each, whatever the size)")
    parser.add_argument("--num-workers", type=int, default=default_num_workers("cpu"),
                        help=f"DataLoader workers (default: {default_num_workers('cpu')}, as a CPU run on this "
                             f"machine; 0: the main process reads the tiles on the forward's threads)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads (default 0: as a run, every usable CPU)")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                        help="compute precision (default: auto, resolved as a run resolves it for the model here)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each measurement (default: 5)")
    parser.add_argument("--full-batches", action="store_true",
                        help="also time the pure forward in batches of exactly --batch-size across slides (adds "
                             "about half to the run)")
    parser.add_argument("--tmp-dir", default=None, help="parent folder of the temporary caches (default: $TMPDIR)")
    args = parser.parse_args(argv)
    if args.slides < 1:
        parser.error("--slides must be >= 1")
    if args.batch_size < 1 or args.rounds < 1:
        parser.error("--batch-size and --rounds must be >= 1")
    if args.num_workers < 0 or args.threads < 0:
        parser.error("--num-workers and --threads must be >= 0")
    return args


if __name__ == "__main__":
    run(parse_args())
