"""`evalsuite run --task plism` on a tiny copy of plismbench's download layout (readers/tiles/plism.py).

Fixture: three slides {staining}_{scanner}_to_GMH_S60.tif.h5, each with the same five tile ids (NAME_LEVEL_X_Y,
written in a scrambled order), 16x16 px uint8 RGB tiles, and tiles_subset_8139.npy choosing four of them.
GMH_AT2 holds exactly the pixels of GMH_S60, so the cross-scanner pair is known by hand whatever the (random)
backbone: every tile's two embeddings are equal (cosine 1) and every tile's twin is its nearest candidate (top-1 1).
HR_S60 holds other pixels. With 4 tiles a query has 7 candidates, so top-10 is always a hit and the leaderboard
metric is (median cosine over the 3 pairs + 1 + 1 + 1) / 4.
"""

import h5py
import numpy as np
import pytest

from conftest import SMALLEST_BACKBONE, leaderboard_rows

# (x, y) of the five tiles, written in this order; plismbench's order sorts by x then y.
COORDS = [(448, 0), (0, 224), (224, 0), (0, 0), (224, 224)]
SORTED = sorted(COORDS)
SUBSET = [4, 0, 2, 1]  # rows of the sorted tiles


def _tile_id(x: int, y: int) -> str:
    return f"tile_16_{x}_{y}"


def write_slide(root, staining: str, scanner: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with h5py.File(root / f"{staining}_{scanner}_to_GMH_S60.tif.h5", "w") as handle:
        for x, y in COORDS:
            handle[_tile_id(x, y)] = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)


@pytest.fixture
def plism_root(tmp_path):
    root = tmp_path / "plism"
    root.mkdir()
    write_slide(root, "GMH", "S60", seed=1)
    write_slide(root, "GMH", "AT2", seed=1)  # same pixels: another scanner of the same tiles
    write_slide(root, "HR", "S60", seed=2)
    np.save(root / "tiles_subset_8139.npy", np.array(SUBSET))
    return root


def test_reader_orders_tiles_as_plismbench_and_keeps_the_subset(plism_root):
    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    reader = build_reader(load_card("plism"), str(plism_root), check_counts=False)
    assert [(s["staining"], s["scanner"]) for s in reader.slides] == [("GMH", "AT2"), ("GMH", "S60"), ("HR", "S60")]
    assert reader.tile_ids == [_tile_id(*SORTED[i]) for i in SUBSET]
    images = reader.dataset("test", None)
    assert len(images) == 12 and images.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    with h5py.File(plism_root / "HR_S60_to_GMH_S60.tif.h5") as handle:
        assert np.array_equal(np.asarray(images.image(9)), handle[reader.tile_ids[1]][()])
    assert reader.item_ids("test")[5] == f"GMH_S60_to_GMH_S60.tif/{reader.tile_ids[1]}"


def test_reader_refuses_a_slide_with_other_tiles(plism_root):
    from evalsuite.errors import EvalsuiteError
    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    with h5py.File(plism_root / "HR_S60_to_GMH_S60.tif.h5", "a") as handle:
        del handle[_tile_id(0, 0)]
    with pytest.raises(EvalsuiteError, match="same tiles"):
        build_reader(load_card("plism"), str(plism_root), check_counts=False)


def test_run_writes_plismbench_metrics(cli_in_process, plism_root, tmp_path):
    out = tmp_path / "out"
    result = cli_in_process("run", "--task", "plism", "--data-root", plism_root, "--no-count-check", "--out", out,
                            "--num-workers", "0", "--batch-size", "16", *SMALLEST_BACKBONE)
    assert result.returncode == 0, result.stderr
    rows = {row["metric"]: row for row in leaderboard_rows(out) if row["task"] == "plism"}
    assert {row["probe"] for row in rows.values()} == {"consistency"}
    assert {row["split"] for row in rows.values()} == {"test"} and rows["plism_leaderboard_metric"]["n_samples"] == "12"
    value = {name: float(row["value"]) for name, row in rows.items()}
    # GMH_S60 vs GMH_AT2 (the one cross-scanner pair): identical embeddings
    assert value["plism_cosine_similarity_mean_cross_scanner"] == pytest.approx(1.0, abs=1e-3)
    assert value["plism_top_1_accuracy_mean_cross_scanner"] == 1.0
    for group in ("cross_scanner", "cross_staining", "cross_scanner_staining"):
        assert value[f"plism_top_10_accuracy_median_{group}"] == 1.0
    median_cosine = value["plism_cosine_similarity_median_all"]
    assert value["plism_leaderboard_metric"] == pytest.approx((median_cosine + 3) / 4, abs=1e-6)
    assert "plism_leaderboard_metric" in result.stdout


def test_run_refuses_a_probe(cli_in_process, plism_root, tmp_path):
    result = cli_in_process("run", "--task", "plism", "--data-root", plism_root, "--no-count-check",
                            "--out", tmp_path / "out", "--probes", "linear", *SMALLEST_BACKBONE)
    assert result.returncode != 0 and "fits no probe" in result.stderr


def test_budget_plans_the_test_split_alone(cli_in_process, plism_root, tmp_path):
    """A consistency card has no train or val: `budget` plans the one split a run extracts (3 slides x 4 tiles)."""
    result = cli_in_process("budget", "--task", "plism", "--model", "vit_tiny_patch16_224", "--data-root", plism_root,
                            "--no-count-check", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "12 images to extract" in result.stdout
