"""How many images per second each reader hands over on this host, through the real extraction path (issue 39).

What is measured
----------------
For each reader family, files in the dataset's real format at its real item size, read by the suite's own reader
(``evalsuite.readers.build_reader`` on the shipped card, the train split) through the transform of a 224 px ViT
(``kaiko-vits16``'s, as a run builds it) and ``evalsuite.features.extract.extract_to_cache`` into a new float16
cache (chunks sized as a run sizes them, every chunk written, fsynced and hashed), with the backbone replaced by:

- ``free``: a consumer that does no work (a zero feature row per image): the rate is the feed itself;
- ``busy``: a consumer that takes a fixed time per batch (``--busy-ms``, slept, so the CPU is left to the workers):
  whether the workers keep up with a forward of that rate.

Readers and items: ``pcam`` (HDF5, 96 px uint8 tiles, uncompressed as distributed), ``crc`` (224 px TIFF tiles,
uncompressed as NCT-CRC-HE-100K's), ``mhist`` (224 px PNG), ``bach`` (2048 x 1536 TIFF photos, uncompressed as
ICIAR 2018's), ``slides`` (224 px tiles at 0.5 um/px from tiled pyramidal JPEG TIFFs through OpenSlide, the demo
slide builder's writer). Pixels are uniform random noise except the slides' (tissue-coloured noise): for the
uncompressed formats the content does not change the decoding work; for PNG, noise compresses to stored blocks,
which inflate faster than real tissue, so ``mhist`` is an upper bound. The builders are the ones the reader tests
use (tests/conftest.py) and gpu_check.py's, at the real sizes.

Printed per reader and worker count (1 and 2 DataLoader workers): ``one process``, the img/s of the reader's
``dataset[i]`` in a loop in one process (read, decode, transform: a worker's share of the work, its ceiling),
then sustained img/s with the free consumer and per worker, the rate of cache rows written with it (MB/s of
float16 rows, a 768-wide row per image as a ViT-S gives), img/s with the busy consumer, and the workers needed for
1,000 and 3,000 img/s at the one-worker rate. Goal (issue 39): at least 1,500
img/s per worker for items at 224 px or smaller; the photo reader is decode-bound, and the line says at what rate.

How to read it
--------------
One run on whatever else the machine does: the host (CPU capability, usable cores, load average) is printed beside
every table; compare rows of one run. With 2 cores, 2 workers share them with the main process, so the 2-worker
rate is not twice the 1-worker rate here; on a node, workers per GPU come from the 1-worker rate. A sustained rate
well below ``one process`` means the bound is not the worker's decoding but the main process (collating, the
shared-memory hand-over of float32 224 px batches, the checks and the cache writes).

Run: ``python benchmarks/feed_rate.py`` (about three minutes on 2 cores; needs the ``dev`` extra, whose pytest the
test builders import), ``--quick`` for a smoke size.
"""

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _shared import format_table, host_tag, machine_line

REPO = Path(__file__).resolve().parents[1]
GOAL_PER_WORKER = 1500.0
TARGETS = (1000.0, 3000.0)
ROW_DIM = 768  # a ViT-S/16's pooled features: what the cache write rate is measured with
BATCH = 64  # a GPU run's batch


class Consumer:
    """Stands in for the backbone: `features_of` returning zero rows, after `busy_s` of sleep per batch."""

    def __init__(self, busy_s: float = 0.0):
        import torch

        self.busy_s, self.model = busy_s, torch.nn.Identity()
        self.name = "feed-rate-consumer"

    def __call__(self, images):
        import torch

        if self.busy_s:
            time.sleep(self.busy_s)
        return torch.zeros((len(images), ROW_DIM))


def build_data(work: Path, counts: dict) -> dict:
    """{reader: data root} in each dataset's real layout and item size."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import make_bach, make_crc, make_mhist
    from gpu_check import write_pcam, write_slides

    crc_per_class = -(-counts["crc"] // 9)
    roots = {"pcam": write_pcam(work / "pcam", {"train": counts["pcam"], "val": 2, "test": 2}),
             "crc": make_crc(work / "crc", train_per_class=crc_per_class, test_per_class=1, size=(224, 224)),
             "mhist": make_mhist(work / "mhist", per_class={"train": counts["mhist"] // 2, "test": 2}, size=(224, 224)),
             "bach": make_bach(work / "bach", numbers={c: list(range(1, counts["bach"] + 1)) for c in
                                                       ("Benign", "InSitu", "Invasive", "Normal")}, size=(2048, 1536))}
    side_tiles = 32 if counts["slides"] >= 1024 else 8  # tiles of tissue per slide side
    roots["slides"] = write_slides(work / "slides", max(1, counts["slides"] // side_tiles ** 2), side_tiles)
    return roots


def datasets(roots: dict, transform) -> dict:
    """{reader: the train split's dataset through `transform`}."""
    from evalsuite.features.slide_features import slide_dataset
    from evalsuite.readers import build_reader
    from evalsuite.readers.slides.base import TILING_DEFAULTS, tile_slides
    from evalsuite.tasks.cards import load_card

    found = {name: build_reader(load_card(name), str(root), check_counts=False).dataset("train", transform)
             for name, root in roots.items() if name != "slides"}
    layout = tile_slides(roots["slides"], dict(TILING_DEFAULTS), False, 1, "feed_rate")
    found["slides"] = (slide_dataset(layout, transform), layout)
    return found


def feed(dataset, layout, consumer: Consumer, workers: int, root: Path) -> dict:
    """img/s and cache MB/s of extract_to_cache with `consumer` as the backbone."""
    import torch

    from evalsuite.features.cache import FeatureCache
    from evalsuite.features.extract import extract_to_cache
    from evalsuite.features.prepare import chunk_rows_for
    from evalsuite.features.slide_features import cache_layout

    chunk_rows = chunk_rows_for((ROW_DIM,), BATCH, None)
    cache = FeatureCache(root)
    labels = np.zeros(len(dataset), dtype=np.int64)
    started = time.perf_counter()
    writer = cache.start_or_resume("feed", (len(dataset), ROW_DIM), labels, {"benchmark": "feed_rate"}, chunk_rows,
                                   {}, cache_layout(layout, chunk_rows) if layout is not None else None)
    forwarded = extract_to_cache(consumer, dataset, writer, torch.device("cpu"), batch_size=BATCH,
                                 num_workers=workers, description="feed_rate", features_of=consumer,
                                 show_progress=False, pad_to_batch=layout is None)
    seconds = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    if forwarded != len(dataset):
        raise SystemExit(f"feed_rate: extract_to_cache forwarded {forwarded} of {len(dataset)} images")
    return {"img_per_s": forwarded / seconds, "write_mb_s": forwarded * ROW_DIM * 2 / 1e6 / seconds}


def item_ceiling(dataset, items: int) -> float:
    """img/s of one process reading, decoding and transforming items (the work one worker does), no DataLoader;
    a dataset that hands raw pixels converts them per batch (`prepare_batch`) in the main process, not here."""
    count = min(items, len(dataset))
    started = time.perf_counter()
    for index in range(count):
        dataset[index]
    return count / (time.perf_counter() - started)


def reader_rows(name: str, entry, busy_s: float, work: Path) -> list:
    dataset, layout = entry if isinstance(entry, tuple) else (entry, None)
    ceiling = item_ceiling(dataset, 512)
    rows, one_worker = [], None
    for workers in (1, 2):
        free = feed(dataset, layout, Consumer(), workers, work / f"cache-{name}")
        busy = feed(dataset, layout, Consumer(busy_s), workers, work / f"cache-{name}")
        one_worker = one_worker or free["img_per_s"]
        needed = "  ".join(str(math.ceil(target / one_worker)) for target in TARGETS)
        verdict = "PASS" if free["img_per_s"] / workers >= GOAL_PER_WORKER else "below"
        rows.append([name, len(dataset), workers, f"{ceiling:.0f}", f"{free['img_per_s']:.0f}",
                     f"{free['img_per_s'] / workers:.0f}", verdict, f"{free['write_mb_s']:.1f}",
                     f"{busy['img_per_s']:.0f}", needed])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke size (seconds)")
    parser.add_argument("--busy-ms", type=float, default=20.0, help="the busy consumer's ms per batch (default 20)")
    args = parser.parse_args(argv)
    counts = ({"pcam": 128, "crc": 128, "mhist": 128, "bach": 2, "slides": 64} if args.quick else
              {"pcam": 8192, "crc": 2048, "mhist": 2048, "bach": 12, "slides": 2048})
    print(machine_line(), flush=True)
    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.transforms import build_transform

    transform = build_transform(build_backbone("kaiko-vits16", random_init=True).data_config)
    with tempfile.TemporaryDirectory(prefix="feed_rate.") as folder:
        work = Path(folder)
        started = time.perf_counter()
        entries = datasets(build_data(work, counts), transform)
        print(f"data built in {time.perf_counter() - started:.1f} s ({host_tag()})", flush=True)
        rows = [row for name, entry in entries.items() for row in reader_rows(name, entry, args.busy_ms / 1e3, work)]
    print(f"feed rates, batch {BATCH}, busy consumer {args.busy_ms:g} ms a batch ({BATCH / args.busy_ms * 1e3:.0f} "
          f"img/s), goal {GOAL_PER_WORKER:.0f} img/s per worker ({host_tag()})")
    print(format_table(["reader", "images", "workers", "one process", "img/s", "per worker", "goal", "cache MB/s",
                        "busy img/s", "workers for 1k 3k"], rows, left=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
