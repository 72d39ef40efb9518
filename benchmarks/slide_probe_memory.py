"""Peak RSS of slide-probe fits on a memory-mapped slide cache as the number of slides grows (issue #16).

What is measured
----------------
For every slide count (``--slides``, default 50 200 800) the script writes one synthetic slide cache: a float16
``features.npy`` [tiles, ``--dim``] grouped by slide, as ``evalsuite.features.slide_features`` lays a slide split
out, each slide holding a seeded random number of tiles between half and one and a half times ``--tiles`` (real
slides differ in size; the mean is ``--tiles``), slide i labelled i % 2 with its tiles' features shifted by
the label on a few dimensions (so the probe has something to learn). Then, for each probe (``--probes``,
default abmil and meanpool, each with its recipe's parameters from ``probes/<name>.yaml`` but ``--epochs``
epochs) a fresh subprocess of this script opens the cache as a memory-mapped run does (``NpyRows``: positioned
reads, nothing mapped, plus ``FeatureCache.open``'s finiteness scan of every row), wraps it in
``evalsuite.features.bags.SlideBags`` with the slide offsets, and fits the probe with the split as both train and
val split, then predicts it (a run scores its test split the same way).

In the subprocess, after the imports and a warm-up fit of the same probe on 8 tiny in-RAM slides (autograd,
the optimiser and the metric code load outside the measurement), the script records the RSS (``VmRSS``), resets
the peak (``echo 5 > /proc/self/clear_refs`` resets ``VmHWM``), opens, fits and predicts, and reads the peak
(``VmHWM``). ``rise`` = peak - RSS before: what the fit added.

Before each fit the cache file is flushed and dropped from the page cache (``posix_fadvise(DONTNEED)``) and,
unless ``--no-reread``, read once front to back by this (the parent) process, so the fit finds it in the page
cache as a run finds a cache it has just written or read, in large readahead folios (a memory map would map a
whole folio on one row's fault, see tests/features/test_fp16_guard_and_memory.py; positioned reads copy only the
rows asked for). Page-cache pages are not the fit process's RSS either way.

How to read it
--------------
- ``rise`` should not grow with the slide count: a probe holds at most a batch of bags (ABMIL: 32 training bags of
  at most 1000 sampled tiles, or an evaluation group of at most 16384 padded tiles, upcast to float32, plus the
  activations; mean pool: one bag at a time, then [slides, D] slide vectors), never the split. The headline is
  the rise at the largest count over the rise at the smallest, next to the ratio of the cache sizes; the next line
  gives the rise's growth between consecutive sizes next to the cache's (a probe holding the cache: as much).
- With glibc's default (dynamic) mmap threshold a fit's peak also holds freed blocks the allocator kept: the
  threshold rises to the size of each large block freed, and blocks under it (up to 32 MiB) are then served from
  and returned to the heap, which grows with the number and mix of batches until it levels off. So a small split
  (few batches) shows a lower rise than a large one, and the rise flattens as the splits grow (ABMIL at D=384:
  ~170-190 MiB at 50 slides, ~250-270 at 200, ~280 at 800, ~275 at 2000). ``--mmap-threshold 131072`` fixes the
  threshold at glibc's initial value, so freed blocks go back at once and the peak follows what is live (ABMIL at
  D=384: ~116-120 MiB at 50 and at 800 slides, fits ~1.7x slower from the extra page faults).
- ABMIL's training and evaluation loops build the next padded batch while the previous one is still referenced
  (the loop variables), so from the second batch on they hold two (at D=1536, a 16384-tile evaluation group is
  ~95 MiB): another constant, but a split of a single group shows only one.
- ``rise / cache`` falls as the cache grows when the rise is flat.
Absolute numbers depend on the torch build and the allocator; compare rows of one run.

Run: ``python benchmarks/slide_probe_memory.py`` (defaults: 50 200 800 slides x 500 tiles x 384 dims, caches of
about 19, 73 and 288 MiB, 2 epochs; about 1.5 minutes on 2 cores). The temporary folder needs the largest cache's
size free; each cache is removed after its fits.
"""

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, machine_line, read_status, reset_peak

MIB = 1024**2
SEED = 16
SIGNAL_DIMS = 8  # dimensions shifted by a slide's label
HEADER = ("slides", "tiles", "cache MiB", "probe", "baseline MiB", "peak MiB", "rise MiB", "rise / cache", "fit s")


# --- the synthetic cache (parent process) --------------------------------------------------------

def tile_counts(slides: int, tiles: int):
    """Seeded tiles per slide, uniform in [tiles / 2, 3 tiles / 2] (at least 1)."""
    import numpy as np

    rng = np.random.default_rng([SEED, slides])
    return rng.integers(max(1, tiles // 2), max(1, tiles // 2) + tiles + 1, size=slides)


def write_cache(folder: Path, slides: int, tiles: int, dim: int) -> Path:
    """folder/features.npy (float16 [tiles, dim], grouped by slide), offsets.npy and labels.npy; slide by slide."""
    import numpy as np

    folder.mkdir(parents=True)
    counts = tile_counts(slides, tiles)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    labels = (np.arange(slides) % 2).astype(np.int64)
    features = np.lib.format.open_memmap(folder / "features.npy", mode="w+", dtype=np.float16,
                                         shape=(int(offsets[-1]), dim))
    for start in range(0, slides, 64):
        stop = min(start + 64, slides)
        rng = np.random.default_rng([SEED, slides, start])
        block = rng.standard_normal((int(offsets[stop] - offsets[start]), dim), dtype=np.float32)
        slide_of_row = np.repeat(np.arange(start, stop), counts[start:stop])
        block[:, :SIGNAL_DIMS] += 0.5 * labels[slide_of_row, None]
        features[offsets[start]:offsets[stop]] = block.astype(np.float16)
    features.flush()
    del features
    np.save(folder / "offsets.npy", offsets)
    np.save(folder / "labels.npy", labels)
    return folder / "features.npy"


def drop_from_page_cache(path: Path, reread: bool) -> None:
    """Flush the file and drop its pages; then (reread) read it front to back, as a run's earlier reads leave it."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        while reread and os.read(descriptor, 16 * MIB):
            pass
    finally:
        os.close(descriptor)


# --- one measured fit (fresh subprocess) ---------------------------------------------------------





def make_probe(name: str, epochs: int):
    """The recipe's probe (probes/<name>.yaml) with `epochs` epochs, on the CPU."""
    from evalsuite.probes import PROBES
    from evalsuite.probes.recipes import load_recipe

    recipe = load_recipe(name)
    return PROBES[recipe.probe](num_classes=2, **{**recipe.params, "epochs": epochs}, device="cpu", seed=0)


def worker_fit(args) -> dict:
    import numpy as np

    from evalsuite.features.bags import SlideBags
    from evalsuite.features.cache_checks import first_non_finite_row
    from evalsuite.storage.npy_rows import NpyRows

    folder = Path(args.path).parent
    offsets, labels = np.load(folder / "offsets.npy"), np.load(folder / "labels.npy")
    # Warm-up on 8 tiny slides in RAM: the same code paths load (and allocate their first pools) outside the peak.
    rng = np.random.default_rng(0)
    small = SlideBags(rng.standard_normal((8 * 20, args.dim)).astype(np.float16), np.arange(0, 8 * 20 + 1, 20))
    small_labels = np.arange(8) % 2
    make_probe(args.probe, 1).fit(small, small_labels, small, small_labels).predict_proba(small)
    baseline = read_status()
    reset = reset_peak()
    started = time.perf_counter()
    features = NpyRows(Path(args.path))
    bad = first_non_finite_row(features)  # FeatureCache.open scans every row once
    bags = SlideBags(features, offsets)
    probe = make_probe(args.probe, args.epochs).fit(bags, labels, bags, labels)
    probabilities = probe.predict_proba(bags)
    seconds = time.perf_counter() - started
    end = read_status()
    accuracy = float(((probabilities[:, 1] > 0.5) == labels).mean())
    return {"baseline_mib": baseline["VmRSS"], "peak_mib": end["VmHWM"], "end": end, "peak_reset": reset,
            "seconds": seconds, "bad_row": bad, "accuracy": accuracy}


def spawn_fit(args, path: Path, probe: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "fit", "--path", str(path), "--probe", probe,
               "--epochs", str(args.epochs), "--dim", str(args.dim)]
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1",
           **({"MALLOC_MMAP_THRESHOLD_": str(args.mmap_threshold)} if args.mmap_threshold is not None else {})}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"slide_probe_memory: the {probe} fit on {path} failed (exit {done.returncode})")
    return json.loads(results[-1][len("RESULT "):])


# --- the driver ----------------------------------------------------------------------------------

def run(args) -> None:
    import numpy as np

    if not Path("/proc/self/status").is_file():
        raise SystemExit("slide_probe_memory: needs Linux /proc/self/status to read RSS")
    if args.worker:
        print("RESULT " + json.dumps(worker_fit(args), default=float), flush=True)
        return
    sizes = sorted(set(args.slides))
    need = int(tile_counts(sizes[-1], args.tiles).sum()) * args.dim * 2
    parent = Path(args.tmp_dir) if args.tmp_dir else Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if need * 1.05 > free:
        raise SystemExit(f"slide_probe_memory: the largest cache needs {need / MIB:.0f} MiB but {parent} has "
                         f"{free / MIB:.0f} MiB free; pass fewer --slides or --tmp-dir on a larger disk")
    workdir = Path(tempfile.mkdtemp(prefix="evalsuite-slide-probe-memory-", dir=parent))
    print(f"slide_probe_memory: {sizes} slides x ~{args.tiles} tiles x {args.dim} dims float16, probes "
          f"{', '.join(args.probes)} ({args.epochs} epoch(s)), page cache "
          f"{'dropped then re-read' if args.reread else 'dropped'} before each fit, glibc mmap threshold "
          f"{'dynamic (the default)' if args.mmap_threshold is None else f'fixed at {args.mmap_threshold} bytes'}; "
          f"work folder {workdir}",
          file=sys.stderr, flush=True)
    rows, results, notes = [], {}, []
    try:
        for slides in sizes:
            started = time.perf_counter()
            path = write_cache(workdir / f"slides-{slides}", slides, args.tiles, args.dim)
            tiles = len(np.load(path, mmap_mode="r"))
            cache_mib = path.stat().st_size / MIB
            print(f"  {slides} slides: {tiles} tiles, {cache_mib:.0f} MiB written in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
            for probe in args.probes:
                drop_from_page_cache(path, args.reread)
                fit = spawn_fit(args, path, probe)
                if fit["bad_row"] is not None:
                    raise SystemExit(f"slide_probe_memory: the finiteness scan flagged row {fit['bad_row']} of {path}")
                rise = fit["peak_mib"] - fit["baseline_mib"]
                results[(slides, probe)] = (rise, cache_mib)
                print(f"  {slides} slides, {probe}: fit + predict {fit['seconds']:.1f} s, rise {rise:.0f} MiB, "
                      f"train accuracy {fit['accuracy']:.2f}", file=sys.stderr, flush=True)
                rows.append([slides, tiles, f"{cache_mib:.1f}", probe, f"{fit['baseline_mib']:.0f}",
                             f"{fit['peak_mib']:.0f}", f"{rise:.1f}", f"{rise / cache_mib:.3f}",
                             f"{fit['seconds']:.1f}"])
                if not fit["peak_reset"]:
                    notes.append(f"{slides} slides {probe}: VmHWM could not be reset; the peak includes the setup")
            shutil.rmtree(path.parent, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(machine_line())
    print(format_table(HEADER, rows, left=0))
    print()
    small, large = sizes[0], sizes[-1]
    cache_ratio = results[(large, args.probes[0])][1] / results[(small, args.probes[0])][1]
    ratios = ", ".join(f"{probe} {results[(large, probe)][0] / max(results[(small, probe)][0], 1e-9):.2f} "
                       f"({results[(small, probe)][0]:.0f} -> {results[(large, probe)][0]:.0f} MiB)"
                       for probe in args.probes)
    print(f"RSS rise {large} / {small} slides: {ratios}; cache size ratio {cache_ratio:.2f} "
          f"(flat = about 1: the fit does not hold the cache)")
    if len(sizes) > 2:
        def step(probe, a, b):  # rise growth next to cache growth from a to b slides
            (rise_a, cache_a), (rise_b, cache_b) = results[(a, probe)], results[(b, probe)]
            return f"{rise_b - rise_a:+.0f} MiB ({a}->{b}, cache {cache_b - cache_a:+.0f} MiB)"

        steps = "; ".join(f"{probe} " + ", ".join(step(probe, a, b) for a, b in itertools.pairwise(sizes))
                          for probe in args.probes)
        print(f"rise growth between consecutive sizes: {steps}; a probe holding the cache grows by the cache's growth "
              f"at every step")
    print("rise = VmHWM over the open + fit + predict, after a reset, minus the RSS before it; cache = features.npy")
    if args.mmap_threshold is None:
        print("glibc's dynamic mmap threshold keeps freed blocks of up to 32 MiB in the heap: a fit's peak creeps up "
              "with its number of batches until it levels off; --mmap-threshold 131072 shows what is live")
    for note in notes:
        print(note)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Peak RSS of abmil / meanpool slide-probe fits on memory-mapped (NpyRows) synthetic slide caches "
                    "of a growing number of slides; every fit in a fresh subprocess.")
    parser.add_argument("--slides", type=int, nargs="+", default=[50, 200, 800],
                        help="slide counts, one cache each (default: 50 200 800)")
    parser.add_argument("--tiles", type=int, default=500,
                        help="mean tiles per slide; each slide has between half and 1.5 times this (default: 500)")
    parser.add_argument("--dim", type=int, default=384, help="feature dimension (default: 384, a ViT-S)")
    parser.add_argument("--probes", nargs="+", default=["abmil", "meanpool"], choices=["abmil", "meanpool"],
                        help="slide probes to fit (default: abmil meanpool)")
    parser.add_argument("--epochs", type=int, default=2,
                        help="training epochs of each probe (default: 2; the recipes' 100 only take longer)")
    parser.add_argument("--no-reread", dest="reread", action="store_false",
                        help="leave the cache out of the page cache before each fit instead of reading it once")
    parser.add_argument("--mmap-threshold", type=int, default=None, metavar="BYTES",
                        help="run the fits with MALLOC_MMAP_THRESHOLD_=BYTES: glibc then returns every freed block "
                             "of at least BYTES at once, so the peak follows what is live (default: glibc's dynamic "
                             "threshold, as a run has it)")
    parser.add_argument("--tmp-dir", default=None, help="parent folder of the temporary caches (default: $TMPDIR)")
    # Internal: one measured fit in this (fresh) process.
    parser.add_argument("--worker", choices=["fit"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--probe", choices=["abmil", "meanpool"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.slides) < 2:
        parser.error("--slides must be >= 2 (the probes need both classes)")
    if args.tiles < 1 or args.dim < SIGNAL_DIMS or args.epochs < 1:
        parser.error(f"--tiles and --epochs must be >= 1, --dim >= {SIGNAL_DIMS}")
    if args.mmap_threshold is not None and args.mmap_threshold < 0:
        parser.error("--mmap-threshold must be >= 0")
    if args.worker and not (args.path and args.probe):
        parser.error("--worker needs --path and --probe")
    return args


if __name__ == "__main__":
    run(parse_args())
