"""Every stage after feature extraction at the sizes users run (PCam, CRC-100K, PANDA, Camelyon16), against its floor.

What is measured
----------------
Synthetic float16 feature caches written through the real cache code (``FeatureCache.start_or_resume``, one
``write_chunk`` per chunk of ``evalsuite.features.prepare.chunk_rows_for`` rows, ``finish``; slide caches with a
``CacheLayout`` whose chunks never cross a slide, as ``evalsuite.features.slide_features.cache_layout`` makes), read
back with ``FeatureCache.open(key, --cache-mode)``. Tiles: one class centre per class (shared by the splits) plus
unit Gaussian noise, 5 % of labels flipped, so probes train as on real, well-separated features. Slides: each tile
is a shared "tissue" centre, 30 % of them plus the slide's class centre, plus noise; tile counts vary per slide.

Each stage runs in a fresh process (``--worker``), so its peak RSS (VmHWM of /proc/self/status, imports and the
opened caches included: ``ram`` mode holds the splits in RAM) is its own; the time is the stage's call only:

- ``open``: ``FeatureCache.open`` of train, val and test (checksums and finiteness of every row);
- ``linear``: ``LinearProbe(**load_recipe("linear").params).fit`` on train, val selection (12 heads, 100 epochs);
- ``knn``: ``KNNProbe(**load_recipe("knn").params).fit`` (val neighbours, k sweep) and ``predict_proba(test)``;
- ``fewshot``: ``FewShotProbe(**load_recipe("fewshot").params).evaluate(split_data, "test")``;
- ``retrieval``: ``RetrievalProbe(**load_recipe("retrieval").params).evaluate(split_data, "test")``;
- ``bootstrap``: ``evalsuite.metrics.intervals.bootstrap_intervals`` of the test labels and a probability matrix;
- ``calibration``: ``evalsuite.metrics.calibration.calibration_metrics`` of the same;
- ``ranks``: what ``evaluate --compare`` and the rank intervals do (evalsuite/reporting/statistics/compare.py): one
  ``ItemScorer`` per model (``RANK_MODELS`` models, balanced accuracy), ``per_draw_scores`` (1000 draws),
  ``ranks_from_scores`` and ``paired_result`` of the first two;
- ``abmil`` / ``meanpool``: ``ABMILProbe`` / ``MeanPoolProbe`` with their recipes' params, ``fit`` on the slide
  bags (``features.bags.SlideBags`` over the opened slide cache) with val selection, then ``predict_proba(test)``;
- ``leaderboard``: ``evalsuite.results.leaderboard.read_rows`` and ``evalsuite.reporting.table.wide.build_wide_table``
  on a leaderboard built by benchmarks/report_scale.py's ``build`` (its --quick size with ``--sizes quick``, else its
  full 30 models x 20 tasks x 5 seeds); run once, with the first size given.

Tile presets (quick, crc100k, pcam) run the tile stages, slide presets (panda, camelyon16) the slide stages; both
run the metric stages on their test items (tiles or slides); quick runs all. CRC-100K's val is 10 % of its
100,000 training tiles (it has none of its own). PANDA's tiles per slide: the largest mean in 200-1000 whose cache
fits 80 % of the free disk (and, with ``--cache-mode ram``, whose train split fits half the available RAM); slides
hold between a fifth of it and it. Camelyon16: 1,000-8,000 tiles per slide (4,500 on average), scaled down the same
way when the machine lacks room (printed).

How floors are computed
-----------------------
Measured once at start: GEMM GFLOP/s (float32 torch matmul [1024, 1536] x [1536, 1024], all torch threads;
measured again in each stage's process just before the stage, the ``gflops`` column, which its GEMM floor uses), the
memory rate (numpy copy of 256 MiB) and the disk read rate of a cache-sized file, cold (page cache dropped with
posix_fadvise DONTNEED, which the kernel honours for clean pages; the line says when it looks warm anyway) and warm.
Each stage's floor is the largest of (they can overlap): its GEMM FLOPs at the GEMM rate (linear: 4 N D C heads per
epoch, forward and weight gradient, and as a term of its own, ``step_gemm``, its steps' two thin GEMMs timed at their
own shape on one thread, as the probe trains, which MKL runs far below the large-matmul rate; kNN and retrieval: 2
queries x bank x D; few-shot: 2 shots x sets x test x C x D; ABMIL: 3 x 2 (D P + 2 P A) per sampled tile and epoch
plus the val and test forwards; bootstrap and ranks: the per-draw confusion counts as one GEMM, 2 draws x items x C^2
per model); the bytes it reads from the cache (memmap: every distinct byte once at the cold rate, re-reads at the warm
rate, the page cache being dropped before the stage; ram: every read at the memory rate); the bytes it must touch in
memory (calibration: the probabilities; leaderboard: the CSV once) at the memory rate; plus the sorting AUROC needs
after the scores exist (few-shot: one argsort of the test scores per class and support set, at the measured numpy
argsort rate). The ``bound`` column names the largest term.

How to read it
--------------
``ratio`` = time / floor: near 1 the stage runs at what the machine allows; a large ratio is overhead to look at
(Python per batch, small matmuls, re-reading the cache). The GEMM rate is that of a large matmul, which the linear
probe's 64-row steps cannot reach: its ``step_gemm`` term is their floor. Leaderboard and calibration floors are
loose (one pass over bytes), so their ratios are large by construction. Seconds depend on the machine and its load:
the host line (CPU capability, usable cores, load average) is printed beside the table, and each row has the GEMM
rate measured just before it and the 1-minute load average just after it.

Run: ``python benchmarks/scale.py --quick`` (every stage at a tiny size; about a minute on 2 cores), or
``--sizes crc100k,pcam --cache-mode memmap --scratch /big/disk`` (PCam's caches are 1.0 GB; its linear fit alone
is 100 epochs x 4,096 batches of 64, so expect tens of minutes or more on 2 CPU cores), ``--stages linear,knn``
to choose stages. The disk space needed is printed before anything is written; the script refuses in one line when
the scratch disk lacks it. Caches are removed at the end. Slide caches are written with one chunk (at least) per
slide through the real writer (a fsync and a chunk-log line a chunk: benchmarks/cache_write.py); the build time is
printed.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _shared import format_table, host_tag, machine_line, read_status

SPLITS = ("train", "val", "test")
TILE_STAGES = ("open", "linear", "knn", "fewshot", "retrieval")
SLIDE_STAGES = ("abmil", "meanpool")
METRIC_STAGES = ("bootstrap", "calibration", "ranks")
STAGES = ("open", "linear", "knn", "fewshot", "retrieval", "bootstrap", "calibration", "ranks", "abmil", "meanpool",
          "leaderboard")
RANK_MODELS = 5
DRAWS = 1000
MIB = 1024**2
SIZES = {
    "quick": {"tiles": {"train": 2000, "val": 500, "test": 500}, "dim": 256, "classes": 4,
              "slides": {"train": 40, "val": 12, "test": 12}, "tiles_per_slide": (20, 60), "slide_classes": 2},
    "crc100k": {"tiles": {"train": 90_000, "val": 10_000, "test": 7_180}, "dim": 1536, "classes": 9},
    "pcam": {"tiles": {"train": 262_144, "val": 32_768, "test": 32_768}, "dim": 1536, "classes": 2},
    "panda": {"slides": {"train": 7_431, "val": 1_592, "test": 1_593}, "tiles_per_slide": (200, 1000), "dim": 1024,
              "slide_classes": 6, "fit_max": True},
    "camelyon16": {"slides": {"train": 216, "val": 54, "test": 129}, "tiles_per_slide": (1000, 8000), "dim": 1536,
                   "slide_classes": 2, "fit_max": True},
}


# --- the machine's rates ----------------------------------------------------------------------------------------------

def gemm_gflops() -> float:
    import torch

    a, b = torch.randn(1024, 1536), torch.randn(1536, 1024)
    a @ b
    runs, started = 0, time.perf_counter()
    while time.perf_counter() - started < 0.5:
        a @ b
        runs += 1
    return 2 * 1024 * 1536 * 1024 * runs / (time.perf_counter() - started) / 1e9


def memory_rate() -> float:
    """Bytes per second numpy copies (bytes read)."""
    source = np.ones(64 * MIB, dtype=np.float32)
    target = np.empty_like(source)
    np.copyto(target, source)
    started = time.perf_counter()
    for _ in range(3):
        np.copyto(target, source)
    return 3 * source.nbytes / (time.perf_counter() - started)


def sort_rate() -> float:
    """n log2 n per second of numpy's default argsort of float64 scores (what AUROC's ranks cost), n = 8192."""
    scores = np.random.default_rng(0).random((64, 8192))
    np.argsort(scores[0])
    started = time.perf_counter()
    for row in scores:
        np.argsort(row)
    return scores.size * math.log2(scores.shape[1]) / (time.perf_counter() - started)


def drop_page_cache(paths) -> None:
    for path in paths:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def read_rate(path: Path) -> float:
    descriptor = os.open(path, os.O_RDONLY)
    total, started = 0, time.perf_counter()
    try:
        while block := os.read(descriptor, 16 * MIB):
            total += len(block)
    finally:
        os.close(descriptor)
    return total / (time.perf_counter() - started)


def disk_rates(scratch: Path, largest: Path | None) -> tuple[float, float]:
    """(cold, warm) bytes per second reading `largest` (a cache file) or a 256 MiB file written for it."""
    path = largest
    if path is None or path.stat().st_size < 256 * MIB:
        path = scratch / "read_rate.bin"
        with open(path, "wb") as handle:
            for _ in range(16):
                handle.write(os.urandom(16 * MIB))
            handle.flush()
            os.fsync(handle.fileno())
    drop_page_cache([path])
    cold = read_rate(path)
    warm = read_rate(path)
    if path.name == "read_rate.bin":
        path.unlink()
    return cold, warm


# --- the synthetic caches ---------------------------------------------------------------------------------------------

def tiles_per_slide(size: dict, mode: str, free_bytes: int, cap: int | None = None) -> tuple[int, int, str]:
    """(low, high) tiles per slide, and a note when shrunk to fit the disk (and RAM in ram mode) or `cap`."""
    low, high = size["tiles_per_slide"]
    if not size.get("fit_max"):
        return low, high, ""
    if cap and cap < high:
        capped_low = max(1, round(low * cap / high))
        return capped_low, cap, (f"{capped_low}-{cap} tiles per slide: capped by --max-tiles-per-slide "
                                 f"(real {low}-{high})")
    slides, row = sum(size["slides"].values()), size["dim"] * 2

    def mean_of(h):  # the mean count when slides hold uniformly between low/high * h and h tiles
        return (low / high * h + h) / 2

    fits = [h for h in range(high, 0, -max(high // 100, 1))
            if slides * mean_of(h) * row <= 0.8 * free_bytes
            and (mode != "ram" or size["slides"]["train"] * mean_of(h) * row <= 0.5 * available_ram())]
    chosen = fits[0] if fits else max(high // 100, 1)
    if chosen == high:
        return low, high, f"{low}-{high} tiles per slide (the real range; it fits disk{' and RAM' * (mode == 'ram')})"
    chosen_low = max(1, round(low * chosen / high))
    return chosen_low, chosen, (f"{chosen_low}-{chosen} tiles per slide: the largest that fits this machine's "
                                f"disk{' and RAM' * (mode == 'ram')} (real {low}-{high})")


def available_ram() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def slide_counts(size: dict, split: str, low: int, high: int) -> np.ndarray:
    rng = np.random.default_rng(seed_of(split, 7))
    return rng.integers(low, high + 1, size["slides"][split])


def seed_of(split: str, salt: int) -> int:
    return SPLITS.index(split) * 1000 + salt


def cache_bytes_needed(size: dict, low: int, high: int, stages: set) -> int:
    total = 0
    if "tiles" in size and stages & set(TILE_STAGES + METRIC_STAGES):
        total += sum(size["tiles"].values()) * size["dim"] * 2
    if "slides" in size and stages & set(SLIDE_STAGES + METRIC_STAGES):
        total += sum(int(slide_counts(size, s, low, high).sum()) for s in SPLITS) * size["dim"] * 2
    return total


def write_cache(cache, key_fields: dict, labels: np.ndarray, rows_of, dim: int, layout=None) -> str:
    """Fill a cache through the real writer; `rows_of(start, stop)` gives float16 rows."""
    from evalsuite.features.cache import cache_key
    from evalsuite.features.prepare import chunk_rows_for
    from evalsuite.runtime.versions import library_versions

    key = cache_key(key_fields)
    chunk_rows = chunk_rows_for((dim,), 64, None)
    if layout is not None:
        layout.bounds = [(a, min(a + chunk_rows, b)) for a, b in layout.bounds for a in range(a, b, chunk_rows)]
    writer = cache.start_or_resume(key, (len(labels), dim), labels, key_fields, chunk_rows, library_versions(), layout)
    for index, start, stop in writer.pending_chunks():
        writer.write_chunk(index, rows_of(start, stop))
    writer.finish()
    return key


def tile_rows(centres: np.ndarray, labels: np.ndarray, seed: int):
    def rows_of(start: int, stop: int) -> np.ndarray:
        rng = np.random.default_rng([seed, start])
        rows = rng.standard_normal((stop - start, centres.shape[1]), dtype=np.float32)
        rows += centres[labels[start:stop]]
        return rows.astype(np.float16)
    return rows_of


def build_tile_caches(cache, name: str, size: dict) -> dict:
    rng = np.random.default_rng(0)
    classes, dim = size["classes"], size["dim"]
    centres = (0.25 * rng.standard_normal((classes, dim))).astype(np.float32)
    keys = {}
    for split in SPLITS:
        split_rng = np.random.default_rng(seed_of(split, 1))
        labels = split_rng.integers(0, classes, size["tiles"][split])
        seen = labels.copy()  # the features follow `seen`; 5 % of the cached labels disagree (label noise)
        flip = split_rng.random(len(labels)) < 0.05
        seen[flip] = split_rng.integers(0, classes, int(flip.sum()))
        keys[split] = write_cache(cache, {"benchmark": "scale", "size": name, "split": split}, labels,
                                  tile_rows(centres, seen, seed_of(split, 2)), dim)
    return keys


def build_slide_caches(cache, name: str, size: dict, low: int, high: int) -> dict:
    from evalsuite.features.cache import CacheLayout

    rng = np.random.default_rng(1)
    classes, dim = size["slide_classes"], size["dim"]
    centres = (0.25 * rng.standard_normal((classes + 1, dim))).astype(np.float32)  # the last: tissue
    keys = {}
    for split in SPLITS:
        counts = slide_counts(size, split, low, high)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        split_rng = np.random.default_rng(seed_of(split, 3))
        targets = split_rng.integers(0, classes, len(counts))
        slide_of_tile = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        carries = split_rng.random(len(slide_of_tile)) < 0.3  # tiles that show the slide's class

        def rows_of(start, stop, seed=seed_of(split, 4), slide_of_tile=slide_of_tile, carries=carries,
                    targets=targets):
            rows = np.random.default_rng([seed, start]).standard_normal((stop - start, dim), dtype=np.float32)
            rows += centres[classes]
            rows += centres[targets[slide_of_tile[start:stop]]] * carries[start:stop, None]
            return rows.astype(np.float16)

        layout = CacheLayout(bounds=list(zip(offsets[:-1].tolist(), offsets[1:].tolist())),
                             manifest={"scale_offsets": offsets.tolist(), "scale_targets": targets.tolist()})
        keys[split] = write_cache(cache, {"benchmark": "scale", "size": name, "split": split, "slides": True},
                                  slide_of_tile, rows_of, dim, layout)
    return keys


# --- one stage, in its own process ------------------------------------------------------------------------------------

def probabilities(labels: np.ndarray, classes: int, margin: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(len(labels), classes))
    logits[np.arange(len(labels)), labels] += margin
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (proba / proba.sum(axis=1, keepdims=True)).astype(np.float32)


class Stage:
    """What a worker shares between stages: the job, the cache, the floor inputs it fills in (`out`)."""

    def __init__(self, job: dict):
        from evalsuite.features.cache import FeatureCache

        self.job, self.mode, self.size = job, job["mode"], job["size"]
        self.cache = FeatureCache(Path(job["root"]))
        self.out = {"flops": 0.0, "read_unique": 0, "read_total": 0, "mem_bytes": 0, "note": ""}

    def files(self, keys: dict) -> list:
        return [self.cache.folder(keys[s]) / "features.npy" for s in SPLITS]

    def opened(self, keys: dict) -> dict:
        """{split: (features, labels)}; in memmap mode the page cache is dropped after the open's checksum pass
        (it read every byte), so the stage starts cold."""
        found = {split: self.cache.open(keys[split], self.mode) for split in SPLITS}
        if self.mode == "memmap":
            drop_page_cache(self.files(keys))
        return found


def run_leaderboard(stage: Stage) -> None:
    from report_scale import FULL, QUICK, build

    from evalsuite.reporting.table.wide import build_wide_table
    from evalsuite.results.leaderboard import read_rows

    out_dir = Path(stage.job["root"]) / "leaderboard"
    built = build(out_dir, QUICK if stage.job["size_name"] == "quick" else FULL)
    csv = out_dir / "leaderboard.csv"
    started = time.perf_counter()
    table = build_wide_table(read_rows(csv))
    stage.out["seconds"] = time.perf_counter() - started
    stage.out["mem_bytes"] = csv.stat().st_size
    stage.out["note"] = f"{built['rows']} rows, {len(table.rows)} models x {len(table.tasks)} tasks"
    shutil.rmtree(out_dir, ignore_errors=True)


def run_open(stage: Stage) -> None:
    keys = stage.job["tile_keys"]
    files = stage.files(keys)
    drop_page_cache(files)
    started = time.perf_counter()
    for split in SPLITS:
        stage.cache.open(keys[split], stage.mode)
    stage.out["seconds"] = time.perf_counter() - started
    stage.out["read_unique"] = stage.out["read_total"] = sum(f.stat().st_size for f in files)


def step_gemm_seconds(batch: int, dim: int, outputs: int) -> float:
    """One linear-probe step's two GEMMs at their own shape ([batch, D] x [D, outputs] forward, [outputs, batch] x
    [batch, D] weight gradient) on one thread, as the probe trains (evalsuite.runtime.cpus.threads_for_steps):
    MKL runs such thin products far below the large-matmul rate, so this is the step's floor at this protocol."""
    import torch

    from evalsuite.runtime.cpus import one_thread

    x, weight, grad = torch.randn(batch, dim), torch.randn(outputs, dim), torch.randn(batch, outputs)
    with one_thread():
        for _ in range(20):
            torch.addmm(weight[:, 0], x, weight.t()), grad.t() @ x
        runs, started = 0, time.perf_counter()
        while time.perf_counter() - started < 0.5:
            torch.addmm(weight[:, 0], x, weight.t()), grad.t() @ x
            runs += 1
    return (time.perf_counter() - started) / runs


def run_tile_probe(stage: Stage, name: str) -> None:
    from evalsuite.probes.recipes import load_recipe

    data = stage.opened(stage.job["tile_keys"])
    (train_x, train_y), (val_x, val_y), (test_x, test_y) = (data[s] for s in SPLITS)
    train_y, val_y, test_y = (np.asarray(y, dtype=np.int64) for y in (train_y, val_y, test_y))
    n, nv, nt, dim, classes = len(train_y), len(val_y), len(test_y), stage.size["dim"], stage.size["classes"]
    row, params, out = dim * 2, load_recipe(name).params, stage.out
    started = time.perf_counter()
    if name == "linear":
        from evalsuite.probes.pooled.linear import LinearProbe
        probe = LinearProbe(classes, **params).fit(train_x, train_y, val_x, val_y, "balanced_accuracy")
        heads = len(probe.grid)
        out["flops"] = probe.epochs * 4.0 * n * dim * classes * heads + 2.0 * nv * dim * classes * heads
        out["read_unique"], out["read_total"] = (n + nv) * row, (probe.epochs * n + nv) * row
        out["step_gemm_s"] = (step_gemm_seconds(probe.batch_size, dim, heads * classes) * probe.epochs
                              * (n // probe.batch_size))
        out["note"] = f"val balanced acc {probe.selected_params_['val_balanced_accuracy']:.3f}"
    elif name == "knn":
        from evalsuite.probes.pooled.knn import KNNProbe
        probe = KNNProbe(classes, **params).fit(train_x, train_y, val_x, val_y, "balanced_accuracy")
        probe.predict_proba(test_x)
        batches = math.ceil(nv / probe.batch_size) + math.ceil(nt / probe.batch_size)  # each reads the bank
        out["flops"] = 2.0 * (nv + nt) * n * dim
        out["read_unique"], out["read_total"] = (n + nv + nt) * row, (batches * n + nv + nt) * row
        out["note"] = f"k {probe.k_}, val balanced acc {probe.selected_params_['val_balanced_accuracy']:.3f}"
    elif name == "fewshot":
        from evalsuite.probes.pooled.fewshot import FewShotProbe
        probe = FewShotProbe(classes, **params)
        means, _ = probe.evaluate({"train": (train_x, train_y), "test": (test_x, test_y)}, "test")
        sets, shots = probe.support_sets, probe.shots
        out["flops"] = 2.0 * len(shots) * sets * nt * classes * dim
        support_rows = sets * classes * sum(shots)
        out["read_unique"] = nt * row + min(support_rows, n) * row
        out["read_total"] = (len(shots) * nt + support_rows) * row
        out["sort_work"] = len(shots) * sets * classes * nt * math.log2(max(nt, 2))  # AUROC per set and class
        out["note"] = f"{max(shots)}-shot balanced acc {means[f'balanced_accuracy_{max(shots)}shot']:.3f}"
    else:
        from evalsuite.probes.pooled.retrieval import RetrievalProbe
        probe = RetrievalProbe(classes, **params)
        means, _ = probe.evaluate({"train": (train_x, train_y), "test": (test_x, test_y)}, "test")
        out["flops"] = 2.0 * nt * n * dim
        out["read_unique"] = (n + nt) * row
        out["read_total"] = (math.ceil(nt / probe.batch_size) * n + nt) * row  # each query batch reads train
        first = sorted(means)[0]
        out["note"] = f"{first} {means[first]:.3f}"
    out["seconds"] = time.perf_counter() - started


def run_metric(stage: Stage, name: str) -> None:
    labels_of, out = stage.job["test_labels"], stage.out
    test_y = np.asarray(stage.cache.open(labels_of["key"], "memmap")[1], dtype=np.int64)
    if labels_of.get("targets") is not None:  # a slide cache's labels are each tile's slide: the targets are slides'
        test_y = np.asarray(labels_of["targets"], dtype=np.int64)
    classes, items = labels_of["classes"], len(test_y)
    probas = [probabilities(test_y, classes, margin, seed) for seed, margin in
              enumerate(np.linspace(1.0, 3.0, RANK_MODELS))]
    started = time.perf_counter()
    if name == "bootstrap":
        from evalsuite.metrics.intervals import bootstrap_intervals
        bootstrap_intervals(test_y, probas[0], draws=DRAWS)
        out["flops"] = 2.0 * DRAWS * items * classes**2
    elif name == "calibration":
        from evalsuite.metrics.calibration import calibration_metrics
        calibration_metrics(test_y, probas[0])
        out["mem_bytes"] = probas[0].nbytes
    else:  # as evalsuite/reporting/statistics/compare.py: one scorer per model, the same draws for all
        from evalsuite.metrics.draw_scores import per_draw_scores
        from evalsuite.metrics.significance import ItemScorer, paired_result, ranks_from_scores
        metric = "balanced_accuracy"
        scorers = {f"model{m}": ItemScorer(test_y, [p], metric) for m, p in enumerate(probas)}
        draws = per_draw_scores(scorers, None, items, DRAWS, 0)
        ranks_from_scores(draws, metric)
        observed = {m: s.score(np.ones(items)) for m, s in list(scorers.items())[:2]}
        paired_result(observed["model0"], observed["model1"], draws["model0"] - draws["model1"])
        out["flops"] = 2.0 * RANK_MODELS * DRAWS * items * classes**2
    out["seconds"] = time.perf_counter() - started
    out["note"] = f"{items} test items, {classes} classes" + (f", {RANK_MODELS} models" * (name == "ranks"))


def run_slide_probe(stage: Stage, name: str) -> None:
    from evalsuite.features.bags import SlideBags
    from evalsuite.probes.recipes import load_recipe

    keys, out = stage.job["slide_keys"], stage.out
    data = stage.opened(keys)
    bags, targets = {}, {}
    for split in SPLITS:
        manifest = stage.cache.manifest(keys[split])
        bags[split] = SlideBags(data[split][0], manifest["scale_offsets"])
        targets[split] = np.asarray(manifest["scale_targets"], dtype=np.int64)
    classes, dim, row = stage.size["slide_classes"], stage.size["dim"], stage.size["dim"] * 2
    tiles = {split: int(bags[split].tile_counts.sum()) for split in SPLITS}
    params = load_recipe(name).params
    started = time.perf_counter()
    if name == "abmil":
        from evalsuite.probes.bags.abmil import ABMILProbe
        probe = ABMILProbe(classes, **params).fit(bags["train"], targets["train"], bags["val"], targets["val"],
                                                  "balanced_accuracy")
        probe.predict_proba(bags["test"])
        epochs = probe.selected_params_["epochs_trained"]
        sampled = int(np.minimum(bags["train"].tile_counts, probe.max_tiles_train).sum())
        proj, att = params["projected_dim"], params["attention_dim"]
        per_tile = 2.0 * (dim * proj + 2 * proj * att)  # forward; training x 3 (forward and backward)
        out["flops"] = per_tile * (3 * epochs * sampled + epochs * tiles["val"] + tiles["test"])
        out["read_unique"] = sum(tiles.values()) * row
        out["read_total"] = (epochs * (sampled + tiles["val"]) + tiles["test"]) * row
        note = f"{epochs} epochs, val balanced acc {probe.selected_params_['val_balanced_accuracy']:.3f}"
    else:
        from evalsuite.probes.bags.meanpool import MeanPoolProbe
        probe = MeanPoolProbe(classes, **params).fit(bags["train"], targets["train"], bags["val"], targets["val"],
                                                     "balanced_accuracy")
        probe.predict_proba(bags["test"])
        out["read_unique"] = out["read_total"] = sum(tiles.values()) * row
        note = f"val balanced acc {probe.selected_params_.get('val_balanced_accuracy', float('nan')):.3f}"
    out["seconds"] = time.perf_counter() - started
    out["note"] = f"{sum(tiles.values())} tiles, {note}"


def worker(job: dict) -> dict:
    """Run one stage; {seconds, flops, read_unique, read_total, mem_bytes, peak_mib, note}."""
    import torch

    torch.manual_seed(0)
    stage, name = Stage(job), job["stage"]
    stage.out["gflops"] = gemm_gflops()  # the rate under the load this stage runs in: its GEMM floor's
    if name == "leaderboard":
        run_leaderboard(stage)
    elif name == "open":
        run_open(stage)
    elif name in METRIC_STAGES:
        run_metric(stage, name)
    elif name in SLIDE_STAGES:
        run_slide_probe(stage, name)
    else:
        run_tile_probe(stage, name)
    stage.out["peak_mib"] = read_status(wanted=("VmHWM",)).get("VmHWM", float("nan"))
    return stage.out


def run_stage(job: dict) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(job)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"scale: stage {job['stage']} ({job['size_name']}) failed (exit {done.returncode}):\n"
                         f"{done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def floor_of(result: dict, rates: dict, mode: str) -> tuple[float, str]:
    """The largest of the terms that can overlap (GEMM, cache reads, memory touched), plus the sorting, which runs
    on one core after the scores exist; the bound names the largest term."""
    terms = {"gemm": result["flops"] / (result.get("gflops", rates["gflops"]) * 1e9),
             "mem": result["mem_bytes"] / rates["memory"],
             "step_gemm": result.get("step_gemm_s", 0.0)}
    if mode == "memmap":
        terms["read"] = (result["read_unique"] / rates["cold"]
                         + max(result["read_total"] - result["read_unique"], 0) / rates["warm"])
    else:
        terms["read"] = result["read_total"] / rates["memory"]
    sort_s = result.get("sort_work", 0.0) / rates["sort"]
    bound = max(terms, key=terms.get)
    return terms[bound] + sort_s, "sort" if sort_s > terms[bound] else bound


# --- main -------------------------------------------------------------------------------------------------------------

def stages_of(size: dict, chosen: list) -> list:
    fitting = set(METRIC_STAGES) | {"leaderboard"}
    if "tiles" in size:
        fitting |= set(TILE_STAGES)
    if "slides" in size:
        fitting |= set(SLIDE_STAGES)
    return [s for s in chosen if s in fitting]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the tiny `quick` size (same as --sizes quick)")
    parser.add_argument("--sizes", default=None, help=f"comma-separated presets of {', '.join(SIZES)} "
                                                      "(default: crc100k,pcam,panda,camelyon16)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated stages (default all: "
                                                                   f"{','.join(STAGES)})")
    parser.add_argument("--cache-mode", choices=("ram", "memmap"), default="memmap",
                        help="how the caches are opened (FeatureCache.open mode; default memmap)")
    parser.add_argument("--scratch", metavar="DIR", help="where the caches go (default: a temporary folder)")
    parser.add_argument("--max-tiles-per-slide", type=int, metavar="N",
                        help="slide presets: at most N tiles per slide (the low end scaled alike), for a shorter run; "
                             "printed beside the table")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    sizes = ["quick"] if args.quick else (args.sizes or "crc100k,pcam,panda,camelyon16").split(",")
    stages = [s for s in args.stages.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES] + [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown size or stage: {', '.join(unknown)}; sizes: {', '.join(SIZES)}; stages: "
                     f"{', '.join(STAGES)}")

    import torch

    from evalsuite.features.cache import FeatureCache
    print(machine_line(), flush=True)
    rates = {"gflops": gemm_gflops(), "memory": memory_rate(), "sort": sort_rate()}
    scratch_parent = Path(args.scratch) if args.scratch else Path(tempfile.gettempdir())
    scratch_parent.mkdir(parents=True, exist_ok=True)
    rows, leaderboard_done = [], False
    for name in sizes:
        size = SIZES[name]
        chosen = stages_of(size, stages)
        if leaderboard_done and "leaderboard" in chosen:
            chosen.remove("leaderboard")
        if not chosen:
            print(f"{name}: none of the chosen stages applies; skipped")
            continue
        free = shutil.disk_usage(scratch_parent).free
        low, high, slide_note = (tiles_per_slide(size, args.cache_mode, free, args.max_tiles_per_slide)
                                 if "slides" in size else (0, 0, ""))
        needed = cache_bytes_needed(size, low, high, set(chosen))
        print(f"{name}: caches need {needed / 1e9:.2f} GB on {scratch_parent} ({free / 1e9:.1f} GB free)"
              + (f"; {slide_note}" if slide_note else ""), flush=True)
        if needed > 0.95 * free:
            print(f"scale: {scratch_parent} has {free / 1e9:.1f} GB free, {name} needs {needed / 1e9:.1f} GB; "
                  "pass --scratch on a larger disk", file=sys.stderr)
            return 1
        with tempfile.TemporaryDirectory(prefix="scale.", dir=scratch_parent) as tmp:
            cache = FeatureCache(Path(tmp) / "cache")
            started = time.perf_counter()
            tile_keys = build_tile_caches(cache, name, size) if "tiles" in size else None
            slide_keys = (build_slide_caches(cache, name, size, low, high)
                          if "slides" in size and set(chosen) & set(SLIDE_STAGES + METRIC_STAGES) else None)
            keys = tile_keys or slide_keys
            files = [cache.folder(keys[s]) / "features.npy" for s in SPLITS]
            print(f"{name}: caches written through FeatureCache in {time.perf_counter() - started:.1f} s "
                  f"({sum(f.stat().st_size for f in files) / 1e9:.2f} GB of features; {host_tag()})", flush=True)
            rates["cold"], rates["warm"] = disk_rates(Path(tmp), max(files, key=lambda f: f.stat().st_size))
            looks = " (looks warm: the page cache was not dropped)" if rates["cold"] > rates["warm"] / 2 else ""
            print(f"rates: GEMM {rates['gflops']:.1f} GFLOP/s (float32 [1024,1536]x[1536,1024], "
                  f"{torch.get_num_threads()} threads), argsort {rates['sort'] / 1e6:.0f}M n log2 n/s, memory "
                  f"{rates['memory'] / 1e9:.1f} GB/s, disk read cold "
                  f"{rates['cold'] / 1e9:.2f} GB/s{looks}, warm {rates['warm'] / 1e9:.2f} GB/s", flush=True)
            test_labels = ({"key": tile_keys["test"], "classes": size["classes"], "targets": None} if tile_keys else
                           {"key": slide_keys["test"], "classes": size["slide_classes"],
                            "targets": cache.manifest(slide_keys["test"])["scale_targets"]})
            for stage in chosen:
                if args.cache_mode == "memmap":
                    drop_page_cache(files)
                job = {"stage": stage, "mode": args.cache_mode, "size": size, "size_name": name,
                       "root": str(cache.root), "tile_keys": tile_keys, "slide_keys": slide_keys,
                       "test_labels": test_labels}
                result = run_stage(job)
                floor, bound = floor_of(result, rates, args.cache_mode)
                rows.append([stage, name, f"{result['seconds']:.2f}", f"{floor:.3g}",
                             f"{result['seconds'] / max(floor, 1e-9):.1f}", f"{result['peak_mib']:.0f}", bound,
                             f"{result['gflops']:.0f}", f"{os.getloadavg()[0]:.1f}", result["note"]])
                print(f"  {stage}: {result['seconds']:.2f} s ({host_tag()})", file=sys.stderr, flush=True)
                leaderboard_done = leaderboard_done or stage == "leaderboard"
    print(f"cache mode {args.cache_mode}; {host_tag()}")
    print(format_table(["stage", "size", "time_s", "floor_s", "ratio", "peak_rss_mib", "bound", "gflops", "load",
                        "note"], rows,
                       left=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
