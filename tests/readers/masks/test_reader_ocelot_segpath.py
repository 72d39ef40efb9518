"""OCELOT and SegPath readers on tiny fixtures in the released layouts (OCELOT 2023 zip, SegPath Zenodo records):
THUNDER's 256 px grid, the class maps, the official splits, the count check, bad input, the cards end to end."""

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, run_card_in_process
from PIL import Image

from evalsuite.downloads.model import Download
from evalsuite.downloads.sources_ocelot_segpath import SOURCES
from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.readers.masks import ocelot, segpath
from evalsuite.tasks.cards import load_card

# (split, image id, height, width): a 512 px image gives 4 tiles, a 256 x 300 one 1 (its 44 px remainder dropped).
OCELOT_IMAGES = [("train", "001", 512, 512), ("train", "002", 256, 300), ("val", "003", 256, 256),
                 ("test", "004", 256, 256), ("test", "005", 300, 256)]
OCELOT_TILES = {"train": 5, "val": 1, "test": 2}
SEGPATH_IMAGES = [("train", 256, 256), ("train", 300, 512), ("val", 256, 256), ("test", 256, 256)]
SEGPATH_TILES = {"train": 3, "val": 1, "test": 1}
# End to end: one tile per split (each tile costs the backbone a forward pass).
OCELOT_ONE_TILE = [("train", "001", 256, 256), ("val", "002", 256, 256), ("test", "003", 256, 300)]
SEGPATH_ONE_TILE = [("train", 256, 256), ("val", 256, 256), ("test", 256, 300)]
ONE_TILE = {"train": 1, "val": 1, "test": 1}


def _tissue(height: int, width: int, inside, outside) -> tuple[np.ndarray, np.ndarray]:
    """(RGB image, label) with a dark square in the top-left quarter labelled `inside`, the rest `outside`."""
    label = np.full((height, width), outside, dtype=np.uint8)
    label[: height // 2, : width // 2] = inside
    rgb = np.where((label == inside)[..., None], (90, 40, 120), (230, 180, 210)).astype(np.uint8)
    return rgb, label


def make_ocelot(root: Path, images=tuple(OCELOT_IMAGES)) -> Path:
    base = root / ocelot.RELEASE_FOLDER
    for split, name, height, width in images:
        rgb, label = _tissue(height, width, 2, 1)
        label[-8:, -8:] = 255  # unknown: ignored
        for kind, array, suffix in (("images", rgb, ".jpg"), ("annotations", label, ".png")):
            path = base / kind / split / "tissue" / f"{name}{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(array).save(path)
        (base / "images" / split / "cell").mkdir(exist_ok=True)  # the cell patches are not read
    return root


def make_segpath(root: Path, cell_type: str = "epithelial", gzipped: bool = False,
                 images=tuple(SEGPATH_IMAGES)) -> Path:
    kind = segpath.CELL_TYPES[cell_type]
    lines = ["filename,train_val_test,organ"]
    for k, (split, height, width) in enumerate(images):
        rgb, label = _tissue(height, width, 1, 0)
        stem = f"{kind['folder']}/{kind['folder']}_{k}_000000_{k:06d}"
        (root / kind["folder"]).mkdir(parents=True, exist_ok=True)
        Image.fromarray(rgb).save(root / f"{stem}_HE.png")
        Image.fromarray(label).save(root / f"{stem}_mask.png")
        lines += [f"{stem}_HE.png,{split},colon", f"{stem}_mask.png,{split},colon"]
    text = ("\n".join(lines) + "\n").encode()
    (root / kind["fileinfo"]).write_bytes(gzip.compress(text) if gzipped else text)
    return root


def _reader(task: str, root: Path, check_counts: bool = False):
    return build_reader(load_card(task), str(root), check_counts)


def _sizes(reader) -> dict:
    return {split: len(reader.tiles[split]) for split in ("train", "val", "test")}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ocelot_segpath")
    return {"ocelot": make_ocelot(root / "ocelot"), "segpath_epithelial": make_segpath(root / "segpath_ep"),
            "segpath_lymphocytes": make_segpath(root / "segpath_ly", "lymphocytes", gzipped=True)}


def test_ocelot_tissue_labels_map_to_thunders_classes_on_its_grid(data):
    reader = _reader("ocelot", data["ocelot"])
    assert _sizes(reader) == OCELOT_TILES
    assert reader.tiles["train"][:, 1:].tolist() == [[0, 0], [0, 256], [256, 0], [256, 256], [0, 0]]
    labels = reader.dataset("train", np.asarray).labels
    assert labels.shape == (5, 256, 256) and labels.dtype == np.uint8
    assert labels[0, 0, 0] == 1 and labels[3, 0, 0] == 0 and labels[3, -1, -1] == 255  # 2 -> 1, 1 -> 0, 255 kept
    assert reader.item_ids("test")[1] == "ocelot2023_v1.0.1/images/test/tissue/005.jpg tile 0,0 256px"
    assert reader.groups("train") == ["ocelot2023_v1.0.1/images/train/tissue/001.jpg"] * 4 + [
        "ocelot2023_v1.0.1/images/train/tissue/002.jpg"]


def test_segpath_reads_the_file_lists_splits_and_skips_its_mask_rows(data):
    epithelial = _reader("segpath_epithelial", data["segpath_epithelial"])
    lymphocytes = _reader("segpath_lymphocytes", data["segpath_lymphocytes"])  # a gzip-compressed file list
    assert _sizes(epithelial) == _sizes(lymphocytes) == SEGPATH_TILES
    labels = epithelial.dataset("train", np.asarray).labels
    assert set(np.unique(labels)) == {0, 1} and labels[0, 0, 0] == 1 and labels[0, -1, -1] == 0
    image, index = epithelial.dataset("val", np.asarray)[0]
    assert index == 0 and image.shape == (256, 256, 3)


def test_the_count_check_holds_thunders_tiles_per_image():
    assert {s: n * ocelot.TILES_PER_IMAGE for s, n in ocelot.OFFICIAL_IMAGES.items()} == {
        "train": 6400, "val": 2192, "test": 2016}
    assert {s: n * segpath.TILES_PER_IMAGE for s, n in segpath.CELL_TYPES["epithelial"]["images"].items()} == {
        "train": 197208, "val": 20331, "test": 21042}
    assert {s: n * segpath.TILES_PER_IMAGE for s, n in segpath.CELL_TYPES["lymphocytes"]["images"].items()} == {
        "train": 94077, "val": 9738, "test": 6642}


@pytest.mark.parametrize("task, official", [("ocelot", "official dataset has 400"),
                                            ("segpath_epithelial", "official dataset has 21912")])
def test_a_subset_fails_the_count_check(data, task, official):
    with pytest.raises(EvalsuiteError, match=official):
        _reader(task, data[task], check_counts=True)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["ocelot", "segpath_epithelial"])
def test_card_runs_end_to_end_on_its_layout(tmp_path, cli_in_process, task):
    if task == "ocelot":
        root = make_ocelot(tmp_path / "data", OCELOT_ONE_TILE)
    else:
        root = make_segpath(tmp_path / "data", images=SEGPATH_ONE_TILE)
    recipe = tmp_path / "seg_linear_tiny.yaml"  # the card's linear probe, few epochs: the test proves the reading
    recipe.write_text("name: seg_linear\nprobe: seg_linear\nparams: {epochs: 2, batch_size: 8}\n")
    rows = run_card_in_process(cli_in_process, task, root, tmp_path / "out", ONE_TILE, probe=str(recipe))
    assert {row["headline_metric"] for row in rows} == {"dice_mean"}
    assert all(0 <= float(row["value"]) <= 1 for row in rows if row["metric"] == "dice_mean")


def test_ocelot_missing_label_is_one_line_naming_it(data, tmp_path, cli_in_process):
    root = shutil.copytree(data["ocelot"], tmp_path / "ocelot")
    label = root / ocelot.RELEASE_FOLDER / "annotations" / "val" / "tissue" / "003.png"
    label.unlink()
    result = cli_in_process("run", "--task", "ocelot", "--data-root", root, "--out", tmp_path / "out",
                            "--no-count-check", "--model", "vit_tiny_patch16_224", "--random-init")
    assert_one_line_error(result, str(label), "missing tissue label")


@pytest.mark.parametrize("task, value", [("ocelot", 3), ("segpath_epithelial", 255)])
def test_a_label_value_out_of_range_names_the_file(data, tmp_path, task, value):
    root = shutil.copytree(data[task], tmp_path / task)
    reader = _reader(task, root)
    path = reader.source.masks[int(reader.tiles["test"][0, 0])]
    label = np.asarray(Image.open(path)).copy()
    label[5, 5] = value
    Image.fromarray(label).save(path)
    with pytest.raises(EvalsuiteError) as raised:
        reader.dataset("test", np.asarray).labels
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and f"value {value}, out of range" in message


def test_segpath_missing_listed_image_and_bad_split_name_the_file(data, tmp_path):
    root = shutil.copytree(data["segpath_epithelial"], tmp_path / "segpath")
    fileinfo = root / "panCK_fileinfo.csv"
    listed = fileinfo.read_text().splitlines()[1].split(",")[0]
    (root / listed).unlink()
    with pytest.raises(EvalsuiteError, match=f"missing file {root / listed}"):
        _reader("segpath_epithelial", root)
    fileinfo.write_text(fileinfo.read_text().replace(f"{listed},train", f"{listed},training"))
    with pytest.raises(EvalsuiteError, match="line 2 has train_val_test 'training'"):
        _reader("segpath_epithelial", root)


def test_every_card_has_a_download_entry_from_thunders_urls():
    for name in ("ocelot", "segpath_epithelial", "segpath_lymphocytes"):
        entry = SOURCES[name]
        assert isinstance(entry, Download) and load_card(name).name == name
        assert all(remote.url.startswith("https://zenodo.org/api/records/") and remote.facts for remote in entry.files)
