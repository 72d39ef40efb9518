"""TCGA-TILs, TCGA-CRC-MSI and Camelyon17-WILDS on tiny copies of their published layouts (16x16 px tiles)."""

import csv
import json
import math
import random

import numpy as np
import pytest
from conftest import SMALLEST_BACKBONE, assert_one_line_error, leaderboard_rows, run_card_in_process, write_image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.camelyon17_wilds import Camelyon17WildsReader
from evalsuite.readers.tiles.tcga_crc_msi import TcgaCrcMsiReader
from evalsuite.readers.tiles.tcga_tils import TcgaTilsReader
from evalsuite.tasks.cards import load_card

PX = (16, 16)


# ---- TCGA-TILs: TCGA-TILs/images-tcga-tils/<study>/{train,val,test}/{til-negative,til-positive}/<barcode>_<md5>.png
def make_tils(root, studies=("brca", "luad"), per_class=1):
    images = root / "TCGA-TILs" / "images-tcga-tils"
    for number, study in enumerate(studies):
        for split in ("train", "val", "test"):
            for label in ("til-negative", "til-positive"):
                for i in range(per_class):
                    name = f"TCGA-A{number}-{split[:2]}{i}-01Z-00-DX1_{label[4]}{i:031x}.png"
                    tile = write_image(images / study / split / label / name, PX)
                    link = images / "pancancer" / split / label / name  # the release's pancancer folder: links
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(tile)
    return root


def test_tils_reads_every_study_skips_links_and_knows_patients(tmp_path):
    reader = TcgaTilsReader(load_card("tcga_tils"), make_tils(tmp_path, per_class=2), check_counts=False)
    for split in ("train", "val", "test"):
        paths, labels = reader.splits[split]
        assert len(paths) == 8 and np.bincount(labels).tolist() == [4, 4]
        assert {p.parent.parent.parent.name for p in paths} == {"brca", "luad"}
        assert all(p.parent.name == ["til-negative", "til-positive"][y] for p, y in zip(paths, labels))
    assert reader.interval_unit == "patient" and len(set(reader.groups("test"))) == 4
    assert reader.groups("test")[0].count("-") == 2  # TCGA-XX-YYYY


def test_tils_counts_and_missing_split_folder(tmp_path):
    root = make_tils(tmp_path)
    with pytest.raises(EvalsuiteError, match="train folders .* has 4 images but the official dataset has 209221"):
        TcgaTilsReader(load_card("tcga_tils"), root)
    for tile in (root / "TCGA-TILs" / "images-tcga-tils" / "luad" / "val").rglob("*.png"):
        tile.unlink()
    for folder in sorted((root / "TCGA-TILs" / "images-tcga-tils" / "luad" / "val").rglob("*"), reverse=True):
        folder.rmdir()
    (root / "TCGA-TILs" / "images-tcga-tils" / "luad" / "val").rmdir()
    with pytest.raises(EvalsuiteError, match="missing folder .*luad/val .every study has train, val and test"):
        TcgaTilsReader(load_card("tcga_tils"), root, check_counts=False)


def test_tils_missing_release_folder_is_one_line(tmp_path, cli_in_process):
    result = cli_in_process("run", "--task", "tcga_tils", "--data-root", tmp_path, "--out", tmp_path / "out")
    assert_one_line_error(result, f"missing folder {tmp_path / 'TCGA-TILs' / 'images-tcga-tils'}")


def test_tils_card_end_to_end(tmp_path, cli_in_process):
    run_card_in_process(cli_in_process, "tcga_tils", make_tils(tmp_path / "data", per_class=2), tmp_path / "out",
                        {"train": 8, "val": 8, "test": 8})


# ---- TCGA-CRC-MSI: {TRAIN,TEST}/{nonMSIH,MSIH}/TCGA-XX-YYYY-... tiles
def make_msi(root, train_patients=13, test_patients=2, tiles=2):
    for folder, patients in (("TRAIN", train_patients), ("TEST", test_patients)):
        for number in range(patients):
            label = ("nonMSIH", "MSIH")[number % 2]
            for tile in range(tiles):
                write_image(root / folder / label / f"TCGA-{folder[:2]}-{number:04d}-01Z-00-DX1_{tile}.png", PX)
    return root


def test_msi_val_is_thunders_case_draw(tmp_path):
    reader = TcgaCrcMsiReader(load_card("tcga_crc_msi"), make_msi(tmp_path), check_counts=False)
    train, val = reader.groups("train"), reader.groups("val")
    assert not set(train) & set(val) and len(set(val)) == math.floor(0.2 * 13)
    # THUNDER: random.seed(0), then random.sample over the case ids in first-seen order (nonMSIH, then MSIH)
    first_seen = [f"TR{n:04d}" for n in range(0, 13, 2)] + [f"TR{n:04d}" for n in range(1, 13, 2)]
    random.seed(0)
    assert set(val) == set(random.sample(first_seen, 2))
    assert len(reader.splits["test"][0]) == 4 and reader.interval_unit == "patient"
    assert reader.splits["train"][0][0].parent.name == "nonMSIH"  # THUNDER's order: class id 0 first


def test_msi_counts_and_bad_names(tmp_path):
    root = make_msi(tmp_path)
    with pytest.raises(EvalsuiteError, match="TRAIN has 26 images but the official dataset has 19557"):
        TcgaCrcMsiReader(load_card("tcga_crc_msi"), root)
    write_image(root / "TRAIN" / "MSIH" / "blk_tile.png", PX)
    with pytest.raises(EvalsuiteError, match="unexpected file name .*TRAIN/MSIH/blk_tile.png"):
        TcgaCrcMsiReader(load_card("tcga_crc_msi"), root, check_counts=False)


def test_msi_missing_test_folder_is_one_line(tmp_path, cli_in_process):
    root = make_msi(tmp_path / "data", test_patients=0)
    result = cli_in_process("run", "--task", "tcga_crc_msi", "--data-root", root, "--no-count-check", "--out",
                            tmp_path / "out")
    assert_one_line_error(result, f"missing folder {root / 'TEST'}", "{TRAIN,TEST}/{nonMSIH,MSIH}")


def test_msi_card_end_to_end(tmp_path, cli_in_process):
    run_card_in_process(cli_in_process, "tcga_crc_msi", make_msi(tmp_path / "data"), tmp_path / "out",
                        {"train": 22, "val": 4, "test": 4})


# ---- Camelyon17-WILDS: camelyon17_v1.0/metadata.csv + patches/patient_P_node_N/patch_patient_P_node_N_x_X_y_Y.png
WILDS_COLUMNS = ["", "patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split"]


def make_wilds(root, edit=None):
    """Five hospitals x two patients x four patches: (tumor, split code) = (0,0) (1,0) (0,1) (1,1)."""
    release = root / "camelyon17_v1.0"
    rows = []
    for center in range(5):
        for k in range(2):
            patient, node, slide = f"{center}{k}{center}", str(k), 2 * center + k
            for i, (tumor, split) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
                x, y = 96 * i, 96 * k
                rows.append([len(rows), patient, node, x, y, tumor, slide, center, split])
                write_image(release / "patches" / f"patient_{patient}_node_{node}" /
                            f"patch_patient_{patient}_node_{node}_x_{x}_y_{y}.png", PX)
    if edit:
        edit(rows)
    with open(release / "metadata.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([WILDS_COLUMNS] + rows)
    return root


def test_wilds_official_split_by_hospital(tmp_path):
    reader = Camelyon17WildsReader(load_card("camelyon17_wilds"), make_wilds(tmp_path), check_counts=False)
    assert set(reader.groups_of("train", "center")) == {"0", "3", "4"} and len(reader.splits["train"][0]) == 12
    assert set(reader.groups_of("val", "center")) == {"1"} and set(reader.groups_of("test", "center")) == {"2"}
    assert np.bincount(reader.splits["test"][1]).tolist() == [4, 4] and reader.groups("test")[0] == "202"
    assert reader.splits["test"][0][0].name == "patch_patient_202_node_0_x_0_y_0.png"
    id_val = Camelyon17WildsReader(load_card("camelyon17_wilds"), tmp_path, check_counts=False, test_split="id_val")
    assert set(id_val.groups_of("test", "center")) == {"0", "3", "4"} and len(id_val.splits["test"][0]) == 12
    assert not set(id_val.item_ids("test")) & set(id_val.item_ids("train"))


def test_wilds_counts_and_unknown_label(tmp_path):
    root = make_wilds(tmp_path)
    with pytest.raises(EvalsuiteError, match="train patches of metadata.csv has 12 images .* 302436"):
        Camelyon17WildsReader(load_card("camelyon17_wilds"), root)
    make_wilds(tmp_path, edit=lambda rows: rows[2].__setitem__(5, 2))
    with pytest.raises(EvalsuiteError, match="metadata.csv line 4: tumor '2' is not one of \\[0, 1\\]"):
        Camelyon17WildsReader(load_card("camelyon17_wilds"), root, check_counts=False)


def test_wilds_missing_metadata_is_one_line(tmp_path, cli_in_process):
    root = make_wilds(tmp_path / "data")
    (root / "camelyon17_v1.0" / "metadata.csv").unlink()
    result = cli_in_process("run", "--task", "camelyon17_wilds", "--data-root", root, "--out", tmp_path / "out")
    assert_one_line_error(result, f"missing file {root / 'camelyon17_v1.0' / 'metadata.csv'}")


def _robustness(rows):
    (index,) = [row for row in rows if row["metric"] == "robustness_index"]
    assert index["probe"] == "knn_groups" and json.loads(index["selected_params"])["group"] == "center"
    return float(index["value"])


def test_wilds_card_reports_the_robustness_index_over_hospitals(tmp_path, cli_in_process):
    root = make_wilds(tmp_path / "data")
    official = run_card_in_process(cli_in_process, "camelyon17_wilds", root, tmp_path / "out",
                                   {"train": 12, "val": 8, "test": 8})
    assert math.isnan(_robustness(official))  # the official test is one hospital: the index is undefined
    result = cli_in_process("run", "--task", "camelyon17_wilds_id", "--data-root", root, "--no-count-check",
                            "--out", tmp_path / "out2", "--probes", "knn", "--num-workers", "0", *SMALLEST_BACKBONE)
    assert result.returncode == 0, result.stderr
    rows = leaderboard_rows(tmp_path / "out2")
    assert {(row["split"], int(row["n_samples"])) for row in rows} == {("train", 12), ("val", 8), ("test", 12)}
    assert 0 <= _robustness(rows) <= 1  # three hospitals in WILDS's id_val
