"""The generic tile reader (readers/tiles/tile_csv.py) and the card's `group` column, on a 2 class x 2 site cohort
of PNG crops of the shipped hgsc_nest image."""

import csv
import json

import numpy as np
import pytest
import yaml
from conftest import REPO, assert_one_line_error, run_cli
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.group_robustness import robustness_index
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.resources import shipped_data_dir

TILE_PX = 32
CARD = """name: tiny_tiles
kind: classification
reader: {{name: tile_csv, args: {{manifest: {manifest}}}}}
classes: [left, right]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [knn]
data_root: {root}
"""
COUNTS = {"train": 3, "val": 1, "test": 2}  # tiles per (class, site) and split


def _tile(nest: np.ndarray, label: str, site: str, number: int) -> Image.Image:
    """A crop from the left or right half of the image; site `b` is a strong blue stain shift."""
    row, col = 400 + number // 20 * TILE_PX, number % 20 * TILE_PX + (0 if label == "left" else 750)
    crop = nest[row : row + TILE_PX, col : col + TILE_PX].astype(np.float32)
    if site == "b":
        crop = crop * np.array([0.5, 0.6, 1.3]) + np.array([0.0, 0.0, 40.0])
    return Image.fromarray(np.clip(crop, 0, 255).astype(np.uint8))


def _cohort(root, columns=("image_path", "label", "split", "patient", "site"), edit=None, group="site",
            manifest="meta/tiles.csv"):
    """Tiles under root/tiles, the manifest at root/`manifest` (paths relative to it), and the card."""
    nest = np.asarray(Image.open(shipped_data_dir() / "hgsc_nest" / "hgsc_nest.jpg").convert("RGB"))
    (root / "meta" / "tiles").mkdir(parents=True, exist_ok=True)
    rows, number = [], 0
    for split, count in COUNTS.items():
        for label in ("left", "right"):
            for site in ("a", "b"):
                for _ in range(count):
                    name = f"tiles/{label}_{site}_{number}.png"
                    _tile(nest, label, site, number).save(root / "meta" / name)
                    rows.append({"image_path": name, "label": label, "split": split, "patient": f"p{number // 2}",
                                 "site": site})
                    number += 1
    if edit:
        edit(rows)
    with open(root / manifest, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    card = root / "card.yaml"
    card.write_text(CARD.format(manifest=manifest, root=root) + (f"group: {group}\n" if group else ""))
    return card


def _reader(card):
    return build_reader(load_card(str(card)))


def test_reads_splits_labels_patients_and_groups_in_dataset_order(tmp_path):
    reader = _reader(_cohort(tmp_path))
    test = reader.dataset("test", np.asarray)
    assert len(test) == 8 and test.labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert reader.groups_of("test", "site") == ["a", "a", "b", "b", "a", "a", "b", "b"]
    assert reader.interval_unit == "patient" and len(set(reader.groups("test"))) == 4
    assert [len(reader.dataset(s, np.asarray)) for s in ("train", "val")] == [12, 4]
    image, label = test[2]
    assert image.shape == (TILE_PX, TILE_PX, 3) and label == 0


def test_robustness_index_of_a_stain_shift_through_the_reader(tmp_path):
    """Raw pixels as features: the strong site-b tint dominates, so neighbours share the site, not the half."""
    reader = _reader(_cohort(tmp_path))
    test = reader.dataset("test", lambda image: np.asarray(image, dtype=np.float32).reshape(-1))
    features = np.stack([test[i][0] for i in range(len(test))])
    sites = reader.groups_of("test", "site")
    assert robustness_index(features, test.labels, sites, 1) < 0.5


def test_without_split_column_patients_are_dealt_and_kept_whole(tmp_path):
    reader = _reader(_cohort(tmp_path, columns=("image_path", "label", "patient", "site")))
    split_of = {}
    for split in ("train", "val", "test"):
        for patient in reader.groups(split):
            assert split_of.setdefault(patient, split) == split
    assert sum(len(reader.dataset(s, np.asarray)) for s in ("train", "val", "test")) == 24


def test_without_patient_column_each_tile_is_its_own_unit(tmp_path):
    reader = _reader(_cohort(tmp_path, columns=("image_path", "label", "split", "site")))
    assert reader.interval_unit == "tile" and reader.groups("test") is None


def _set(line, **values):
    """An edit of data row `line` (the CSV's line number: the header is line 1)."""
    return lambda rows: rows[line - 2].update(values)


@pytest.mark.parametrize("edit, fragments", [
    (_set(5, image_path="tiles/nope.png"), ["line 5", "nope.png", "not found"]),
    (_set(4, label="middle"), ["line 4", "'middle'", "left, right"]),
    (_set(7, split="holdout"), ["line 7", "'holdout'", "train, val, test"]),
    (_set(3, site=""), ["line 3", "'site'"]),
    (_set(6, image_path="tiles/left_a_0.png"), ["line 6", "already listed on line 2"]),
    (_set(2, patient="p9"), ["patient 'p9'", "train and test"]),
])
def test_bad_rows_are_one_line_errors_naming_file_and_line(tmp_path, edit, fragments):
    card = _cohort(tmp_path, edit=edit)
    with pytest.raises(EvalsuiteError) as error:
        _reader(card)
    message = str(error.value)
    assert "\n" not in message and "tiles.csv" in message
    for fragment in fragments:
        assert fragment in message


def test_missing_required_column_and_missing_manifest(tmp_path):
    with pytest.raises(EvalsuiteError, match="has no column label"):
        _reader(_cohort(tmp_path, columns=("image_path", "split", "site")))
    with pytest.raises(EvalsuiteError, match="tile manifest .*empty/meta/tiles.csv not found"):
        build_reader(load_card(str(tmp_path / "card.yaml")), data_root=str(tmp_path / "empty"))


def test_group_column_missing_from_the_manifest_exits_2_through_the_cli(tmp_path):
    card = _cohort(tmp_path, columns=("image_path", "label", "split", "patient"))
    result = run_cli("run", "--task", card, "--model", "test_vit", "--random-init", "--num-workers", "0",
                     "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, "tiles.csv", "no column 'site'", "card.yaml")
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


def test_the_shipped_card_copied_runs_end_to_end(tmp_path):
    """datasets/tile_csv.yaml with the user's classes, manifest and data_root: one row per split and metric."""
    _cohort(tmp_path, group=None)
    card = yaml.safe_load((REPO / "datasets" / "tile_csv.yaml").read_text())
    card.update(classes=["left", "right"], data_root=str(tmp_path), group="site")
    card["reader"]["args"]["manifest"] = "meta/tiles.csv"
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(card))
    result = run_cli("run", "--task", tmp_path / "mine.yaml", "--model", "test_vit", "--random-init",
                     "--num-workers", "0", "--probes", "knn", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "out" / "leaderboard.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(row["split"], row["n_samples"]) for row in rows} == {("train", "12"), ("val", "4"), ("test", "8")}
    # The card's `group` adds the PathoROB index of the test embeddings, once, with k lowered to the 6 test tiles
    # outside a query's own patient (2 tiles each).
    (index,) = [row for row in rows if row["metric"] == "robustness_index"]
    assert index["probe"] == "knn_groups" and 0 <= float(index["value"]) <= 1
    assert json.loads(index["selected_params"])["k"] == 6 and json.loads(index["selected_params"])["group"] == "site"


def test_group_on_a_reader_without_metadata_is_one_line(tmp_path):
    card = tmp_path / "demo.yaml"
    card.write_text((REPO / "datasets" / "demo.yaml").read_text() + "group: site\n")
    reader = build_reader(load_card(str(card)))
    with pytest.raises(EvalsuiteError, match="reader 'hgsc_tiles' has none.*tile_csv") as error:
        reader.groups_of("test", "site")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("group: ''\n", "must name a manifest column"),
    ("group: [site]\n", "'group' must be str"),
])
def test_bad_group_field_is_a_card_error(tmp_path, text, message):
    card = _cohort(tmp_path, group=None)
    card.write_text(card.read_text() + text)
    with pytest.raises(EvalsuiteError, match=message):
        load_card(str(card))


def test_group_on_a_slide_card_is_refused(tmp_path):
    card = tmp_path / "slides.yaml"
    card.write_text("name: s\nkind: slide\nreader: {name: slide_csv}\nclasses: [a, b]\nsplits: [train, val, test]\n"
                    "selection_metric: balanced_accuracy\nprobes: [meanpool]\ngroup: site\n")
    with pytest.raises(EvalsuiteError, match="tile classification cards only"):
        load_card(str(card))
