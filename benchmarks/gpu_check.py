"""One GPU, one pass, no download: is extraction as fast as the forward, and what do GPU memory, bf16, the suite's
CUDA tests and torchrun say on this card (issue 39).

What is measured
----------------
Three random-init ViTs at 224 px, built by ``evalsuite.models.backbones.build_backbone(name, random_init=True)``
(timm's ``create_model(name, pretrained=False, num_classes=0)``; weights do not change any figure here), on the GPU:
``vit_large_patch14_224`` (ViT-L/14), ``vit_huge_patch14_224`` (ViT-H/14) and ``vit_giant_patch14_224`` (ViT-g/14),
fewer tiles the larger the model. For each, in order:

- ``forward``: ``backbone.pooled_features`` on one random batch already on the GPU, as extraction batches it (64
  on a GPU, 16 on the CPU: ``config.default_batch_size``), under ``torch.inference_mode()`` and the precision a run
  picks (``--precision auto``: bf16 autocast on an H100), 3 untimed batches first, then the model's tile count;
  the device is synchronised before and after the clock.
- ``PCam extraction``: ``evalsuite.features.extract.extract_to_cache`` into a new ``FeatureCache`` (chunked
  float16 file, fsync, sha256, manifest), as a run calls it, on ``PcamReader``'s dataset of a synthetic PCam: the
  distributed file layout (``camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5``, ``x`` uint8 [N, 96, 96, 3]
  uncompressed, ``y`` [N, 1, 1, 1]) with uniform random pixels; the three models read the train, valid and test
  files, each holding that model's tile count. Tiles are read and resized to 224 px by the run's DataLoader workers
  (``runtime/cpus.py default_num_workers``: beside a GPU the CPUs less one, at most 12), converted on the GPU.
- ``slide extraction``: the same on ``SlideTiles`` of synthetic slides: tiled pyramidal JPEG TIFFs written by
  the demo slide builder's ``write_pyramid_tiff`` (generic and SVS-like, 0.5 um/px), a block of tissue-coloured
  noise on glass, tiled by ``tile_slides`` with the default tiling (224 px at 0.5 um/px, >= 50 % tissue), read
  with OpenSlide; chunks and batches end at each slide, as a run fills a slide cache.
- ``GPU memory``: ``torch.cuda.max_memory_allocated`` over each of the three steps above (peak statistics reset
  before each). The budget planner (features/budget.py) plans host RAM only and has no GPU-memory estimate; the
  weights' bytes it counts (``model_bytes``) are printed beside the peak instead.
- ``bf16 vs fp32``: pooled features of the first PCam tiles (the reader's per-tile transform) in float32 (TF32
  off for matmuls and convolutions) and under bf16 autocast; per tile the relative error ||bf16 - fp32|| / ||fp32||
  (L2 over the feature vector), its maximum and median over the tiles, and the lowest cosine similarity.
Then ``slide encoders``: each slide encoder of the registry (``--slide-encoders``) at its published size, random
weights, float32 (TF32 off), at 1,000 and 10,000 tiles per slide (``--slide-tiles``), measured as
``benchmarks/slide_encoders.py`` measures a point (its functions, in this process): random-normal tile features and
level-0 coordinates on a square grid of the entry's tile side, one warm-up forward on 64 tiles, then seconds per
slide (the fastest of up to 5 forwards within 2 s) and ``torch.cuda.max_memory_allocated`` over the weights, beside
``forward_bytes`` (models/slide/memory.py: the estimate a run refuses a slide with) and peak / estimate; a point out
of GPU memory is printed as such and the others still run.
Then ``CUDA tests``: the suite has no CUDA marker, so the tests that name the GPU are run: ``python -m pytest -q
-k "cuda or gpu or device"`` over the test files that mention ``cuda`` (this check's own smoke test excluded), in a
subprocess, with their pass / fail / skip counts. And ``torchrun``: ``torchrun --standalone --nproc_per_node=1 -m
evalsuite run --task demo --model test_vit --random-init --probes knn --num-workers 0`` (timm's small test ViT,
the shipped demo data), its exit code, wall time and what its run JSON says of device, precision and ranks.

How to read it
--------------
- ``extraction / forward``: extraction img/s (every tile of the split, cache set-up, worker start-up and the last
  chunk's write included) over forward img/s. The goal printed is >= 0.9. ``steady / forward`` leaves out the
  time until the first forward (cache set-up, forking the workers, their first batch), paid once per split: a real
  split (PCam's 262,144 train tiles) approaches it. A steady ratio below the goal means something per batch
  (reading, the batch conversion, the chunk writes) keeps the GPU waiting; ``--num-workers`` shows whether reading
  is it.
- ``peak`` GiB against the weights' GiB: the rest is activations at the extraction batch size, the input batch and
  the allocator's blocks.
- bf16 vs fp32: bf16 keeps 8 significant bits (unit roundoff 2^-8, about 4e-3), so errors of the order of
  1e-2 after a network's layers are expected (the smoke run's test_vit on the CPU: median 7e-3); a NaN, or an error
  near 1 (cosine far from 1), is a fault. Random-init weights: trained ones may give other values.
- Every figure is one run on whatever else the machine does: the device line (``machine: <GPU>, torch ...``) and
  the host line (CPU capability, usable cores, load average) are printed with them; compare figures of one run.
- Each part's seconds are printed as it ends; a part that fails is recorded with its one-line error and the others
  still run. Exit status: 0 when every part ran and the tests and torchrun passed, 1 otherwise, 2 without a GPU.

``--smoke``: the same code on tiny sizes for CI on the CPU (timm's ``test_vit``, a handful of tiles, one small
slide, precision as a run picks it there: fp32, or bf16 where the CPU has it natively); the GPU-memory part says
``skipped: no CUDA device`` and the CUDA tests are only collected, not run. The slide-encoder part runs on
``--smoke`` only for the encoders ``--slide-encoders`` names (at 50 tiles; on the CPU seconds only). With a GPU,
``--smoke`` runs the GPU parts on the tiny sizes. Writes ``gpu_check.json`` and ``gpu_check.md`` under ``--out``
(default ``./gpu_check_out``); the synthetic data go to a temporary folder, removed at the end.

Run: ``python benchmarks/gpu_check.py [--out DIR] [--num-workers N] [--models LABEL ...] [--slide-encoders NAME ...]
[--slide-tiles N ...] [--no-subprocesses]`` on one GPU (105 s on one H100 with 16 cores, 2026-11-27, before the
slide-encoder part, not yet run on a GPU: docs/compute.md has its table);
``python benchmarks/gpu_check.py --smoke --out DIR`` on the CPU (17 s on 2 AVX-512 cores, torchrun 8 s of it).
On a machine without the project installed, ``PYTHONPATH=<repo>`` is enough where torch, timm, h5py, tifffile and
openslide-python + openslide-bin are installed.
"""

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _shared import host_tag, machine_line

REPO = Path(__file__).resolve().parents[1]
SMOKE_TEST = "test_benchmarks_gpu_check_smoke.py"  # runs this script: never among the tests it runs
GOAL_RATIO = 0.9
WARMUP_BATCHES = 3
GIB = 1024**3
TILE_PX = 224  # the tiling's tile side at 0.5 um/px (readers/slides/base.py TILING_DEFAULTS)
SLIDE_MPP = 0.5
GLASS_RGB = (240, 238, 242)
TISSUE_RGB = (205, 135, 185)
TEST_SELECTION = "cuda or gpu or device"
TORCHRUN_RUN = ("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                "--num-workers", "0")
SUBPROCESS_TIMEOUT_S = 300
PCAM_SPLITS = ("train", "val", "test")  # model i reads split i
NO_CUDA = "skipped: no CUDA device"


@dataclass(frozen=True)
class ModelSize:
    label: str
    timm_names: tuple  # the first one the installed timm has is built
    tiles: int  # forward and PCam tiles
    slide_tiles: int  # at least this many slide tiles (whole slides)


@dataclass(frozen=True)
class Sizes:
    models: tuple
    slide_side_tiles: int  # tissue tiles along each side of a synthetic slide
    compare_tiles: int  # tiles of the bf16 vs fp32 comparison
    slide_encoder_tiles: tuple = ()  # tiles per slide of the slide-encoder part's points


# Slide tiles as many as PCam tiles: a split's start-up (forking the workers, their first batches) weighs on a short
# extraction; the first H100 run's 4,096 ViT-L slide tiles spent 0.2-0.4 s of 2.4-3.2 s before the first forward.
FULL = Sizes(models=(ModelSize("ViT-L/14", ("vit_large_patch14_224", "vit_large_patch14_clip_224"), 16384, 16384),
                     ModelSize("ViT-H/14", ("vit_huge_patch14_224", "vit_huge_patch14_clip_224"), 8192, 8192),
                     ModelSize("ViT-g/14", ("vit_giant_patch14_224", "vit_giant_patch14_clip_224"), 4096, 4096)),
             slide_side_tiles=32, compare_tiles=32, slide_encoder_tiles=(1000, 10000))
# The smoke sizes measure no slide encoder unless --slide-encoders names some (then at 50 tiles): CI's smoke run
# stays as it was.
SMOKE = Sizes(models=(ModelSize("timm test ViT", ("test_vit",), 32, 16),), slide_side_tiles=4, compare_tiles=4,
              slide_encoder_tiles=(50,))


# --- device --------------------------------------------------------------------------------------

def pick_device(smoke: bool):
    """The GPU, or the CPU with --smoke; None without either (the caller stops with one line)."""
    import torch

    with warnings.catch_warnings():  # a CUDA build without a driver warns here; the one line says it instead
        warnings.simplefilter("ignore")
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu") if smoke else None


def no_gpu_line() -> str:
    from evalsuite.runtime.devices import why_no_cuda

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reason = why_no_cuda()
    return f"gpu_check: needs a CUDA GPU; pass --smoke for the CPU check ({reason})"


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_gpu_peak(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def gpu_peak_gib(device) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated(device) / GIB if device.type == "cuda" else None


@contextlib.contextmanager
def strict_fp32():
    """Float32 matmuls and convolutions without TF32 (cuDNN allows TF32 by default): the reference is float32."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# --- synthetic data ------------------------------------------------------------------------------

def write_pcam(root: Path, counts: dict) -> Path:
    """PCam's distributed files: `x` uint8 [N, 96, 96, 3] (uniform random pixels), `y` [N, 1, 1, 1] (0/1)."""
    import h5py

    from evalsuite.readers.tiles.pcam import FILE_SPLITS, TILE_SHAPE

    rng = np.random.default_rng(39)
    root.mkdir(parents=True, exist_ok=True)
    for split, count in counts.items():
        name = f"camelyonpatch_level_2_split_{FILE_SPLITS[split]}"
        with h5py.File(root / f"{name}_x.h5", "w") as file:
            x = file.create_dataset("x", shape=(count, *TILE_SHAPE), dtype=np.uint8)
            for start in range(0, count, 1024):  # a block at a time: the largest file is ~450 MB
                stop = min(count, start + 1024)
                x[start:stop] = rng.integers(0, 256, (stop - start, *TILE_SHAPE), dtype=np.uint8)
        with h5py.File(root / f"{name}_y.h5", "w") as file:
            file.create_dataset("y", data=(np.arange(count) % 2).astype(np.uint8).reshape(count, 1, 1, 1))
    return root


def slide_canvas(rng, side_tiles: int) -> np.ndarray:
    """Level-0 RGB: glass with noise, one tile wide on every side, around a square of tissue-coloured noise."""
    side_px = (side_tiles + 2) * TILE_PX
    block = rng.integers(-24, 25, size=(512, 512, 3), dtype=np.int16)
    repeats = (-(-side_px // 512), -(-side_px // 512), 1)
    noise = np.tile(block, repeats)[:side_px, :side_px]
    canvas = (noise // 8 + np.array(GLASS_RGB, dtype=np.int16)).clip(0, 255).astype(np.uint8)
    inner = slice(TILE_PX, side_px - TILE_PX)
    canvas[inner, inner] = (noise[inner, inner] + np.array(TISSUE_RGB, dtype=np.int16)).clip(0, 255)
    return canvas


def write_slide(path: Path, index: int, side_tiles: int) -> None:
    """One tiled pyramidal JPEG TIFF (even index: SVS-like, odd: generic TIFF), its noise drawn from seed 39 + index."""
    from evalsuite.readers.demo.demo_slides import write_pyramid_tiff

    write_pyramid_tiff(path, slide_canvas(np.random.default_rng(39 + index), side_tiles), index % 2 == 0,
                       mpp=SLIDE_MPP)


def write_slides(folder: Path, count: int, side_tiles: int) -> list:
    """`count` synthetic slides, written in parallel processes (each JPEG-encodes its pyramid on one core), and
    their slide records."""
    from concurrent.futures import ProcessPoolExecutor

    from evalsuite.readers.slides.slide_manifest import SlideRecord
    from evalsuite.runtime.cpus import usable_cpus

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"synthetic-{index}.{'svs' if index % 2 == 0 else 'tif'}" for index in range(count)]
    if count == 1:
        write_slide(paths[0], 0, side_tiles)
    else:
        with ProcessPoolExecutor(min(count, usable_cpus())) as pool:
            list(pool.map(write_slide, paths, range(count), [side_tiles] * count))
    return [SlideRecord(f"synthetic-{index}", path, (0,), f"patient-{index}", "test")
            for index, path in enumerate(paths)]


def first_slides(layout, tiles: int):
    """The layout's first whole slides that hold at least `tiles` tiles (all of them when they hold fewer)."""
    from evalsuite.readers.slides.base import SlideLayout

    slides = min(int(np.searchsorted(layout.offsets[1:], tiles)) + 1, len(layout.slide_ids))
    return SlideLayout(layout.slide_ids[:slides], layout.paths[:slides], layout.offsets[:slides + 1],
                       layout.coords_level0[:layout.offsets[slides]], layout.levels[:slides],
                       layout.read_sizes_px[:slides], layout.tile_size_px)


def make_data(work: Path, sizes: Sizes, num_workers: int) -> dict:
    """The synthetic PCam root and the tiled slides every model reads."""
    from evalsuite.readers.slides.base import TILING_DEFAULTS, tile_slides

    started = time.perf_counter()
    counts = {split: 2 for split in PCAM_SPLITS}  # the reader needs all three pairs; unused ones hold 2 tiles
    counts.update({PCAM_SPLITS[i]: model.tiles for i, model in enumerate(sizes.models)})
    pcam_root = write_pcam(work / "pcam", counts)
    pcam_s = time.perf_counter() - started
    per_slide = sizes.slide_side_tiles ** 2
    slides = -(-max(model.slide_tiles for model in sizes.models) // per_slide)
    started = time.perf_counter()
    records = write_slides(work / "slides", slides, sizes.slide_side_tiles)
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    layout = tile_slides(records, dict(TILING_DEFAULTS), False, num_workers, "gpu_check")
    tiling_s = time.perf_counter() - started
    return {"pcam_root": pcam_root, "layout": layout, "summary": {
        "pcam_tiles": counts, "pcam_write_s": pcam_s, "slides": slides, "slide_tiles": layout.tiles,
        "slide_write_s": write_s, "slide_tiling_s": tiling_s}}


# --- the measurements ----------------------------------------------------------------------------

def timm_name(candidates: tuple) -> str:
    import timm

    for name in candidates:
        if timm.is_model(name):
            return name
    raise RuntimeError(f"timm {timm.__version__} has none of {', '.join(candidates)}")


def build_model(name: str, device):
    """The random-init backbone, its weights initialised on the device they run on."""
    import torch

    from evalsuite.models.backbones import build_backbone

    with torch.device(device):
        backbone = build_backbone(name, random_init=True)
    backbone.model.to(device).eval()
    return backbone


class FirstForward:
    """features_of for extract_to_cache: the backbone's pooled features through the run's forward clock
    (features/throughput.py ForwardClock, as prepare.py wraps them), noting when the first forward started."""

    def __init__(self, backbone, device):
        from evalsuite.features.throughput import ForwardClock

        self.clock, self.first_start = ForwardClock(backbone.pooled_features, device), None

    def __call__(self, images):
        self.first_start = self.first_start or time.perf_counter()
        return self.clock(images)


def forward_rate(backbone, device, precision: str, batch_size: int, tiles: int) -> dict:
    """img/s of the forward alone on a random batch already on the device."""
    import torch

    from evalsuite.features.extract import _memory_format
    from evalsuite.runtime.allocator import reuse_freed_memory
    from evalsuite.runtime.precision import autocast_context

    batch = torch.randn(batch_size, *backbone.data_config["input_size"], device=device)
    batch = batch.contiguous(memory_format=_memory_format(backbone.model))
    batches = max(1, -(-tiles // batch_size))
    reset_gpu_peak(device)
    with reuse_freed_memory(), torch.inference_mode(), autocast_context(device, precision):
        for _ in range(WARMUP_BATCHES):
            output = backbone.pooled_features(batch)
        synchronize(device)
        started = time.perf_counter()
        for _ in range(batches):
            backbone.pooled_features(batch)
        synchronize(device)
        seconds = time.perf_counter() - started
    return {"tiles": batches * batch_size, "seconds": seconds, "img_per_s": batches * batch_size / seconds,
            "row_shape": list(output.shape[1:]), "peak_gib": gpu_peak_gib(device)}


def extraction_rate(backbone, dataset, layout, row_shape, device, precision: str, batch_size: int,
                    num_workers: int, root: Path) -> dict:
    """img/s of extract_to_cache into a new cache under `root` (a slide cache when `layout` is given)."""
    from evalsuite.features.cache import FeatureCache
    from evalsuite.features.extract import extract_to_cache
    from evalsuite.features.prepare import chunk_rows_for
    from evalsuite.features.slide_features import cache_layout

    chunk_rows = chunk_rows_for(row_shape, batch_size, None)  # as a run sizes them
    cache, key, forward = FeatureCache(root), "gpu-check", FirstForward(backbone, device)
    reset_gpu_peak(device)
    started = time.perf_counter()
    writer = cache.start_or_resume(key, (len(dataset), *row_shape), dataset.labels,
                                   {"benchmark": "gpu_check", "model": backbone.name}, chunk_rows, {},
                                   cache_layout(layout, chunk_rows) if layout is not None else None)
    forwarded = extract_to_cache(backbone, dataset, writer, device, batch_size=batch_size, num_workers=num_workers,
                                 precision=precision, description="gpu_check", features_of=forward,
                                 show_progress=False, pad_to_batch=layout is None)  # slide caches are not padded
    seconds = time.perf_counter() - started
    if forwarded != len(dataset) or not cache.is_complete(key):
        raise RuntimeError(f"extract_to_cache forwarded {forwarded} of {len(dataset)} tiles")
    shutil.rmtree(root, ignore_errors=True)
    startup = forward.first_start - started
    return {"tiles": len(dataset), "seconds": seconds, "img_per_s": len(dataset) / seconds, "startup_s": startup,
            "steady_img_per_s": len(dataset) / (seconds - startup), "chunk_rows": chunk_rows,
            "peak_gib": gpu_peak_gib(device)}


def precision_error(backbone, dataset, device, tiles: int) -> dict:
    """Per tile ||bf16 - fp32|| / ||fp32|| of the pooled features: max, median; and the lowest cosine."""
    import torch

    from evalsuite.runtime.precision import autocast_context

    images = torch.stack([dataset[i][0] for i in range(min(tiles, len(dataset)))]).to(device)
    with torch.inference_mode():
        with strict_fp32():
            reference = backbone.pooled_features(images).float()
        with autocast_context(device, "bf16"):
            low = backbone.pooled_features(images).float()
    relative = ((low - reference).norm(dim=1) / reference.norm(dim=1).clamp_min(1e-12)).cpu()
    cosine = torch.nn.functional.cosine_similarity(low, reference, dim=1).cpu()
    return {"tiles": len(images), "max_rel_error": float(relative.max()), "median_rel_error": float(relative.median()),
            "min_cosine": float(cosine.min())}


def measure_model(model: ModelSize, index: int, data: dict, device, settings: dict, sizes: Sizes, work: Path) -> dict:
    """Every per-model figure, each step timed; the model is freed at the end."""
    import torch

    from evalsuite.features.budget import model_bytes
    from evalsuite.models.transforms import build_transform
    from evalsuite.readers import build_reader
    from evalsuite.readers.slides.base import SlideTiles
    from evalsuite.tasks.cards import load_card

    steps, result = {}, {"label": model.label}

    def step(name, function, *args):
        started = time.perf_counter()
        value = function(*args)
        steps[name] = time.perf_counter() - started
        return value

    name = result["timm_name"] = timm_name(model.timm_names)
    backbone = step("build", build_model, name, device)
    result["weights_gib"] = model_bytes(backbone.model) / GIB
    transform = build_transform(backbone.data_config)
    precision, batch, workers = settings["precision"], settings["batch_size"], settings["num_workers"]
    result["forward"] = step("forward", forward_rate, backbone, device, precision, batch, model.tiles)
    row_shape = tuple(result["forward"]["row_shape"])
    reader = build_reader(load_card("pcam"), str(data["pcam_root"]), check_counts=False)
    pcam = reader.dataset(PCAM_SPLITS[index], transform)
    result["pcam"] = step("pcam_extraction", extraction_rate, backbone, pcam, None, row_shape, device, precision,
                          batch, workers, work / "cache-pcam")
    slides = first_slides(data["layout"], model.slide_tiles)
    result["slides"] = step("slide_extraction", extraction_rate, backbone, SlideTiles(slides, transform), slides,
                            row_shape, device, precision, batch, workers, work / "cache-slides")
    result["slides"]["slides"] = len(slides.slide_ids)
    result["bf16_vs_fp32"] = step("bf16_vs_fp32", precision_error, backbone, pcam, device, sizes.compare_tiles)
    result["steps_s"] = steps
    result["host"] = host_tag()
    del backbone
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


# --- slide encoders ------------------------------------------------------------------------------

def slide_encoder_names(args) -> list:
    """The slide encoders the part measures: --slide-encoders, else every entry on the full sizes, none on --smoke."""
    from evalsuite.models.slide.entries import SLIDE_ENCODERS

    if args.slide_encoders is None:
        return [] if args.smoke else list(SLIDE_ENCODERS)
    return [name for name in args.slide_encoders if name != "none"]


def slide_encoder_point(encoder, tiles: int, device) -> dict:
    """benchmarks/slide_encoders.py's measurement in this process: on a GPU seconds and the peak over the weights;
    on the CPU (smoke) seconds only, the host's peak needing a process of its own."""
    import torch
    from slide_encoders import cuda_point, slide_inputs, summary, timed_forwards, warm_up

    try:
        if device.type == "cuda":
            return cuda_point(encoder, tiles, device)
        warm_up(encoder, device)
        features, coords, side = slide_inputs(encoder.spec, tiles, device)
        return {**summary(timed_forwards(encoder.model, features, coords, side, device)), "peak_bytes": None}
    except torch.OutOfMemoryError:
        return {"skipped": "out of memory on the GPU"}


def measure_slide_encoders(names: list, tile_counts: tuple, device) -> list:
    """Seconds per slide and peak GPU memory of each slide encoder, float32, random weights, beside forward_bytes."""
    import torch
    from slide_encoders import build_on

    from evalsuite.models.slide.memory import forward_bytes

    rows = []
    for name in names:
        encoder = build_on(name, device)
        with strict_fp32():
            for tiles in tile_counts:
                rows.append({"model": name, "tiles": tiles, "estimate_bytes": forward_bytes(encoder.spec, tiles),
                             **slide_encoder_point(encoder, tiles, device), "host": host_tag()})
        del encoder
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def slide_encoder_cells(row: dict) -> list:
    estimate = f"{row['estimate_bytes'] / GIB:.3f}"
    if "skipped" in row:
        return [row["model"], row["tiles"], row["skipped"], "", estimate, ""]
    peak = row["peak_bytes"]
    return [row["model"], row["tiles"], f"{row['seconds']:.4f}", f"{peak / GIB:.3f}" if peak is not None else NO_CUDA,
            estimate, f"{peak / row['estimate_bytes']:.2f}" if peak is not None else ""]


SLIDE_HEADER = ["slide encoder", "tiles", "s/slide", "peak GiB", "forward_bytes GiB", "peak / estimate"]


def slide_encoder_table(rows: list) -> str:
    from _shared import format_table

    return "slide encoders, float32:\n" + format_table(SLIDE_HEADER, [slide_encoder_cells(row) for row in rows], left=1)


# --- the subprocess parts ------------------------------------------------------------------------

def cuda_test_files() -> list[str]:
    """Test files that mention CUDA (the suite has no CUDA marker), this check's own smoke test left out."""
    return sorted(str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")
                  if path.name != SMOKE_TEST and "cuda" in path.read_text(encoding="utf-8"))


def pytest_counts(summary: str) -> dict:
    """{outcome: count} from pytest's last line, e.g. `25 passed, 2 skipped, 73 deselected in 18.27s`."""
    import re

    counts = {word.rstrip("s") if word.startswith("error") else word: int(number)
              for number, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)",
                                              summary)}
    collected = re.search(r"(\d+)(?:/\d+)? tests? collected", summary)
    if collected:
        counts["collected"] = int(collected.group(1))
    return counts


def cuda_tests(device) -> dict:
    """The CUDA tests run (on a GPU) or only collected (without one), in a subprocess from the repository root."""
    import importlib.util

    if importlib.util.find_spec("pytest") is None:
        return {"status": "skipped", "reason": "pytest is not installed (pip install -e '.[dev]')"}
    files = cuda_test_files()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-k", TEST_SELECTION,
               *files]
    collect_only = device.type != "cuda"
    if collect_only:
        command.append("--collect-only")
    started = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    summary = lines[-1] if lines else "no output"
    record = {"command": shlex.join(["python", *command[1:]]), "files": files, "exit_code": result.returncode,
              "wall_s": time.perf_counter() - started, "summary": summary, "counts": pytest_counts(summary),
              "status": "ok" if result.returncode == 0 else "failed"}
    if collect_only and result.returncode == 0:
        record.update(status="skipped", reason=f"{NO_CUDA}: the tests were collected, not run")
    return record


def torchrun_demo(out: Path) -> dict:
    """`torchrun --standalone --nproc_per_node=1 -m evalsuite run ...` on the demo: exit code, wall time, run JSON."""
    launcher = Path(sys.executable).with_name("torchrun")
    command = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "torch.distributed.run"]
    command += ["--standalone", "--nproc_per_node=1", "-m", "evalsuite", *TORCHRUN_RUN, "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}, check=False)
    record = {"command": shlex.join(command), "exit_code": result.returncode, "wall_s": time.perf_counter() - started,
              "status": "ok" if result.returncode == 0 else "failed", "out": str(out)}
    runs = sorted((out / "runs").glob("*.json")) if out.is_dir() else []
    if runs:
        run = json.loads(runs[-1].read_text())
        record.update(device=run.get("device"), precision=run.get("precision"),
                      world_size=(run.get("distributed") or {}).get("world_size"),
                      samples_extracted_per_rank=(run.get("distributed") or {}).get("samples_extracted_per_rank"))
    if result.returncode != 0:
        record["error"], record["stderr_tail"] = child_error(result.stderr)
    return record


def child_error(stderr: str) -> tuple:
    """(the run's own error line, the last 40 lines): torchrun ends its stderr with a summary framed in `=` lines
    whose last line says nothing; the child's `evalsuite: ...` line or traceback's last line comes before it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    named = [line for line in lines if line.startswith("evalsuite") or "Error" in line.split(":")[0]]
    return (named[-1] if named else lines[-1] if lines else "no output"), lines[-40:]


# --- the run -------------------------------------------------------------------------------------

def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def run_part(parts: dict, name: str, function, *args):
    """function(*args) timed and recorded under `name`; an exception is recorded (one line) and the run goes on."""
    started = time.perf_counter()
    try:
        value = function(*args)
        status = value.get("status", "ok") if isinstance(value, dict) else "ok"
    except Exception as exc:  # noqa: BLE001 - one failed part must not hide the others' figures
        value, status = None, "error"
        parts[name] = {"status": status, "error": one_line(exc)}
    seconds = time.perf_counter() - started
    parts.setdefault(name, {"status": status})["seconds"] = seconds
    if isinstance(value, dict) and value.get("reason"):
        parts[name]["reason"] = value["reason"]
    detail = parts[name].get("error") or parts[name].get("reason") or ""
    print(f"part {name}: {status} in {seconds:.1f} s{f' ({detail})' if detail else ''}", flush=True)
    return value


def goal_word(ratio: float, smoke: bool) -> str:
    word = "met" if ratio >= GOAL_RATIO else "NOT met"
    return f"{word} (smoke sizes: not a measurement)" if smoke else word


def print_model(model: dict, device, smoke: bool) -> None:
    forward = model["forward"]
    print(f"{model['label']} ({model['timm_name']}, {model['weights_gib']:.2f} GiB of weights): forward "
          f"{forward['img_per_s']:.1f} img/s on {forward['tiles']} tiles ({model['host']})")
    for data, label in (("pcam", "PCam"), ("slides", "slides")):
        run = model[data]
        ratio, steady = run["img_per_s"] / forward["img_per_s"], run["steady_img_per_s"] / forward["img_per_s"]
        print(f"  {label} extraction: {run['img_per_s']:.1f} img/s on {run['tiles']} tiles, extraction / forward "
              f"{ratio:.3f} (steady {steady:.3f}; start-up {run['startup_s']:.2f} s); goal >= {GOAL_RATIO}: "
              f"{goal_word(ratio, smoke)} ({model['host']})")
    if device.type == "cuda":
        print(f"  GPU memory peak: forward {forward['peak_gib']:.2f} GiB, PCam extraction "
              f"{model['pcam']['peak_gib']:.2f} GiB, slide extraction {model['slides']['peak_gib']:.2f} GiB; "
              f"weights {model['weights_gib']:.2f} GiB; the planner has no GPU-memory estimate")
    else:
        print(f"  GPU memory: {NO_CUDA}")
    error = model["bf16_vs_fp32"]
    print(f"  bf16 vs fp32 pooled features ({error['tiles']} tiles): relative error max {error['max_rel_error']:.2e}, "
          f"median {error['median_rel_error']:.2e}; lowest cosine {error['min_cosine']:.5f}")
    print("  seconds: " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in model["steps_s"].items()), flush=True)


def md_table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def markdown(report: dict) -> str:
    models = report["models"]
    cuda = report["device"].startswith("cuda")
    settings = (f"- device {report['device']}, precision {report['precision']}, batch {report['batch_size']}, "
                f"{report['num_workers']} DataLoader worker(s), {'smoke' if report['smoke'] else 'full'} sizes, "
                f"{report['total_s']:.1f} s in all")
    lines = ["# gpu_check (issue 39)", "", f"- {report['machine']}", f"- {report['host']}", settings, "", "## Parts",
             "",
             md_table(["part", "status", "seconds", "note"],
                      [[name, part["status"], f"{part['seconds']:.1f}", part.get("error") or part.get("reason", "")]
                       for name, part in report["parts"].items()]),
             "", f"## Throughput: extraction vs forward (goal >= {GOAL_RATIO})", ""]
    rows = []
    for model in models:
        forward = model["forward"]["img_per_s"]
        for data in ("pcam", "slides"):
            run = model[data]
            rows.append([model["label"], data, run["tiles"], f"{forward:.1f}", f"{run['img_per_s']:.1f}",
                         f"{run['img_per_s'] / forward:.3f}", f"{run['steady_img_per_s'] / forward:.3f}",
                         goal_word(run["img_per_s"] / forward, report["smoke"])])
    lines += [md_table(["model", "data", "tiles", "forward img/s", "extraction img/s", "extraction / forward",
                        "steady / forward", "goal"], rows) if rows else "no model measured", "", "## GPU memory", ""]
    if cuda:
        lines += [md_table(["model", "weights GiB", "peak forward GiB", "peak PCam GiB", "peak slides GiB",
                            "planner estimate"],
                           [[m["label"], f"{m['weights_gib']:.2f}", f"{m['forward']['peak_gib']:.2f}",
                             f"{m['pcam']['peak_gib']:.2f}", f"{m['slides']['peak_gib']:.2f}", "none"]
                            for m in models]),
                  "", "The budget planner (features/budget.py) plans host RAM only: it has no GPU-memory estimate."]
    else:
        lines.append(NO_CUDA)
    lines += ["", "## Slide encoders (float32, random weights)", ""]
    if report.get("slide_encoders"):
        lines += [md_table(SLIDE_HEADER, [slide_encoder_cells(row) for row in report["slide_encoders"]]), "",
                  "peak: torch.cuda.max_memory_allocated over the weights; forward_bytes: the estimate a run refuses "
                  "a slide with (models/slide/memory.py); benchmarks/slide_encoders.py measures the same on the CPU."]
    else:
        part = report["parts"].get("slide encoders")
        lines.append(f"not measured: {part.get('error')}" if part else "not measured: --slide-encoders names none")
    lines += ["", "## bf16 vs fp32 pooled features", "",
              md_table(["model", "tiles", "max relative error", "median relative error", "lowest cosine"],
                       [[m["label"], m["bf16_vs_fp32"]["tiles"], f"{m['bf16_vs_fp32']['max_rel_error']:.2e}",
                         f"{m['bf16_vs_fp32']['median_rel_error']:.2e}", f"{m['bf16_vs_fp32']['min_cosine']:.5f}"]
                        for m in models]), "", "## CUDA tests", ""]
    tests = report.get("cuda_tests") or {}
    if tests.get("reason"):
        lines.append(tests["reason"])
    lines += [f"`{tests.get('command', '')}`: exit {tests.get('exit_code')}, {tests.get('summary', '')}", "",
              "## torchrun", ""]
    torchrun = report.get("torchrun") or {}
    lines.append(f"`{torchrun.get('command', '')}`: exit {torchrun.get('exit_code')} in "
                 f"{torchrun.get('wall_s', 0):.1f} s; device {torchrun.get('device')}, precision "
                 f"{torchrun.get('precision')}, world size {torchrun.get('world_size')}"
                 + (f"; error: {torchrun['error']}" if torchrun.get("error") else ""))
    return "\n".join(lines) + "\n"


def save(report: dict, out: Path, started: float) -> tuple:
    """gpu_check.json and gpu_check.md as the report stands (written after each part)."""
    report["total_s"] = time.perf_counter() - started
    json_path, md_path = out / "gpu_check.json", out / "gpu_check.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path


def run(args, device) -> int:
    from evalsuite.config import default_batch_size
    from evalsuite.runtime.cpus import default_num_workers, use_threads
    from evalsuite.runtime.precision import resolve_precision

    started = time.perf_counter()
    sizes = SMOKE if args.smoke else FULL
    use_threads()  # as `evalsuite run` sets them
    settings = {"precision": resolve_precision("auto", device), "batch_size": default_batch_size(device.type),
                "num_workers": default_num_workers(device.type) if args.num_workers is None else args.num_workers}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine_line(device), "host": host_tag(), "device": str(device), "smoke": args.smoke,
              **settings, "goal_ratio": GOAL_RATIO, "parts": {}, "models": []}
    print(report["machine"])
    print(report["host"])
    print(f"gpu_check: device {device}, precision {settings['precision']}, batch {settings['batch_size']}, "
          f"{settings['num_workers']} worker(s), {'smoke' if args.smoke else 'full'} sizes", flush=True)
    parts = report["parts"]
    sizes = Sizes(tuple(m for m in sizes.models if not args.models or m.label in args.models), sizes.slide_side_tiles,
                  sizes.compare_tiles, tuple(args.slide_tiles or sizes.slide_encoder_tiles))
    work = Path(tempfile.mkdtemp(prefix="evalsuite-gpu-check-"))
    try:
        data = run_part(parts, "data", make_data, work, sizes, settings["num_workers"])
        if data is not None:
            report["data"] = data["summary"]
            for index, model in enumerate(sizes.models):
                measured = run_part(parts, f"model {model.label}", measure_model, model, index, data, device,
                                    settings, sizes, work)
                if measured is not None:
                    report["models"].append(measured)
                    print_model(measured, device, args.smoke)
                save(report, out, started)  # a run stopped at its time limit keeps the models it measured
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = slide_encoder_names(args)
    if names:
        report["slide_encoders"] = run_part(parts, "slide encoders", measure_slide_encoders, names,
                                            sizes.slide_encoder_tiles, device)
        if report["slide_encoders"]:
            print(slide_encoder_table(report["slide_encoders"]), flush=True)
        save(report, out, started)
    if device.type != "cuda":
        parts["gpu memory"] = {"status": "skipped", "seconds": 0.0, "reason": NO_CUDA}
        print(f"part gpu memory: {NO_CUDA}")
    if args.no_subprocesses:
        report["cuda_tests"] = parts["cuda tests"] = {"status": "skipped", "seconds": 0.0,
                                                      "reason": "--no-subprocesses"}
    else:
        report["cuda_tests"] = run_part(parts, "cuda tests", cuda_tests, device)
    if report["cuda_tests"] and "summary" in report["cuda_tests"]:
        print(f"  {report['cuda_tests']['summary']}")
    save(report, out, started)
    if args.no_subprocesses:
        report["torchrun"] = parts["torchrun"] = {"status": "skipped", "seconds": 0.0, "reason": "--no-subprocesses"}
    else:
        torchrun_out = Path(tempfile.mkdtemp(prefix="evalsuite-gpu-check-torchrun-"))
        try:
            report["torchrun"] = run_part(parts, "torchrun", torchrun_demo, torchrun_out)
        finally:
            shutil.rmtree(torchrun_out, ignore_errors=True)
    if report["torchrun"] and "exit_code" in report["torchrun"]:
        print(f"  exit {report['torchrun']['exit_code']} in {report['torchrun']['wall_s']:.1f} s, "
              f"world size {report['torchrun'].get('world_size')}, device {report['torchrun'].get('device')}")
        print("\n".join(f"  | {line}" for line in report["torchrun"].get("stderr_tail", [])))
    json_path, md_path = save(report, out, started)
    print(f"json: {json_path}")
    print(f"markdown: {md_path}")
    failed = [name for name, part in parts.items() if part["status"] in ("error", "failed")]
    print(f"gpu_check: {report['total_s']:.1f} s in all; "
          + (f"failed: {', '.join(failed)}" if failed else "every part ran"), flush=True)
    return 1 if failed else 0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check_out",
                        help="folder of gpu_check.json, gpu_check.md and the torchrun run (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, for CI on the CPU (the GPU parts run on the tiny sizes where there is one)")
    parser.add_argument("--num-workers", type=int, default=None,
                        help="DataLoader workers of the extractions (default: as a run picks them on the device)")
    parser.add_argument("--models", nargs="+", choices=[m.label for m in FULL.models + SMOKE.models], default=None,
                        help="measure only these models (default: every model of the sizes)")
    parser.add_argument("--slide-encoders", nargs="+", default=None,
                        help="slide encoders of the slide-encoder part (default: all on the full sizes, none with "
                             "--smoke); 'none' leaves the part out")
    parser.add_argument("--slide-tiles", nargs="+", type=int, default=None,
                        help="tiles per slide of the slide-encoder part (default: 1000 10000; 50 with --smoke)")
    parser.add_argument("--no-subprocesses", action="store_true",
                        help="leave out the CUDA tests and torchrun (a second run at other settings)")
    args = parser.parse_args(argv)
    if args.num_workers is not None and args.num_workers < 0:
        parser.error("--num-workers must be >= 0")
    if args.slide_tiles is not None and min(args.slide_tiles) < 1:
        parser.error("--slide-tiles must be >= 1")
    if args.slide_encoders:
        from evalsuite.models.slide.entries import SLIDE_ENCODERS

        unknown = [name for name in args.slide_encoders if name not in (*SLIDE_ENCODERS, "none")]
        if unknown:
            parser.error(f"--slide-encoders: unknown {', '.join(unknown)} (known: {', '.join(SLIDE_ENCODERS)}, none)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    device = pick_device(args.smoke)
    if device is None:
        print(no_gpu_line(), file=sys.stderr)
        return 2
    return run(args, device)


if __name__ == "__main__":
    sys.exit(main())
