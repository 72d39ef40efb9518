"""Shared test helpers: run the CLI as users do and read its outputs; tiny copies of every dataset layout."""

import csv
import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

# The demo slides are built once per version of their builder, in a folder every test worker shares (the build is
# locked and atomic), not in the user's ~/.cache.
_BUILDERS = [Path(__file__).resolve().parents[1] / "evalsuite" / "readers" / "demo" / name
             for name in ("demo_slides.py", "demo_slide_pieces.py")]
_BUILDERS_SHA = hashlib.sha256(b"".join(path.read_bytes() for path in _BUILDERS)).hexdigest()[:12]
os.environ.setdefault("EVALSUITE_DATA_HOME", str(Path(tempfile.gettempdir()) /
                                                 f"evalsuite-test-data-{os.getuid()}-{_BUILDERS_SHA}"))

# Under pytest-xdist (-n 2, two test files at a time on a 2-core CI host) each worker and the runs it
# starts compute on one thread: two 2-thread OpenMP pools on 2 cores spin against each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
import scipy.io
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
_PROGRESS = re.compile(r"\|\s*\d+/\d+ \[|^progress: ")  # a tqdm progress-bar redraw, a probe's progress line


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny networks on a 2-core host shared with other jobs: OpenMP's second thread mostly waits for a core (a slide
    probe fit took 10x longer with two threads than with one under load), so a module using this computes on one."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# Commands that only read files under --out (and the shipped cards): run in the test's process, through the same
# cli.main a console script calls, their answer is the same and costs no interpreter start (about a second of
# numpy, pandas and evalsuite imports per call on a 2-core host; 120 calls in the suite). Every other command runs
# in a child process, as users run it: extraction, signals, exit paths and environment are then its own.
READ_ONLY_COMMANDS = {"leaderboard", "report", "show", "list"}


def run_cli(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`python -m evalsuite ARGS` with the test's interpreter; returns the completed process."""
    if args and str(args[0]) in READ_ONLY_COMMANDS:
        return _run_read_only_here([str(arg) for arg in args], cwd, env or {})
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "evalsuite", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_cli_here(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """`evalsuite ARGS` through cli.main in this process, for a command that is refused before it runs anything: the
    same exit code and output as run_cli without a second interpreter importing torch (seconds per call in CI)."""
    return _run_read_only_here([str(arg) for arg in args], cwd, env or {})


def _run_read_only_here(args: list, cwd, env: dict) -> subprocess.CompletedProcess:
    """cli.main(args) in this process with its own stdout and stderr, `cwd` and `env` holding for the call only."""
    import contextlib
    import io
    import warnings

    from evalsuite import cli

    stdout, stderr, saved_env, saved_cwd = io.StringIO(), io.StringIO(), dict(os.environ), os.getcwd()
    try:
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        # "always": a warning a child process would print is printed here too, whatever this process printed before.
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
            warnings.simplefilter("always")
            try:
                code = cli.main(args)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(args, code, stdout.getvalue(), stderr.getvalue())


@pytest.fixture
def cli_in_process(capsys, monkeypatch):
    """`evalsuite ARGS` through the CLI's main() in the test's process, as a completed process: torch is imported
    once per test process, not once per call, so a refusal costs milliseconds instead of seconds of CI time. `cwd`
    and `env` hold for the call only."""
    from evalsuite import cli

    def call(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as patched:
            if cwd is not None:
                patched.chdir(cwd)
            for name, value in (env or {}).items():
                patched.setenv(name, value)
            capsys.readouterr()
            code = cli.main([str(arg) for arg in args])
            captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)
    return call


def run_benchmark(name: str, *args, tmp_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python benchmarks/NAME ARGS` in tmp_path (its temporary files go there too)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def cache_manifests(out_dir: Path) -> dict:
    """{split: manifest} of the feature caches under `out_dir`, as evalsuite reads them (an unfinished cache's chunk
    log replayed: features/chunk_log.py); a manifest being replaced right now is skipped."""
    from evalsuite.errors import EvalsuiteError
    from evalsuite.features.cache import FeatureCache

    cache, found = FeatureCache(Path(out_dir) / "cache"), {}
    for path in cache.root.glob("*/manifest.json"):
        try:
            manifest = cache.manifest(path.parent.name)
        except (EvalsuiteError, FileNotFoundError):
            continue
        if manifest is not None:
            found[manifest["fields"]["split"]] = manifest
    return found


def run_record(out_dir: Path, result: subprocess.CompletedProcess) -> dict:
    """The run JSON of the `evalsuite run` that printed `result` (its summary line names the run id)."""
    summary = next(line.split() for line in result.stdout.splitlines() if line.startswith("task "))
    return json.loads((Path(out_dir) / "runs" / f"{summary[summary.index('run') + 1]}.json").read_text())


def leaderboard_rows(out_dir: Path) -> list[dict]:
    path = Path(out_dir) / "leaderboard.csv"
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """A user error: non-zero exit, a single `evalsuite: error:` line on stderr naming what is wrong."""
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip() and not _PROGRESS.search(line)]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("evalsuite: error:"), lines[0]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def library_warnings(stderr: str) -> list[str]:
    """Lines of a run's stderr that come from a library's warnings (a normal run prints none)."""
    return [line for line in stderr.replace("\r", "\n").splitlines() if "Warning" in line or "warn(" in line]


class RecordingFeatures:
    """A float16 feature store that records the rows of every read, to check the probes' batch contract."""

    def __init__(self, array):
        assert array.dtype.name == "float16"
        self.array = array
        self.rows_per_read = []
        self.shape, self.ndim, self.dtype = array.shape, array.ndim, array.dtype

    def __len__(self):
        return len(self.array)

    def __getitem__(self, index):
        rows = self.array[index]
        self.rows_per_read.append(len(rows))
        return rows


@pytest.fixture
def cli():
    return run_cli


def noisy_class_split(classes: int, per_class: int, dim: int = 16, noise: float = 1.5, seed: int = 0) -> dict:
    """Gaussian classes around random centres, float16, every other sample in train and test."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, size=(classes, dim))
    labels = np.repeat(np.arange(classes), per_class)
    features = (centres[labels] + rng.normal(0, noise, size=(len(labels), dim))).astype(np.float16)
    return {"train": (features[::2], labels[::2]), "test": (features[1::2], labels[1::2])}


# ---- tile-classification layouts ----
# Tiny copies of the tile-classification datasets in their exact on-disk layouts.
#
# File and folder names, HDF5 keys, dtypes and csv columns are those of the distributed
# datasets; only the number of images and (where the format allows) the image size are
# smaller, so the cards run end to end in seconds with --no-count-check.

BACH_PREFIX = {"Benign": "b", "InSitu": "is", "Invasive": "iv", "Normal": "n"}
# One image per split and class: numbers that the BACH split puts in train, val and test.
BACH_NUMBERS = {"Benign": [1, 91, 42], "InSitu": [1, 88, 40], "Invasive": [59, 100, 73], "Normal": [45, 90, 46]}
CRC_CLASSES = ["ADI", "BACK", "DEB", "LYM", "MUC", "MUS", "NORM", "STR", "TUM"]
MHIST_COLUMNS = ["Image Name", "Majority Vote Label", "Number of Annotators who Selected SSA (Out of 7)", "Partition"]
BRACS_CLASSES = ["0_N", "1_PB", "2_UDH", "3_FEA", "4_ADH", "5_DCIS", "6_IC"]
BREAKHIS_SUBTYPES = {"A": "adenosis", "F": "fibroadenoma", "PT": "phyllodes_tumor", "TA": "tubular_adenoma",
                     "DC": "ductal_carcinoma", "LC": "lobular_carcinoma", "MC": "mucinous_carcinoma",
                     "PC": "papillary_carcinoma"}
# (class, subtype, year, patient): 2773 and 21998CD are eva's test patients, 10926 and 13200 THUNDER's val
# patients, the others train; 22549AB (adenosis) is outside the four subtypes of the shipped card.
BREAKHIS_PATIENTS = [("B", "A", "14", "22549AB"), ("B", "F", "14", "9133"), ("B", "TA", "14", "21978AB"),
                     ("M", "DC", "14", "10926"), ("B", "TA", "14", "13200"), ("M", "MC", "13", "2773"),
                     ("B", "F", "14", "21998CD"), ("M", "DC", "14", "2980")]


def write_image(path: Path, size=(32, 32), seed: int = 0) -> Path:
    """A random RGB image (width, height); the format follows the suffix (.tif, .png)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return path


def make_bach(root: Path, numbers=BACH_NUMBERS, size=(64, 48)) -> Path:
    """ICIAR2018_BACH_Challenge/Photos/<class>/<prefix><NNN>.tif (real ones are 2048x1536)."""
    photos = Path(root) / "ICIAR2018_BACH_Challenge" / "Photos"
    for class_name, class_numbers in numbers.items():
        for number in class_numbers:
            write_image(photos / class_name / f"{BACH_PREFIX[class_name]}{number:03d}.tif", size, seed=number)
    (photos / "microscopy_ground_truth.csv").write_text("b001.tif,Benign\n")  # shipped beside the folders
    return Path(root)


def make_crc(root: Path, train_per_class: int = 3, test_per_class: int = 1, size=(224, 224)) -> Path:
    """NCT-CRC-HE-100K/<CLS>/<CLS>-<8 letters>.tif and CRC-VAL-HE-7K/<CLS>/<CLS>-<8 letters>.tif."""
    rng = np.random.default_rng(0)
    for folder, count in (("NCT-CRC-HE-100K", train_per_class), ("CRC-VAL-HE-7K", test_per_class)):
        for class_name in CRC_CLASSES:
            for _ in range(count):
                tag = "".join(rng.choice(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), 8))
                write_image(Path(root) / folder / class_name / f"{class_name}-{tag}.tif", size, seed=int(rng.integers(1 << 30)))
    return Path(root)


def pcam_name(split: str, kind: str) -> str:
    return f"camelyonpatch_level_2_split_{split}_{kind}.h5"


def make_pcam(root: Path, counts=None) -> Path:
    """camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5: x (N,96,96,3) uint8, y (N,1,1,1) uint8."""
    counts = counts or {"train": 8, "valid": 4, "test": 4}
    rng = np.random.default_rng(0)
    Path(root).mkdir(parents=True, exist_ok=True)
    for split, n in counts.items():
        with h5py.File(Path(root) / pcam_name(split, "x"), "w") as file:
            file.create_dataset("x", data=rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8), chunks=(1, 96, 96, 3))
        with h5py.File(Path(root) / pcam_name(split, "y"), "w") as file:
            file.create_dataset("y", data=(np.arange(n) % 2).astype(np.uint8).reshape(n, 1, 1, 1))
    return Path(root)


PCAM_META_HEADER = ["", "coord_y", "coord_x", "tumor_patch", "center_tumor_patch", "wsi"]


def make_pcam_meta(root: Path, split: str, slides: list, labels=None) -> Path:
    """camelyonpatch_level_2_split_<split>_meta.csv as distributed: a pandas index column, then coord_y, coord_x,
    tumor_patch, center_tumor_patch (True/False) and wsi, the tile's Camelyon16 slide; one row per h5 tile."""
    labels = [i % 2 for i in range(len(slides))] if labels is None else labels
    path = Path(root) / f"camelyonpatch_level_2_split_{split}_meta.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(PCAM_META_HEADER)
        for index, (slide, label) in enumerate(zip(slides, labels)):
            writer.writerow([index, 96 * index, 96 * (index + 1), bool(label), bool(label), slide])
    return path


def make_mhist(root: Path, per_class=None, columns=MHIST_COLUMNS, size=(224, 224)) -> Path:
    """images/MHIST_<abc>.png and annotations.csv with the distributed columns."""
    per_class = per_class or {"train": 3, "test": 2}
    rows, index = [], 0
    for partition, count in per_class.items():
        for label in ("HP", "SSA"):
            for _ in range(count):
                name = "MHIST_" + "".join(chr(ord("a") + (index // 26 ** k) % 26) for k in (2, 1, 0)) + ".png"
                write_image(Path(root) / "images" / name, size, seed=index)
                rows.append({"Image Name": name, "Majority Vote Label": label,
                             "Number of Annotators who Selected SSA (Out of 7)": 6 if label == "SSA" else 1,
                             "Partition": partition})
                index += 1
    with open(Path(root) / "annotations.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return Path(root)


def make_bracs(root: Path, per_class: int = 1) -> Path:
    """BRACS_RoI/latest_version/{train,val,test}/<k_CLASS>/BRACS_<wsi>_<CLASS>_<k>.png, sizes vary."""
    for s, split in enumerate(("train", "val", "test")):
        for c, class_name in enumerate(BRACS_CLASSES):
            for k in range(per_class):
                size = (40 + 8 * c, 56 - 4 * s)
                name = f"BRACS_{1000 + 10 * c + s}_{class_name.split('_')[1]}_{k + 1}.png"
                write_image(Path(root) / "BRACS_RoI" / "latest_version" / split / class_name / name, size, seed=c + k)
    return Path(root)


def breakhis_file(root: Path, group: str, subtype: str, year: str, patient: str, number: int,
                  magnification: str = "40") -> Path:
    folder = (Path(root) / "BreaKHis_v1" / "histology_slides" / "breast" / {"B": "benign", "M": "malignant"}[group]
              / "SOB" / BREAKHIS_SUBTYPES[subtype] / f"SOB_{group}_{subtype}_{year}-{patient}" / f"{magnification}X")
    return folder / f"SOB_{group}_{subtype}-{year}-{patient}-{magnification}-{number:03d}.png"


def make_breakhis(root: Path, patients=BREAKHIS_PATIENTS, per_patient: int = 2, size=(70, 46)) -> Path:
    """BreaKHis_v1/histology_slides/breast/{benign,malignant}/SOB/<subtype>/<patient>/{40X,100X}/*.png."""
    for p, patient in enumerate(patients):
        for number in range(1, per_patient + 1):
            write_image(breakhis_file(root, *patient, number), size, seed=p * 10 + number)
        write_image(breakhis_file(root, *patient, 1, magnification="100"), size, seed=p)  # must be ignored
    return Path(root)


def run_card(task: str, data_root: Path, out: Path, sizes: dict) -> None:
    """`evalsuite run` of a shipped card on a fixture (kNN, no workers); checks the samples per split."""
    result = run_cli("run", "--task", task, "--data-root", data_root, "--no-count-check", "--out", out,
                     "--probes", "knn", "--num-workers", "0", "--batch-size", "16")
    assert result.returncode == 0, result.stderr
    rows = [row for row in leaderboard_rows(out) if row["task"] == task]
    assert {row["split"]: int(row["n_samples"]) for row in rows} == sizes
    assert {row["probe"] for row in rows} == {"knn"}


SMALLEST_BACKBONE = ("--model", "vit_tiny_patch16_224", "--random-init")  # timm's 5.7M-parameter ViT, no download


def run_card_in_process(cli_in_process, task: str, data_root: Path, out: Path, sizes: dict,
                        probe: str = "knn") -> list[dict]:
    """`evalsuite run` of a shipped card on a fixture through the CLI's main() in this process, with the smallest
    backbone (random init: a reader test proves the reading, not the score); checks the samples per split and
    returns the task's leaderboard rows."""
    result = cli_in_process("run", "--task", task, "--data-root", data_root, "--no-count-check", "--out", out,
                            "--probes", probe, "--num-workers", "0", "--batch-size", "16", *SMALLEST_BACKBONE)
    assert result.returncode == 0, result.stderr
    rows = [row for row in leaderboard_rows(out) if row["task"] == task]
    assert {row["split"]: int(row["n_samples"]) for row in rows} == sizes
    return rows


# ---- segmentation layouts ----
# Tiny copies of the segmentation datasets in their exact on-disk layouts.
#
# File and folder names, array keys, dtypes and shapes are those of the distributed datasets
# (PanNuke fold arrays, CoNSeP HoVer-Net .png/.mat pairs, MoNuSAC per-patient .tif/.xml); only
# the number of images is smaller (and MoNuSAC images are small, as many real ones are), so the
# cards run end to end in seconds with --no-count-check. Nuclei are dark discs on a pink
# background, so a probe has something to learn.

BACKGROUND_RGB = (230, 180, 210)
NUCLEUS_RGB = (70, 40, 120)
MONUSAC_TRAIN = "MoNuSAC_images_and_annotations"
MONUSAC_TEST = "MoNuSAC Testing Data and Annotations"
MONUSAC_CLASSES = ["Epithelial", "Lymphocyte", "Neutrophil", "Macrophage"]


def _discs(rng, height: int, width: int, count: int, n_types: int):
    """(type map int [H, W] with 0 = none and 1..n_types, instance map int [H, W], list of (type, cy, cx, r))."""
    types = np.zeros((height, width), dtype=np.int64)
    instances = np.zeros((height, width), dtype=np.int64)
    yy, xx = np.mgrid[:height, :width]
    placed = []
    for instance in range(1, count + 1):
        radius = int(rng.integers(5, 12))
        cy, cx = int(rng.integers(radius, height - radius)), int(rng.integers(radius, width - radius))
        kind = int(rng.integers(1, n_types + 1))
        inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= radius ** 2
        types[inside], instances[inside] = kind, instance
        placed.append((kind, cy, cx, radius))
    return types, instances, placed


def _rgb(rng, types: np.ndarray) -> np.ndarray:
    image = np.empty((*types.shape, 3), dtype=np.float64)
    image[:] = BACKGROUND_RGB
    image[types > 0] = NUCLEUS_RGB
    image += rng.normal(0, 12, image.shape)
    return np.clip(image, 0, 255)


# ---------------------------------------------------------------- PanNuke

def pannuke_paths(root: Path, fold: int) -> dict:
    base = Path(root) / f"Fold {fold}"
    return {"images": base / "images" / f"fold{fold}" / "images.npy",
            "types": base / "images" / f"fold{fold}" / "types.npy",
            "masks": base / "masks" / f"fold{fold}" / "masks.npy"}


def make_pannuke(root: Path, counts=(3, 2, 2), size: int = 256, tissues=("Breast", "Colon", "Lung")) -> Path:
    """Fold N/images/foldN/{images,types}.npy and Fold N/masks/foldN/masks.npy, float64 as released; the tiles'
    tissue types cycle through `tissues`."""
    rng = np.random.default_rng(0)
    for fold, count in enumerate(counts, start=1):
        paths = pannuke_paths(root, fold)
        for path in paths.values():
            path.parent.mkdir(parents=True, exist_ok=True)
        images = np.empty((count, size, size, 3), dtype=np.float64)
        masks = np.zeros((count, size, size, 6), dtype=np.float64)
        for i in range(count):
            types, instances, _ = _discs(rng, size, size, 25, 5)
            images[i] = np.rint(_rgb(rng, types))
            for channel in range(5):
                masks[i, ..., channel] = np.where(types == channel + 1, instances, 0)
            masks[i, ..., 5] = (types == 0).astype(np.float64)
        np.save(paths["images"], images)
        np.save(paths["masks"], masks)
        np.save(paths["types"], np.array(list(tissues) * count)[:count])
    return Path(root)


# ---------------------------------------------------------------- CoNSeP

def make_consep(root: Path, train: int = 3, test: int = 2, size: int = 1000) -> Path:
    """{Train,Test}/Images/<split>_<k>.png (RGBA) and {Train,Test}/Labels/<split>_<k>.mat with the HoVer-Net keys."""
    rng = np.random.default_rng(1)
    for folder, count in (("Train", train), ("Test", test)):
        for k in range(1, count + 1):
            types, instances, placed = _discs(rng, size, size, 120, 7)
            rgba = np.concatenate([_rgb(rng, types).astype(np.uint8), np.full((size, size, 1), 255, np.uint8)], axis=2)
            image = Path(root) / folder / "Images" / f"{folder.lower()}_{k}.png"
            image.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rgba, "RGBA").save(image)
            write_consep_mat(Path(root) / folder / "Labels" / f"{folder.lower()}_{k}.mat", types, instances, placed)
    return Path(root)


def write_consep_mat(path: Path, types: np.ndarray, instances: np.ndarray, placed, keys=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "inst_map": instances.astype(np.float64),
        "type_map": types.astype(np.float64),
        "inst_type": np.array([[kind] for kind, *_ in placed], dtype=np.float64),
        "inst_centroid": np.array([[cx, cy] for _, cy, cx, _ in placed], dtype=np.float64),
    }
    scipy.io.savemat(path, {k: v for k, v in content.items() if keys is None or k in keys})


# ---------------------------------------------------------------- MoNuSAC

def monusac_xml(polygons_by_class: dict) -> str:
    """An Aperio ImageScope annotation file as MoNuSAC ships it: one Annotation per class."""
    parts = ['<?xml version="1.0"?>', '<Annotations MicronsPerPixel="0.252100">']
    for a, (name, polygons) in enumerate(polygons_by_class.items(), start=1):
        parts += [f'<Annotation Id="{a}" Name="" ReadOnly="0" NameReadOnly="0" LineColorReadOnly="0" Incremental="0" '
                  f'Type="4" LineColor="65280" Visible="1" Selected="1" MarkupImagePath="" MacroName="">',
                  '<Attributes>', f'<Attribute Name="{name}" Id="0" Value=""/>', '</Attributes>', '<Regions>',
                  '<RegionAttributeHeaders>',
                  '<AttributeHeader Id="9999" Name="Region" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9997" Name="Length" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9996" Name="Area" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9998" Name="Text" ColumnWidth="-1"/>',
                  '</RegionAttributeHeaders>']
        for r, polygon in enumerate(polygons, start=1):
            parts += [f'<Region Id="{r}" Type="0" Zoom="1" Selected="0" ImageLocation="" ImageFocus="-1" '
                      f'Length="40.0" Area="100.0" LengthMicrons="10.0" AreaMicrons="6.3" Text="" NegativeROA="0" '
                      f'InputRegionId="0" Analyze="1" DisplayId="{r}">', '<Attributes/>', '<Vertices>']
            parts += [f'<Vertex X="{x:.4f}" Y="{y:.4f}" Z="0"/>' for x, y in polygon]
            parts += ['</Vertices>', '</Region>']
        parts += ['</Regions>', '<Plots/>', '</Annotation>']
    parts.append('</Annotations>')
    return "\n".join(parts) + "\n"


def _octagon(cy: float, cx: float, radius: float) -> list:
    angles = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    return [(cx + radius * np.cos(a), cy + radius * np.sin(a)) for a in angles]


def write_monusac_image(folder: Path, name: str, size, rng, ambiguous: bool = False) -> tuple:
    """<folder>/<name>.tif (RGB) and <name>.xml; returns the (type id, polygon) list drawn."""
    width, height = size
    types = np.zeros((height, width), dtype=np.int64)
    by_class = {c: [] for c in MONUSAC_CLASSES}
    yy, xx = np.mgrid[:height, :width]
    for _ in range(max(4, width * height // 2500)):
        radius = float(rng.integers(4, 9))
        cy, cx = float(rng.integers(10, height - 10)), float(rng.integers(10, width - 10))
        kind = int(rng.integers(1, 5))
        by_class[MONUSAC_CLASSES[kind - 1]].append(_octagon(cy, cx, radius))
        types[(yy - cy) ** 2 + (xx - cx) ** 2 <= radius ** 2] = kind
    if ambiguous:
        by_class["Ambiguous"] = [_octagon(height / 2, width / 2, 10.0)]
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_rgb(rng, types).astype(np.uint8)).save(folder / f"{name}.tif")
    (folder / f"{name}.xml").write_text(monusac_xml(by_class))
    return by_class


def make_monusac(root: Path) -> Path:
    """MoNuSAC_images_and_annotations/<patient>/<patient>_<k>.{tif,xml} (4 patients) and the testing folder
    (1 patient, with an Ambiguous annotation). Sizes vary and are not multiples of the 256 px tile."""
    rng = np.random.default_rng(2)
    train = {"TCGA-5P-A9K0-01Z-00-DX1": [(300, 200)], "TCGA-55-1594-01Z-00-DX1": [(120, 90), (260, 260)],
             "TCGA-73-4668-01Z-00-DX1": [(200, 310)], "TCGA-A2-A0ES-01Z-00-DX1": [(256, 256)]}
    test = {"TCGA-2Z-A9JG-01Z-00-DX1": [(280, 150), (113, 81)]}
    for folder, patients in ((MONUSAC_TRAIN, train), (MONUSAC_TEST, test)):
        for patient, sizes in patients.items():
            for k, size in enumerate(sizes, start=1):
                write_monusac_image(Path(root) / folder / patient, f"{patient}_{k}", size, rng,
                                    ambiguous=folder == MONUSAC_TEST)
    return Path(root)


def marked_bags(slides: int, seed: int, dim: int, shift: float, tiles: tuple):
    """(SlideBags, labels) of `slides` synthetic slides of `tiles` = (low, high) tiles each; class 1 slides hold 3
    tiles shifted by `shift` along one fixed direction (the MIL toy problem of the slide-probe tests)."""
    from evalsuite.features.bags import SlideBags

    rng = np.random.default_rng(seed)
    marker = np.random.default_rng(99).normal(size=dim)
    marker *= shift / np.linalg.norm(marker)
    labels = np.arange(slides) % 2
    per_slide = []
    for label in labels:
        bag = rng.normal(size=(int(rng.integers(*tiles)), dim))
        if label:
            bag[rng.choice(len(bag), 3, replace=False)] += marker
        per_slide.append(bag)
    counts = [len(bag) for bag in per_slide]
    return SlideBags(np.concatenate(per_slide).astype(np.float16), np.concatenate([[0], np.cumsum(counts)])), labels


# ---- small real file systems (disk-fault tests): a tmpfs per test (root only; skipped without), made read-only
# or filled up to a few free bytes

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size_bytes) -> the mount point of a fresh tmpfs; unmounted when the test ends."""
    points = []

    def mount(size_bytes: int = 4 * 1024**2) -> Path:
        point = tmp_path / f"tmpfs{len(points)}"
        point.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "evalsuite-test", str(point)],
                                capture_output=True, text=True) if shutil.which("mount") else None
        if result is None or result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip() if result else 'no mount'}")
        points.append(point)
        return point

    yield mount
    for point in reversed(points):
        subprocess.run(["umount", str(point)], check=True)


def remount_read_only(point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)


def free_bytes(point: Path) -> int:
    stats = os.statvfs(point)
    return stats.f_bavail * stats.f_frsize


def fill_leaving(point: Path, free: int) -> None:
    """Fill the file system with a file, then give `free` bytes back: writes beyond them fail with ENOSPC."""
    filler = point / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\xff" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(descriptor)
    os.truncate(filler, filler.stat().st_size - free)
    assert free <= free_bytes(point) < free + PAGE
