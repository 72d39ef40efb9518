"""Stored item ids decide whether two runs are on the same test items (issue 47 point 7): labels and clusters alone
paired two runs whose test tiles were reordered within the same label sequence.

End to end: a tile_csv cohort of tiny PNGs, run with two random-init timm models; the second model's data is the same
tiles under another root (they pair) or with the test rows' tiles permuted among tiles of the same label (refused).
"""

import csv
import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, write_image

from evalsuite import cli
from evalsuite.reporting.statistics.cell_draws import same_items
from evalsuite.results.predictions import item_hashes, load_predictions, save_predictions

TASK = "tiny_tiles"
CARD = f"""name: {TASK}
kind: classification
reader: {{name: tile_csv, args: {{manifest: tiles.csv}}}}
classes: [left, right]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [knn]
"""
TILES = {"train": 6, "val": 2, "test": 4}  # per class
MODELS = ("test_vit+random-init", "test_vit2+random-init")


def _cohort(root):
    """Random 16 px PNGs under root/tiles, listed in root/tiles.csv (no patient column: no clusters to tell runs
    apart either)."""
    rows = []
    for split, count in TILES.items():
        for label in ("left", "right"):
            for k in range(count):
                name = f"tiles/{split}_{label}_{k}.png"
                write_image(root / name, (16, 16), seed=len(rows))
                rows.append({"image_path": name, "label": label, "split": split})
    _write_rows(root / "tiles.csv", rows)
    return root


def _write_rows(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["image_path", "label", "split"])
        writer.writeheader()
        writer.writerows(rows)


def _permute_test_tiles_within_labels(path):
    """Each label's test rows list their tiles in reverse: the same labels in the same order, other items."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for label in ("left", "right"):
        chosen = [row for row in rows if row["split"] == "test" and row["label"] == label]
        for row, tile in zip(chosen, reversed([row["image_path"] for row in chosen])):
            row["image_path"] = tile
    _write_rows(path, rows)


def _run(card, data_root, out, model) -> dict:
    """The run JSON of one run, made in this process: three runs cost one import of torch and timm."""
    before = set((out / "runs").glob("*.json"))
    assert cli.main(["run", "--task", str(card), "--data-root", str(data_root), "--model", model, "--random-init",
                     "--num-workers", "0", "--probes", "knn", "--out", str(out)]) == 0
    (made,) = set((out / "runs").glob("*.json")) - before
    return json.loads(made.read_text())


@pytest.fixture(scope="module")
def outs(tmp_path_factory, one_torch_thread):
    """`paired`: test_vit on the cohort, test_vit2 on a copy under another root; `reordered`: test_vit's run, then
    test_vit2 on a copy whose test tiles are permuted within each label."""
    base = tmp_path_factory.mktemp("item_ids")
    card = base / "card.yaml"
    card.write_text(CARD)
    original = _cohort(base / "original")
    moved = shutil.copytree(original, base / "elsewhere" / "moved")
    reordered = shutil.copytree(original, base / "reordered_data")
    _permute_test_tiles_within_labels(reordered / "tiles.csv")
    first = _run(card, original, base / "paired", "test_vit")
    shutil.copytree(base / "paired", base / "reordered")
    records = {"first": first, "moved": _run(card, moved, base / "paired", "test_vit2"),
               "reordered": _run(card, reordered, base / "reordered", "test_vit2")}
    return base, records


def _stored(base, folder, record):
    return load_predictions(base / folder, record["run_id"])


def test_runs_store_one_hashed_id_per_test_item_and_no_path(outs):
    base, records = outs
    first, moved = _stored(base, "paired", records["first"]), _stored(base, "paired", records["moved"])
    reordered = _stored(base, "reordered", records["reordered"])
    assert first.item_ids.dtype == np.uint64 and len(first.item_ids) == len(first.labels) == 8
    assert np.array_equal(first.item_ids, item_hashes([f"tiles/test_{label}_{k}.png" for label in ("left", "right")
                                                       for k in range(4)]))
    assert np.array_equal(first.item_ids, moved.item_ids)  # the same tiles under another data root
    assert np.array_equal(first.labels, reordered.labels) and first.clusters is None is reordered.clusters
    assert sorted(first.item_ids) == sorted(reordered.item_ids) and not np.array_equal(first.item_ids,
                                                                                       reordered.item_ids)
    assert b"tiles/test_" not in first.path.read_bytes() and str(base).encode() not in first.path.read_bytes()


def test_compare_refuses_runs_whose_test_items_were_reordered_within_the_labels(outs):
    base, _ = outs
    result = run_cli("leaderboard", "--out", base / "reordered", "--compare", *MODELS)
    assert_one_line_error(result, "share no test items on task 'tiny_tiles'", "rerun both on the same data")


def test_runs_on_the_same_items_under_another_root_still_pair(outs):
    base, _ = outs
    result = run_cli("leaderboard", "--out", base / "paired", "--compare", *MODELS)
    assert result.returncode == 0, result.stderr
    assert any(line.startswith(f"{TASK} ") for line in result.stdout.splitlines()), result.stdout


@pytest.mark.parametrize("folder, tested", [("paired", True), ("reordered", False)])
def test_the_wide_table_tests_the_column_only_on_the_same_items(outs, folder, tested):
    base, _ = outs
    result = run_cli("leaderboard", "--out", base / folder, "--format", "csv")
    assert result.returncode == 0, result.stderr
    written = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    assert written[f"{TASK}_rank_low"].notna().all() == tested and written[f"{TASK}_rank_low"].isna().all() != tested
    note = f"note: {TASK} not tested (marked ?): its runs were tested on different items"
    assert (note in result.stderr) != tested, result.stderr


def test_files_without_item_ids_are_paired_by_labels_and_clusters_as_before(tmp_path):
    labels, proba = np.array([0, 1, 0, 1]), np.full((4, 2), 0.5)
    old = save_predictions(tmp_path, "old", labels, None, {"knn/seed0": proba})
    new = save_predictions(tmp_path, "new", labels, None, {"knn/seed0": proba}, item_ids=["a", "b", "c", "d"])
    other = save_predictions(tmp_path, "other", labels, None, {"knn/seed0": proba}, item_ids=["c", "b", "a", "d"])
    old, new, other = (load_predictions(tmp_path, path.name.split(".")[0]) for path in (old, new, other))
    assert old.item_ids is None and same_items(old, new) and same_items(other, old)
    assert same_items(new, new) and not same_items(new, other)
    with pytest.raises(ValueError, match="3 item ids for 4 test items"):
        save_predictions(tmp_path, "short", labels, None, {"knn/seed0": proba}, item_ids=["a", "b", "c"])
