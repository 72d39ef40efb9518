"""SPIDER (metadata.json + images/, or THUNDER's center_crop/ copy) and STARC-9 (per-class folders) readers."""

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_card_in_process
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.spider import CLASSES, SpiderReader
from evalsuite.readers.tiles.starc9 import SPLIT_DIRS, Starc9Reader
from evalsuite.tasks.cards import load_card

TILE_PX = 16
COLOURS = [(220, 120, 160), (90, 60, 150), (240, 220, 230)]


def write_png(path, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (TILE_PX, TILE_PX), colour).save(path)


def make_spider(root, organ, slides_per_class=None, patches_per_slide=2):
    """A SPIDER organ folder: metadata.json and a flat images/ holding central and context patches. Two classes,
    each slide of one class; 5 train and 2 test slides per class unless told."""
    slides_per_class = slides_per_class or {"train": 5, "test": 2}
    records = []
    for split, n_slides in slides_per_class.items():
        for label, name in enumerate(CLASSES[organ][:2]):
            for slide in range(n_slides):
                slide_id = f"{split}_{label}_{slide}"
                for patch in range(patches_per_slide):
                    central = f"{slide_id}_p{patch}_center.png"
                    context = {"0_0": f"{slide_id}_p{patch}_ctx.png"}  # one of the 24, enough for the layout
                    write_png(root / "images" / central, COLOURS[label])
                    write_png(root / "images" / context["0_0"], COLOURS[2])
                    records.append({"slide_id": slide_id, "image_name": central, "context_info": context,
                                    "class": name, "split": split})
    (root / "metadata.json").write_text(json.dumps(records), encoding="utf-8")
    return root


@pytest.mark.parametrize("organ", sorted(CLASSES))
def test_spider_splits_by_slide(tmp_path, organ):
    reader = SpiderReader(load_card(f"spider_{organ}"), make_spider(tmp_path, organ), check_counts=False,
                          organ=organ)
    sizes = {split: len(reader.splits[split][0]) for split in ("train", "val", "test")}
    assert sizes == {"train": 16, "val": 4, "test": 8}  # one of 5 train slides per class to val, 2 patches each
    assert not set(reader.groups("train")) & set(reader.groups("val"))
    assert all("ctx" not in path.name for split in reader.splits.values() for path in split[0])  # context unused
    assert np.bincount(reader.splits["test"][1]).tolist() == [4, 4]


def test_spider_card_runs(tmp_path, cli_in_process):
    root = make_spider(tmp_path / "SPIDER-thorax", "thorax")
    run_card_in_process(cli_in_process, "spider_thorax", root, tmp_path / "out", {"train": 16, "val": 4, "test": 8})


def test_spider_reads_thunder_converted_copy(tmp_path):
    for split, n_slides in (("train", 5), ("test", 1)):
        for label, name in enumerate(CLASSES["colorectal"][:2]):
            for slide in range(n_slides):
                write_png(tmp_path / "center_crop" / split / name / f"s{split}{label}{slide}" / "p.png",
                          COLOURS[label])
    reader = SpiderReader(load_card("spider_colorectal"), tmp_path, check_counts=False, organ="colorectal")
    assert [len(reader.splits[s][0]) for s in ("train", "val", "test")] == [8, 2, 2]


def test_spider_breast_sizes_are_checked(tmp_path):
    with pytest.raises(EvalsuiteError, match="SPIDER-breast split 'train' has 20 images.*80858"):
        SpiderReader(load_card("spider_breast"), make_spider(tmp_path, "breast"), organ="breast")


def test_spider_unknown_class_is_one_line_error(tmp_path, cli_in_process):
    root = make_spider(tmp_path / "data", "skin", {"train": 2, "test": 1}, patches_per_slide=1)
    records = json.loads((root / "metadata.json").read_text())
    records[1]["class"] = "Dragon scale"
    (root / "metadata.json").write_text(json.dumps(records))
    result = cli_in_process("run", "--task", "spider_skin", "--data-root", root, "--out", tmp_path / "out")
    assert_one_line_error(result, f"{root / 'metadata.json'} record 1: class 'Dragon scale'")


def test_spider_missing_metadata_is_one_line_error(tmp_path, cli_in_process):
    (tmp_path / "data" / "images").mkdir(parents=True)
    result = cli_in_process("run", "--task", "spider_colorectal", "--data-root", tmp_path / "data",
                            "--out", tmp_path / "out")
    assert_one_line_error(result, f"missing {tmp_path / 'data' / 'metadata.json'}", "metadata.json and images/")


def make_starc9(root, per_class=2):
    """STARC-9 as its zips unpack: class folders, train's nested one level (ADI/ADI/*.png) as some zips do."""
    for split, folder in SPLIT_DIRS.items():
        for label, name in enumerate(load_card("starc9").classes):
            nested = folder / name / name if split == "train" else folder / name
            for index in range(per_class):
                write_png(root / nested / f"{name}_{index}.png", COLOURS[label % 2])
    return root


def test_starc9_card_runs(tmp_path, cli_in_process):
    run_card_in_process(cli_in_process, "starc9", make_starc9(tmp_path / "data"), tmp_path / "out",
                        {"train": 18, "val": 18, "test": 18})


def test_starc9_train_size_is_checked(tmp_path):
    with pytest.raises(EvalsuiteError, match="Training_data_normalized has 18 images.*630000"):
        Starc9Reader(load_card("starc9"), make_starc9(tmp_path))


def test_starc9_missing_class_folder_is_named(tmp_path):
    root = make_starc9(tmp_path)
    for path in (root / SPLIT_DIRS["test"] / "TUM").iterdir():
        path.unlink()
    (root / SPLIT_DIRS["test"] / "TUM").rmdir()
    with pytest.raises(EvalsuiteError, match="missing class folder .*STANFORD-CRC-HE-VAL-LARGE/TUM"):
        Starc9Reader(load_card("starc9"), root, check_counts=False)
