"""Gleason (Arvaniti), UniToPatho and BCSS on tiny fixtures in their published layouts; bad input is one line."""

import csv
import re

import numpy as np
import pytest
from conftest import run_card_in_process
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card


def _reader(task, root):
    return build_reader(load_card(task), str(root), False)


def _png(path, size=(16, 16), value=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    rgb = np.full((size[1], size[0], 3), 40 + 50 * value, dtype=np.uint8)
    Image.fromarray(rgb).save(path)


# ---------------------------------------------------------------- Gleason (Arvaniti)

GLEASON_SPOTS = {  # folder -> {TMA spot: grades of its patches}
    "train_validation_patches_750": {"ZT111_4_A_1_1": [0, 1], "ZT199_1_B_2_3": [2, 3], "ZT76_39_A_1_2": [0, 1, 2, 3]},
    "test_patches_750/patho_1": {"ZT80_38_A_1_1": [0, 1, 2, 3]}}


def make_gleason(root):
    """One patch per class in train (ZT111, ZT199), val (ZT76) and test (ZT80); patho_2 is not read."""
    for folder, spots in GLEASON_SPOTS.items():
        for spot, grades in spots.items():
            for k in grades:
                _png(root / folder / spot / f"{spot}_patch_{k}_class_{k}.jpg", value=k)
    _png(root / "test_patches_750/patho_2/ZT80_38_A_1_1/ZT80_38_A_1_1_patch_0_class_3.jpg")
    return root


def test_gleason_splits_by_tma_labels_from_names_and_spot_clusters(tmp_path):
    reader = _reader("gleason_arvaniti", make_gleason(tmp_path))
    sizes = {split: len(reader.splits[split][0]) for split in ("train", "val", "test")}
    assert sizes == {"train": 4, "val": 4, "test": 4}
    assert {p.name.split("_")[0] for p in reader.splits["val"][0]} == {"ZT76"}
    assert all("patho_1" in str(p) for p in reader.splits["test"][0])
    assert reader.splits["train"][1].tolist() == [0, 1, 2, 3]
    assert reader.groups("test") == ["ZT80_38_A_1_1"] * 4


def test_gleason_counts_and_bad_names(tmp_path):
    root = make_gleason(tmp_path)
    with pytest.raises(EvalsuiteError, match="split 'train' has 4 images but the official dataset has 15303"):
        build_reader(load_card("gleason_arvaniti"), str(root), True)
    bad = root / "train_validation_patches_750/ZT111_4_A_1_1/ZT111_4_A_1_1_patch_9_class_4.jpg"
    _png(bad)
    with pytest.raises(EvalsuiteError, match=f"{bad} is not named .*k in 0..3"):
        _reader("gleason_arvaniti", root)
    bad.unlink()
    stray = root / "train_validation_patches_750/ZT80_38_A_1_1/ZT80_38_A_1_1_patch_0_class_0.jpg"
    _png(stray)
    with pytest.raises(EvalsuiteError, match=f"{stray} is from TMA 'ZT80'"):
        _reader("gleason_arvaniti", root)


# ---------------------------------------------------------------- UniToPatho

UTP_CLASSES = ["HP", "NORM", "TA.HG", "TA.LG", "TVA.HG", "TVA.LG"]
UTP_COLUMNS = ["image_id", "top_label_name", "top_label", "type_name", "type", "grade_name", "grade", "wsi", "roi",
               "mpp", "x", "y", "w", "h"]


def _utp_rows(root, prefix, slides_per_class):
    rows = []
    for label, name in enumerate(UTP_CLASSES):
        for slide in range(slides_per_class):
            wsi = f"{prefix}{slide}-B{label}-{name.replace('.', '')}"
            image_id = f"{wsi}.ndpi_ROI__mpp0.44_reg000_crop_sk0000{slide}_(100,200,1812,1812).png"
            _png(root / "800" / name / image_id, value=label % 4)
            rows.append({"image_id": image_id, "top_label_name": name, "top_label": label, "type_name": "x",
                         "type": 0, "grade_name": "x", "grade": 0, "wsi": wsi, "roi": 0, "mpp": 0.44, "x": 100,
                         "y": 200, "w": 1812, "h": 1812})
    return rows


def _write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=UTP_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def make_unitopatho(root):
    """train.csv: two slides per class (one image each); test.csv: one slide per class."""
    _write_csv(root / "800/train.csv", _utp_rows(root, "1", 2))
    _write_csv(root / "800/test.csv", _utp_rows(root, "9", 1))
    return root


def test_unitopatho_official_test_and_val_carved_by_slide(tmp_path):
    reader = _reader("unitopatho", make_unitopatho(tmp_path))
    assert {s: np.bincount(reader.splits[s][1]).tolist() for s in ("train", "val", "test")} == \
        {"train": [1] * 6, "val": [1] * 6, "test": [1] * 6}
    assert not set(reader.groups("train")) & set(reader.groups("val"))
    assert all(p.parent.name == UTP_CLASSES[label] for p, label in zip(*reader.splits["test"]))
    assert reader.item_ids("test")[0].startswith("800/HP/9")


def test_unitopatho_bad_label_and_missing_image_name_the_file(tmp_path):
    root = make_unitopatho(tmp_path)
    with pytest.raises(EvalsuiteError, match="800/train.csv has 12 images but the official dataset has 6270"):
        build_reader(load_card("unitopatho"), str(root), True)
    rows = _utp_rows(root, "9", 1)
    rows[2]["top_label"] = 7
    _write_csv(root / "800/test.csv", rows)
    with pytest.raises(EvalsuiteError, match="test.csv line 4: top_label '7' / top_label_name 'TA.HG'"):
        _reader("unitopatho", root)
    make_unitopatho(root)
    missing = next((root / "800/NORM").glob("1*.png"))
    missing.unlink()
    with pytest.raises(EvalsuiteError, match=re.escape(f"missing file {missing};") + ".*listed in train.csv line"):
        _reader("unitopatho", root)


# ---------------------------------------------------------------- BCSS

BCSS_IMAGES = {  # name -> (height, width) at 0.25 um/px; site A2/AR train, C8 val, OL test
    "TCGA-A2-A0CM-DX1_xmin18562_ymin56852_MPP-0.2500": (448, 448),
    "TCGA-AR-A0TS-DX1_xmin118843_ymin22812_MPP-0.2500": (461, 901),  # halves to 230x450: 2 tiles, rest left out
    "TCGA-C8-A3XY-DX1_xmin76297_ymin35510_MPP-0.2500": (448, 448),
    "TCGA-OL-A5D6-DX1_xmin115108_ymin40554_MPP-0.2500": (448, 448),
}


def make_bcss(root):
    """Each mask holds every ground-truth code 0..21 in horizontal bands, with a dark image where code 1 is."""
    for name, (height, width) in BCSS_IMAGES.items():
        codes = (np.arange(height)[:, None] * 22 // height).repeat(width, axis=1).astype(np.uint8)
        rgb = np.where((codes == 1)[..., None], 60, 220).astype(np.uint8).repeat(3, axis=2)
        for folder in ("masks", "rgbs_colorNormalized"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(rgb).save(root / "rgbs_colorNormalized" / f"{name}.png")
        Image.fromarray(codes, mode="L").save(root / "masks" / f"{name}.png")
    return root


def test_bcss_sites_half_resolution_grid_and_eva_class_map(tmp_path):
    card = load_card("bcss")
    card.reader_args["class_map"] = "eva"
    reader = build_reader(card, str(make_bcss(tmp_path)), False)
    assert {s: len(t) for s, t in reader.tiles.items()} == {"train": 3, "val": 1, "test": 1}
    dataset = reader.dataset("test", np.asarray)
    codes = np.array(Image.open(next((tmp_path / "masks").glob("TCGA-OL-*.png"))))[::2, ::2]
    expected = np.full(22, 5)
    expected[[0, 19, 20, 2, 3, 10, 11, 4]] = [0, 1, 1, 2, 3, 3, 3, 4]
    assert dataset.labels.shape == (1, 224, 224) and np.array_equal(dataset.labels[0], expected[codes])
    assert (dataset.labels[0][codes == 1] == 5).all()  # eva's table has no entry for code 1 (tumor)
    image, _ = dataset[0]
    assert image.shape == (224, 224, 3)
    assert reader.item_ids("train")[2].endswith("TCGA-AR-A0TS-DX1_xmin118843_ymin22812_MPP-0.2500.png tile 0,224 224px")


def test_bcss_grouped_map_is_the_cards_and_bad_masks(tmp_path):
    root = make_bcss(tmp_path)
    card = load_card("bcss")
    codes = np.array(Image.open(next((root / "masks").glob("TCGA-OL-*.png"))))[::2, ::2]
    labels = build_reader(card, str(root), False).dataset("test", np.asarray).labels[0]
    assert (labels[codes == 1] == 1).all()
    with pytest.raises(EvalsuiteError, match="split 'train' .* has 2 images but the official dataset has 76"):
        build_reader(load_card("bcss"), str(root), True)
    mask = next((root / "masks").glob("TCGA-C8-*.png"))
    Image.fromarray(np.full((448, 448), 30, dtype=np.uint8), mode="L").save(mask)
    with pytest.raises(EvalsuiteError, match=f"{mask} has class id 30 outside 0..21"):
        _ = _reader("bcss", root).dataset("val", np.asarray).labels
    mask.unlink()
    with pytest.raises(EvalsuiteError, match=f"missing mask {mask}"):
        _reader("bcss", root)


# ---------------------------------------------------------------- the cards end to end, in process

def test_gleason_card_end_to_end(tmp_path, cli_in_process):
    rows = run_card_in_process(cli_in_process, "gleason_arvaniti", make_gleason(tmp_path / "data"), tmp_path / "out",
                               {"train": 4, "val": 4, "test": 4})
    assert {row["headline_metric"] for row in rows} == {"balanced_accuracy"}


def test_unitopatho_card_end_to_end(tmp_path, cli_in_process):
    run_card_in_process(cli_in_process, "unitopatho", make_unitopatho(tmp_path / "data"), tmp_path / "out",
                        {"train": 6, "val": 6, "test": 6})


def test_bcss_card_end_to_end_with_seg_linear(tmp_path, cli_in_process):
    recipe = tmp_path / "seg_linear_tiny.yaml"  # the shipped probe with 2 epochs: the test proves the plumbing
    recipe.write_text("name: seg_linear\nprobe: seg_linear\nparams: {epochs: 2, batch_size: 8}\n")
    rows = run_card_in_process(cli_in_process, "bcss", make_bcss(tmp_path / "data"), tmp_path / "out",
                               {"train": 3, "val": 1, "test": 1}, probe=str(recipe))
    assert {row["headline_metric"] for row in rows} == {"dice_fg_mean"}
    assert {row["metric"] for row in rows} >= {"dice_fg_mean", "dice_tumor", "iou_other"}
