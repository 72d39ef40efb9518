"""Image datasets fetched a batch at a time (readers/batch_decoding.py): uint8 pixels decoded on threads, converted to
the model's input once per batch, bit for bit what the per-image transform gives."""

import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BACH_NUMBERS, BACH_PREFIX, assert_one_line_error, cache_manifests, run_cli
from PIL import Image
from torch.utils.data import default_collate

import evalsuite
from evalsuite.models.transforms import build_transform
from evalsuite.readers.demo.hgsc_tiles import read_image
from evalsuite.readers.tiles.bach import BachReader
from evalsuite.tasks.cards import load_card

CONFIG = {"input_size": (3, 56, 56), "interpolation": "bicubic", "mean": (0.485, 0.456, 0.406),
          "std": (0.229, 0.224, 0.225)}


def _real_he_bach(root, modes=("RGB",)):
    """A BACH subset (conftest's photo numbers, plus Benign 42-47 in the test split) cut from the real H&E crop:
    640x480 photos, so the 480 px square shrinks 8.6x to 56 px (the reducing-gap path); saved in `modes` in turn
    (an RGBA or L file is converted to RGB on decoding)."""
    source = read_image(Path(evalsuite.__file__).parent / "data" / "hgsc_nest" / "hgsc_nest.jpg")
    numbers = {**BACH_NUMBERS, "Benign": BACH_NUMBERS["Benign"] + list(range(43, 48))}
    photos = root / "ICIAR2018_BACH_Challenge" / "Photos"
    for class_name, class_numbers in numbers.items():
        (photos / class_name).mkdir(parents=True)
        for number in class_numbers:
            top, left = 60 * (number % 16), 40 * (number % 20)
            image = Image.fromarray(source[top : top + 480, left : left + 640]).convert(modes[number % len(modes)])
            image.save(photos / class_name / f"{BACH_PREFIX[class_name]}{number:03d}.tif")
    return root


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_of_photos_is_bit_for_bit_the_per_image_transform(tmp_path, threads):
    reader = BachReader(load_card("bach"), _real_he_bach(tmp_path, modes=("RGB", "RGBA", "L")), check_counts=False)
    transform = build_transform(CONFIG)
    dataset = reader.dataset("test", transform)
    indices = [i for i, path in enumerate(dataset.paths) if path.name.startswith("b0")]
    expected = torch.stack([dataset[i][0] for i in indices])
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        items = dataset.__getitems__(indices)
    finally:
        torch.set_num_threads(previous)
    images, labels = default_collate(items)
    assert images.dtype == torch.uint8 and tuple(images.shape) == (6, 56, 56, 3)
    assert labels.tolist() == [0] * 6
    batch = dataset.prepare_batch(images)
    assert batch.is_contiguous(memory_format=torch.channels_last)
    assert batch.dtype == torch.float32 and torch.equal(batch, expected)
    if threads == 2:
        assert len([t for t in threading.enumerate() if t.name.startswith("evalsuite-decode")]) >= 2


def test_a_transform_that_cannot_be_split_runs_whole_per_image(tmp_path):
    reader = BachReader(load_card("bach"), _real_he_bach(tmp_path), check_counts=False)
    dataset = reader.dataset("test", lambda image: torch.from_numpy(np.asarray(image, dtype=np.float32)))
    items = dataset.__getitems__([0, 1])
    assert items[0][0].dtype == torch.float32 and torch.equal(items[0][0], dataset[0][0])
    images = default_collate(items)[0]
    assert dataset.prepare_batch(images) is images


def test_a_corrupt_photo_in_a_threaded_batch_is_one_line_naming_it(tmp_path):
    root = _real_he_bach(tmp_path)
    broken = root / "ICIAR2018_BACH_Challenge" / "Photos" / "Benign" / "b043.tif"
    broken.write_bytes(broken.read_bytes()[:200])
    result = run_cli("run", "--task", "bach", "--model", "test_vit", "--random-init", "--data-root", root,
                     "--no-count-check", "--num-workers", "0", "--threads", "2", "--out", tmp_path / "out", timeout=300)
    assert_one_line_error(result, "b043.tif")


def test_a_run_without_workers_extracts_the_same_cache_as_one_with_a_worker(tmp_path):
    caches = {}
    for workers in ("0", "1"):
        out = tmp_path / f"out{workers}"
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                         "--num-workers", workers, "--threads", "2", "--out", out, timeout=300)
        assert result.returncode == 0, result.stderr
        caches[workers] = {split: [chunk["sha256"] for chunk in manifest["chunks"]]
                           for split, manifest in cache_manifests(out).items()}
    assert caches["0"] == caches["1"] and caches["0"]
