"""Writing a slide cache of 399 to 10,616 slides: this checkout's chunk log against a baseline that rewrote the
manifest after every chunk, in one run.

What is measured
----------------
For each ``--slides`` count, one slide-shaped feature cache is written through each side's real cache code
(``FeatureCache.start_or_resume`` with a slide ``CacheLayout``, ``write_chunk`` per slide, ``finish``), in a fresh
process per side and size, in a temporary folder on the disk ``--scratch`` names (fsync costs what that disk
costs):

- one chunk per slide, as a slide cache of slides under ``--chunk-rows`` tiles has (PANDA: 10,616 slides;
  Camelyon16: 399), each ``--tiles`` rows of ``--dim`` float16 values: small, so the time is the per-chunk
  bookkeeping (checksum, pwrite, fsync, the record) more than the bytes;
- the manifest's slide table as a run writes it (ids, 64-character paths, tile offsets, levels, read sizes), so
  the manifest has the size a real one has.

Printed per size and side: seconds from the first chunk to the finished manifest, milliseconds a chunk, and
this / baseline. ``growth``: a side's milliseconds a chunk at the largest size over the smallest, about 1 when
a chunk costs the same however many came before it. The baseline (``--baseline``, default the commit before the
chunk log) rewrote and fsynced the whole manifest, chunk table and slide table, after every chunk: its cost a
chunk grows with the slides. It runs only up to ``--baseline-up-to`` slides (default 2,654, a quarter of PANDA:
at 10,616 it takes about 7 minutes on 2 cores); ``--baseline-up-to 10616`` for the whole comparison.

The host (CPU, usable cores, load) is printed before and after; compare figures of one run only.

Run: ``python benchmarks/cache_write.py`` (about a minute), ``--slides 399,10616 --baseline-up-to 10616`` for
PANDA against the baseline.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _shared import checkout, format_table, host_tag, machine_line

REPO = Path(__file__).resolve().parents[1]
BASELINE = "fd47635"  # main before the chunk log (2026-11-27): the manifest rewritten after every chunk
SIZES = (399, 2_654, 10_616)  # Camelyon16's slides, a quarter of PANDA's, PANDA's
# One side writing one cache, in a process of its own importing the side's source tree first.
WRITE = r"""
import json, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from evalsuite.features.cache import CacheLayout, FeatureCache

slides, tiles, dim, scratch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
offsets = np.arange(slides + 1) * tiles
table = {"slides": {"ids": [f"{i:032x}" for i in range(slides)],
                    "paths": [f"/data/panda/train_images/{i:032x}.tiff" for i in range(slides)],
                    "offsets": offsets.tolist(), "levels": [1] * slides, "read_sizes_px": [448] * slides,
                    "tile_size_px": 224, "skipped": []}}
layout = CacheLayout(bounds=list(zip(offsets[:-1].tolist(), offsets[1:].tolist())), manifest=table)
rows = np.random.default_rng(0).standard_normal((tiles, dim)).astype(np.float16)
with tempfile.TemporaryDirectory(dir=scratch) as folder:
    cache = FeatureCache(folder)
    writer = cache.start_or_resume("k", (slides * tiles, dim), np.zeros(slides * tiles, dtype=np.int64),
                                   {"split": "train"}, 1_000, {}, layout)
    started = time.perf_counter()
    for index, start, stop in writer.pending_chunks():
        writer.write_chunk(index, rows)
    writer.finish()
    seconds = time.perf_counter() - started
    manifest_bytes = (cache.folder("k") / "manifest.json").stat().st_size
print(json.dumps({"seconds": seconds, "manifest_bytes": manifest_bytes}))
"""


def written(source: Path, slides: int, args) -> dict:
    result = subprocess.run([sys.executable, "-c", WRITE, str(source), str(slides), str(args.tiles), str(args.dim),
                             str(args.scratch)], capture_output=True, text=True, cwd=source)
    if result.returncode != 0:
        raise SystemExit(f"cache_write: {slides} slides failed in {source}:\n{result.stderr}")
    return json.loads(result.stdout)


def table(results: dict, sizes: list) -> str:
    rows = []
    for slides in sizes:
        now, before = results["this"].get(slides), results["baseline"].get(slides)
        rows.append([f"{slides:,}", f"{now['manifest_bytes'] / 2**20:.2f}",
                     f"{before['seconds']:.2f}" if before else "-", f"{1e3 * before['seconds'] / slides:.2f}"
                     if before else "-", f"{now['seconds']:.2f}", f"{1e3 * now['seconds'] / slides:.2f}",
                     f"{now['seconds'] / before['seconds']:.3f}" if before else "-"])
    return format_table(["slides (chunks)", "manifest MiB", "baseline s", "baseline ms/chunk", "this s",
                         "this ms/chunk", "this / baseline"], rows)


def growth(side: dict) -> str:
    measured = sorted(side)
    if len(measured) < 2:
        return "-"
    first, last = measured[0], measured[-1]
    return (f"{(side[last]['seconds'] / last) / (side[first]['seconds'] / first):.2f} "
            f"(ms a chunk at {last:,} slides / at {first:,})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", default=",".join(map(str, SIZES)), help="slide counts (default %(default)s)")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with (default %(default)s)")
    parser.add_argument("--baseline-up-to", type=int, default=2_654, help="largest slide count the baseline "
                        "writes (default %(default)s; it grows with the square of the slides)")
    parser.add_argument("--tiles", type=int, default=8, help="rows a slide (default %(default)s)")
    parser.add_argument("--dim", type=int, default=1024, help="feature width (default %(default)s, as PANDA's)")
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help="folder on the disk to measure "
                        "(default %(default)s)")
    args = parser.parse_args()
    sizes = sorted(int(value) for value in args.slides.split(","))
    print(machine_line())
    print(host_tag())
    with tempfile.TemporaryDirectory(prefix="evalsuite_cache_write_") as folder:
        sides = {"baseline": checkout(REPO, args.baseline, Path(folder) / "baseline"), "this": REPO}
        results = {side: {} for side in sides}
        for slides in sizes:
            for side, source in sides.items():
                if side == "this" or slides <= args.baseline_up_to:
                    results[side][slides] = written(source, slides, args)
                    print(f"  {side}: {slides:,} slides in {results[side][slides]['seconds']:.2f} s", flush=True)
    print(host_tag())
    print(table(results, sizes))
    print(f"growth, baseline: {growth(results['baseline'])}")
    print(f"growth, this: {growth(results['this'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
