"""Tiny copies of the tile-classification datasets in their exact on-disk layouts.

File and folder names, HDF5 keys, dtypes and csv columns are those of the distributed
datasets; only the number of images and (where the format allows) the image size are
smaller, so the cards run end to end in seconds with --no-count-check.
"""

import csv
from pathlib import Path

import h5py
import numpy as np
from conftest import leaderboard_rows, run_cli
from PIL import Image

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
