"""Tiles per second of slide-level extraction through the full pipeline vs the pure backbone forward (issue #16).

What is measured
----------------
The offline demo slides (``evalsuite.readers.demo_slides.demo_slides_folder()``, built on first use under
``EVALSUITE_DATA_HOME``; ``--slides N`` takes N of them, evenly spaced over the manifest so both the SVS-like and
the generic-TIFF files are in) are tiled once as a run tiles them (``evalsuite.readers.slides.tile_slides`` with
the ``demo_slide`` card's tiling: tissue detection in DataLoader workers). A backbone (``--model``, default
``efficientnet_lite0_imagenet``, the run's default model, built by
``evalsuite.models.backbones.build_backbone``; ``--random-init`` for seeded random weights, which do not change
the timing) then embeds every tile, two ways, alternately, ``--rounds`` times:

- ``full pipeline``: ``FeatureCache.start_or_resume`` with the slide ``CacheLayout``
  (``evalsuite.features.slide_features.cache_layout``: chunks that never cross a slide, the slide table in the
  manifest, ``coords_level0.npy``) and ``evalsuite.features.extract.extract_to_cache`` exactly as a run calls it
  on a ``SlideTiles`` dataset: ``--num-workers`` DataLoader workers, each reading tiles with OpenSlide
  (``read_region`` on its own cached handles) and transforming them, the forward in channels-last memory format
  (for a CNN) under ``torch.inference_mode()`` and the compute precision, the NaN / float16-range checks, the
  float16 chunk buffer, and per chunk (= per slide here) a pwrite, fsync, sha256 and atomic manifest update;
  then ``finish``.
- ``pure forward``: ``backbone.pooled_features`` on the same batches (the chunk-aligned batches
  ``extract_to_cache`` makes: at most ``--batch-size`` tiles, never across a slide), already read, transformed,
  stacked and converted to the same memory format in RAM, under the same precision; nothing else.
A third, ``pure forward, full batches``, runs the same tiles in batches of exactly ``--batch-size`` across slide
boundaries: what the forward would cost if slide chunks did not cut batches short.

How to read it
--------------
- ``pipeline / pure forward`` is the headline (issue #16's target: <= 1.15 on CPU), given as the ratio of the
  medians, the fastest of each (other load only ever adds time) and the median of the back-to-back pairs.
- The ``pipeline:`` rows split its wall time: cache setup, forward (timed inside the pipeline through
  ``extract_to_cache``'s ``features_of``), chunk writes (pwrite + fsync + sha256 + manifest) and the rest (waiting
  for the workers, the checks and float16 conversion, ``finish``). ``forward`` above ``pure forward`` means the
  workers' decoding took cores from the forward.
- The ``separately:`` rows: tiling (tissue detection, once per split, not in the ratio), reading + transforming
  every tile in one process with one torch thread (what the workers do), the DataLoader's start-up to its first
  batch (paid once per split, however fast the workers are).
- ``peak RSS``: ``VmHWM`` of this process over one pipeline run (the untimed warm-up run, before anything is
  pre-decoded, after ``echo 5 > /proc/self/clear_refs`` reset the peak), beside the RSS before it (interpreter,
  torch, backbone, tile layout); the DataLoader workers are separate processes, their own ``VmHWM`` is sampled
  at every chunk write (shared copy-on-write pages count in each).
The slide files are in the page cache after the warm-up run (a warm run); cold reads from a network file system
would add to the pipeline's side. Timings are wall clock on whatever else the machine runs: compare rows of one
run, not runs.

Run: ``python benchmarks/slide_extract.py`` (defaults: every demo slide, batch 64, workers, threads and precision
as ``evalsuite run`` picks them here, 3 rounds; about 2-3 minutes on 2 cores).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, machine_line

DEFAULT_SLIDES = 10  # ~115 tiles: five rounds of three measurements stay within ~3 minutes on 2 busy cores
HEADER = ("measurement", "median s", "range s", "ms/tile", "/ pure forward")


# --- memory --------------------------------------------------------------------------------------

def read_status(pid="self") -> dict:
    """VmRSS and VmHWM of a process in MiB (empty when it has gone)."""
    values = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    values[name] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return values


def reset_peak() -> bool:
    """VmHWM back to the current RSS; False when the kernel refuses (the peak then includes the setup)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def child_pids() -> list[int]:
    """Processes this process's main thread started and that still run (the DataLoader workers)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as handle:
            return [int(pid) for pid in handle.read().split()]
    except OSError:
        return []


# --- setup ---------------------------------------------------------------------------------------

def demo_records(count: int | None):
    """(card, the first `count` demo slide records evenly spaced over the manifest, how many there are)."""
    import numpy as np

    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    card = load_card("demo_slide")
    reader = build_reader(card)
    records = [record for split in card.splits for record in reader.split_records(split)]
    if count is None or count >= len(records):
        if count is not None and count > len(records):
            raise SystemExit(f"slide_extract: --slides {count} but the demo has {len(records)} slides")
        return card, records, len(records)
    chosen = np.unique(np.linspace(0, len(records) - 1, count).round().astype(int))
    return card, [records[i] for i in chosen], len(records)


def use_benchmark_data_home() -> None:
    """Unless EVALSUITE_DATA_HOME says otherwise, the demo slides are built in a temporary folder named after
    the builder's source (a changed builder builds afresh), not in the user's ~/.cache."""
    import hashlib

    import evalsuite.readers.demo_slides as builder

    digest = hashlib.sha256(Path(builder.__file__).read_bytes()).hexdigest()[:12]
    os.environ.setdefault("EVALSUITE_DATA_HOME",
                          str(Path(tempfile.gettempdir()) / f"evalsuite-bench-data-{os.getuid()}-{digest}"))


class TimedForward:
    """features_of for extract_to_cache: the backbone's pooled features, with the time they took."""

    def __init__(self, backbone):
        self.backbone, self.seconds = backbone, 0.0

    def __call__(self, images):
        started = time.perf_counter()
        output = self.backbone.pooled_features(images)
        self.seconds += time.perf_counter() - started
        return output


def time_pipeline(backbone, dataset, layout, root: Path, row_shape, chunk_rows, args, device) -> dict:
    """One extraction of every tile into a new slide cache under `root`, timed by part; the cache is removed."""
    from evalsuite.features.cache import FeatureCache
    from evalsuite.features.extract import extract_to_cache
    from evalsuite.features.slide_features import cache_layout

    cache = FeatureCache(root)
    key = "slide-extract"
    forward = TimedForward(backbone)
    writes = {"seconds": 0.0, "chunks": 0}
    workers_peak = {}
    baseline = read_status()["VmRSS"]
    reset = reset_peak()
    started = time.perf_counter()
    writer = cache.start_or_resume(key, (len(dataset), *row_shape), dataset.labels,
                                   {"benchmark": "slide_extract", "model": backbone.name}, chunk_rows, {},
                                   cache_layout(layout, chunk_rows))
    setup = time.perf_counter() - started
    write_chunk = writer.write_chunk

    def timed_write_chunk(index, rows):
        began = time.perf_counter()
        write_chunk(index, rows)
        writes["seconds"] += time.perf_counter() - began
        writes["chunks"] += 1
        for pid in child_pids():  # the workers are alive until the loop ends
            peak = read_status(pid).get("VmHWM")
            if peak:
                workers_peak[pid] = max(peak, workers_peak.get(pid, 0.0))

    writer.write_chunk = timed_write_chunk
    forwarded = extract_to_cache(backbone, dataset, writer, device, batch_size=args.batch_size,
                                 num_workers=args.num_workers, precision=args.precision,
                                 description="slide_extract", features_of=forward, show_progress=False)
    total = time.perf_counter() - started
    peak = read_status()["VmHWM"]
    if forwarded != len(dataset) or not cache.is_complete(key):
        raise SystemExit(f"slide_extract: the pipeline forwarded {forwarded} of {len(dataset)} tiles")
    shutil.rmtree(root, ignore_errors=True)
    return {"total": total, "setup": setup, "forward": forward.seconds, "writes": writes["seconds"],
            "chunks": writes["chunks"], "rest": total - setup - forward.seconds - writes["seconds"],
            "baseline_mib": baseline, "peak_mib": peak, "peak_reset": reset,
            "workers_peak_mib": sorted(workers_peak.values())}


def time_first_batch(dataset, batches, num_workers: int, device) -> float:
    """DataLoader start-up to the first batch, built as extract_to_cache builds it."""
    import torch

    from evalsuite.runtime.devices import loader_kwargs

    started = time.perf_counter()
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=batches, **loader_kwargs(device, num_workers))
    iterator = iter(loader)
    next(iterator)
    seconds = time.perf_counter() - started
    del iterator  # stops the workers
    return seconds


def time_pure_forward(backbone, decoded, device, precision) -> float:
    import torch

    from evalsuite.runtime.precision import autocast_context

    started = time.perf_counter()
    with torch.inference_mode(), autocast_context(device, precision):
        for images in decoded:
            backbone.pooled_features(images)
    return time.perf_counter() - started


def run(args) -> None:
    import torch

    from evalsuite.errors import EvalsuiteError
    from evalsuite.features.extract import _memory_format, chunk_aligned_batches
    from evalsuite.features.prepare import chunk_rows_for
    from evalsuite.features.slide_features import cache_layout
    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.transforms import build_transform
    from evalsuite.readers.slides import SlideTiles, tile_slides, tiling_of
    from evalsuite.runtime.cpus import use_threads, usable_cpus
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
        row_shape = tuple(backbone.pooled_features(dataset[0][0].unsqueeze(0)).shape[1:])
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
    pure, full, pipelines = [], [], []
    try:
        # Warm-up and the memory measurement: one whole pipeline run before anything is pre-decoded, so its peak
        # is a run's (first slide opens, kernels, allocator); it also puts the slide files in the page cache.
        warm = time_pipeline(backbone, dataset, layout, workdir / "warm-up", row_shape, chunk_rows, args, device)
        print(f"  warm-up pipeline run: {warm['total']:.2f} s, peak RSS {warm['peak_mib']:.0f} MiB",
              file=sys.stderr, flush=True)

        # Pre-read and transform every tile (timed, with the one thread torch gives each DataLoader worker).
        memory_format = _memory_format(backbone.model)
        torch.set_num_threads(1 if args.num_workers > 0 else threads)
        decode_started = time.perf_counter()
        images = [dataset[i][0] for i in range(tiles)]
        decode_seconds = time.perf_counter() - decode_started
        torch.set_num_threads(threads)
        decoded = [torch.stack([images[i] for i in batch]).contiguous(memory_format=memory_format)
                   for batch in batches]
        stacked = torch.stack(images)
        del images
        full_batches = [stacked[i:i + args.batch_size].contiguous(memory_format=memory_format)
                        for i in range(0, tiles, args.batch_size)]
        del stacked
        with torch.inference_mode(), autocast_context(device, precision):  # the full batches' shapes are new
            for images in {tuple(batch.shape): batch for batch in full_batches}.values():
                backbone.pooled_features(images)

        for number in range(args.rounds):
            # Rotate which goes first, so a slow stretch of a shared machine hits every measurement alike.
            order = ("pure", "pipeline", "full")[number % 3:] + ("pure", "pipeline", "full")[:number % 3]
            for which in order:
                if which == "pure":
                    pure.append(time_pure_forward(backbone, decoded, device, precision))
                elif which == "full":
                    full.append(time_pure_forward(backbone, full_batches, device, precision))
                else:
                    pipelines.append(time_pipeline(backbone, dataset, layout, workdir / f"round-{number}",
                                                   row_shape, chunk_rows, args, device))
            print(f"  round {number + 1}/{args.rounds}: pure forward {pure[-1]:.2f} s, full batches {full[-1]:.2f} s, "
                  f"pipeline {pipelines[-1]['total']:.2f} s", file=sys.stderr, flush=True)
        first_batch = [time_first_batch(dataset, batches, args.num_workers, device) for _ in range(min(3, args.rounds))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    median = statistics.median
    pure_s = median(pure)

    def row(name, values):
        values = values if isinstance(values, list) else [values]
        middle = median(values)
        spread = f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else "-"
        return [name, f"{middle:.3f}", spread, f"{1000 * middle / tiles:.2f}", f"{middle / pure_s:.3f}"]

    totals = [p["total"] for p in pipelines]
    table = [row("pure forward (pre-decoded, the pipeline's batches)", pure),
             row(f"pure forward, full batches of {args.batch_size} across slides", full),
             row("full pipeline (extract_to_cache, slide cache)", totals),
             row("  pipeline: cache setup", [p["setup"] for p in pipelines]),
             row("  pipeline: forward", [p["forward"] for p in pipelines]),
             row(f"  pipeline: chunk writes ({pipelines[0]['chunks']})", [p["writes"] for p in pipelines]),
             row("  pipeline: rest (loader wait, checks, fp16, finish)", [p["rest"] for p in pipelines]),
             row(f"separately: tiling {len(records)} slides (tissue detection)", tiling_seconds),
             row(f"separately: read + transform, 1 process, {1 if args.num_workers > 0 else threads} thread(s)",
                 decode_seconds),
             row("separately: loader start-up to first batch", first_batch)]
    print(machine_line(device))
    print(format_table(HEADER, table, left=1))
    print()
    paired = [total / seconds for total, seconds in zip(totals, pure)]
    print(f"pipeline / pure forward: {min(totals) / min(pure):.3f} (fastest of {args.rounds} each), "
          f"{median(totals) / pure_s:.3f} (medians), {median(paired):.3f} (median of the {args.rounds} back-to-back "
          f"pairs: {', '.join(f'{r:.3f}' for r in paired)}); issue #16 target <= 1.15 on CPU")
    steady = (min(totals) - min(first_batch)) / min(pure)
    print(f"pipeline less its one-off loader start-up / pure forward: {steady:.3f} (fastest): the per-tile "
          f"overhead, what remains on a split much larger than {tiles} tiles")
    print(f"pipeline / pure forward in full batches: {min(totals) / min(full):.3f} (fastest); slide-bounded "
          f"batches / full batches, pure forward: {min(pure) / min(full):.3f} (fastest)")
    inside = [p["forward"] for p in pipelines]
    print(f"forward inside the pipeline / pure forward: {min(inside) / min(pure):.3f} (fastest), "
          f"{median(inside) / pure_s:.3f} (medians); above 1: the workers' reading and transforming took cores "
          f"from the forward")
    decode_ms, forward_ms = 1000 * decode_seconds / tiles, 1000 * min(pure) / tiles
    print(f"per tile: read + transform {decode_ms:.2f} ms (1 thread), forward {forward_ms:.2f} ms ({threads} "
          f"thread(s)): {decode_ms / forward_ms:.2f} of the forward; {args.num_workers} worker(s) + {threads} forward "
          f"thread(s) on {usable_cpus()} usable CPU(s)")
    workers = warm["workers_peak_mib"]
    print(f"tiles/s: pipeline {tiles / min(totals):.1f}, pure forward {tiles / min(pure):.1f} (fastest), pipeline "
          f"{tiles / median(totals):.1f}, pure forward {tiles / pure_s:.1f} (medians)")
    print(f"peak RSS of the pipeline run: {warm['peak_mib']:.0f} MiB (VmHWM; {warm['baseline_mib']:.0f} MiB before "
          f"it, so +{warm['peak_mib'] - warm['baseline_mib']:.0f} MiB)"
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
                        help="demo slides to use, evenly spaced over the manifest (default: %(default)s, about 140 "
                             "tiles; the demo has 52, about 620 tiles)")
    parser.add_argument("--batch-size", type=int, default=64, help="extraction batch (default: 64, as a run)")
    parser.add_argument("--num-workers", type=int, default=default_num_workers(),
                        help=f"DataLoader workers (default: {default_num_workers()}, as a run on this machine)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads (default 0: as a run, every usable CPU)")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                        help="compute precision (default: auto, resolved as a run resolves it for the model here)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each measurement (default: 5)")
    parser.add_argument("--tmp-dir", default=None, help="parent folder of the temporary caches (default: $TMPDIR)")
    args = parser.parse_args(argv)
    if args.slides is not None and args.slides < 1:
        parser.error("--slides must be >= 1")
    if args.batch_size < 1 or args.rounds < 1:
        parser.error("--batch-size and --rounds must be >= 1")
    if args.num_workers < 0 or args.threads < 0:
        parser.error("--num-workers and --threads must be >= 0")
    return args


if __name__ == "__main__":
    run(parse_args())
