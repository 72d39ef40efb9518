"""Slide encoders end to end through the CLI (issue 51), with random weights:

- CHIEF on CTransPath tiles at its own tiling (256 px at 1 um/px, every tile touching tissue) on demo_slide's card
  tiled that way (the README runs `evalsuite run --task demo_slide --model chief --random-init` itself): rows with
  intervals over patients, stored predictions, the chance-level note, the report's cells, and `--compare` against
  ABMIL on the same tile encoder, whose run filled the tile caches CHIEF then reads without extracting a tile; its
  slide-embedding extraction killed with SIGKILL mid-split resumes to a cache byte-identical to an uninterrupted one;
- MADELEINE (CONCH v1 tiles at 10x) on ten demo slides with one tile each (the card's tiling.max_tiles: the
  smallest input that proves its path; CONCH's ViT-B/16 at 448 px is the costly part);
- a slide whose forward cannot fit the --mem budget is refused in one line before any forward.

Cost: CTransPath (Swin-T) over 14 demo slides' tiles once, CONCH over 10 tiles, small slide encoders."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import assert_one_line_error, run_cli, run_record

from evalsuite.features.cache import FeatureCache
from evalsuite.tasks.resources import cards_dir, find_yaml

pytestmark = pytest.mark.slow

CHIEF = "chief+random-init"
ABMIL = "ctranspath-abmil"  # a label: the wide table keeps one probe per model row
TEST_SLIDES = 4  # the subset's test split: 2 slides a class, the fewest patients that get an interval
CHIEF_SUBSET = {"train": 4, "val": 1, "test": 2}  # slides a class; train spans two chunks of slide embeddings
EMBEDDING_FILES = ("features.npy", "labels.npy")


def _card(tmp_path: Path, name: str, **tiling) -> Path:
    """demo_slide's card with its tiling changed (the same slides, reader and classes)."""
    card = yaml.safe_load(find_yaml("demo_slide", cards_dir(), "task card", "task").read_text())
    card["tiling"] = {**card["tiling"], **tiling}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


@pytest.fixture(scope="module")
def chief_runs(tmp_path_factory):
    """On demo_slide's card tiled as CHIEF tiles (the tiles `--task demo_slide --model chief` reads; the README runs
    that command itself), over 14 of its slides: ABMIL on CTransPath fills the tile caches; CHIEF's run is killed
    with SIGKILL mid-way through its slide embeddings and rerun; an uninterrupted CHIEF run on a copy of the tile
    caches is the reference."""
    root = tmp_path_factory.mktemp("slide_encoder_demo")
    card = _card(root, "demo_slide_chief_tiling", target_mpp=1.0, tile_size_px=256, min_tissue_fraction=0.0)
    out, reference = root / "out", root / "reference"
    data = _demo_subset(root / "data", CHIEF_SUBSET)
    abmil = run_cli("run", "--task", card, "--data-root", data, "--model", "ctranspath", "--random-init",
                    "--probes", "abmil", "--label", ABMIL, "--out", out)
    assert abmil.returncode == 0, abmil.stderr
    shutil.copytree(out / "cache", reference / "cache", ignore=shutil.ignore_patterns(".locks"))
    killed = _killed_run(card, data, out)
    assert killed.returncode == -9, killed.stderr
    unfinished = _embedding_manifests(out)
    resumed = run_cli("run", "--task", card, "--data-root", data, "--model", "chief", "--random-init", "--out", out)
    assert resumed.returncode == 0, resumed.stderr
    uninterrupted = run_cli("run", "--task", card, "--data-root", data, "--model", "chief", "--random-init",
                            "--out", reference)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    return out, reference, abmil, unfinished, resumed


def test_chief_runs_at_its_own_tiling_with_the_chance_level_note(chief_runs):
    out, _, _, _, chief = chief_runs
    record = run_record(out, chief)
    assert record["model"]["name"] == CHIEF and record["model"]["tile_encoder"]["name"] == "ctranspath"
    assert record["model"]["tiling"] == {"target_mpp": 1.0, "tile_size_px": 256}
    assert [p["probe"] for p in record["probes"]] == ["logreg"]
    assert set(record["cache"]["slide_embedding_keys"]) == {"train", "val", "test"}
    assert "numbers are chance level" in chief.stdout


def test_slide_encoder_rows_carry_intervals_and_stored_predictions(chief_runs):
    out, _, _, _, chief = chief_runs
    board = pd.read_csv(out / "leaderboard.csv")
    test = board[(board["model"] == CHIEF) & (board["split"] == "test")]
    assert set(test["metric"]) >= {"balanced_accuracy", "auroc_macro_ovr", "ece", "brier", "nll"}
    assert (test["n_samples"] == TEST_SLIDES).all()
    assert test["ci_low"].notna().all() and (test["ci_low"] <= test["value"] + 1e-9).all()
    record = run_record(out, chief)
    assert record["probes"][0]["intervals_95_unit"] == "patient"
    stored = np.load(out / "runs" / record["predictions"]["file"])
    assert stored["proba_0"].shape == (TEST_SLIDES, 2)


def test_compare_a_slide_encoder_with_abmil_on_the_same_tile_encoder(chief_runs):
    out = chief_runs[0]
    result = run_cli("leaderboard", "--out", out, "--compare", CHIEF, ABMIL)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("demo_slide ")], result.stdout


def test_the_report_shows_the_slide_encoder_row(chief_runs, tmp_path):
    result = run_cli("report", "--out", chief_runs[0], "--html", tmp_path / "report.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    assert CHIEF in page and ABMIL in page


def test_the_slide_encoder_reads_the_abmil_runs_tiles_without_extracting_any(chief_runs):
    out, _, abmil, _, chief = chief_runs
    record = run_record(out, chief)
    assert record["samples_extracted"] == {"train": 0, "val": 0, "test": 0}
    assert record["cache"]["keys"] == run_record(out, abmil)["cache"]["keys"]
    assert run_record(out, abmil)["samples_extracted"]["train"] > 0


def test_a_killed_slide_embedding_extraction_resumes_byte_identical(chief_runs):
    out, reference, _, unfinished, _ = chief_runs
    assert unfinished and not all(m["complete"] for m in unfinished.values())  # killed mid-way
    assert any(0 < sum(c["done"] for c in m["chunks"]) < len(m["chunks"]) for m in unfinished.values())
    ours, theirs = _embedding_manifests(out), _embedding_manifests(reference)
    assert set(ours) == set(theirs) and len(ours) == 3
    for tiles_key, manifest in ours.items():
        assert manifest["complete"] and manifest["key"] == theirs[tiles_key]["key"]
        for name in EMBEDDING_FILES:
            assert (out / "cache" / manifest["key"] / name).read_bytes() == \
                (reference / "cache" / manifest["key"] / name).read_bytes()


def _demo_subset(folder: Path, per_split: dict) -> Path:
    """A slides.csv of the first demo slides of each class and split (absolute paths to the built demo slides)."""
    from evalsuite.readers import resolve_data_root
    from evalsuite.tasks.cards import load_card

    built = resolve_data_root(load_card("demo_slide"), None)
    rows = pd.read_csv(built / "slides.csv")
    rows["slide_path"] = [str(built / path) for path in rows["slide_path"]]
    subset = pd.concat([rows[(rows["split"] == split) & (rows["label"] == label)].head(count)
                        for split, count in per_split.items() for label in ("stroma", "tumour")])
    folder.mkdir(parents=True, exist_ok=True)
    subset.to_csv(folder / "slides.csv", index=False)
    return folder


def test_madeleine_on_one_tile_per_slide_of_ten_demo_slides(tmp_path):
    """The smallest input that proves MADELEINE's path: CONCH's ViT-B/16 at 448 px on one tile of each of 10 demo
    slides (test keeps 4 patients, the fewest that get an interval)."""
    card = _card(tmp_path, "demo_slide_one_tile", max_tiles=1)
    data = _demo_subset(tmp_path / "data", {"train": 2, "val": 1, "test": 2})
    result = run_cli("run", "--task", card, "--data-root", data, "--model", "madeleine", "--random-init",
                     "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    record = run_record(tmp_path / "out", result)
    assert record["model"]["tile_encoder"]["name"] == "conch" and record["model"]["embed_dim"] == 512
    assert record["slides"]["test"]["tiles"] == 4  # one tile per slide
    assert record["probes"][0]["intervals_95"]["test"]["balanced_accuracy"]


KILL_AFTER_FORWARDS = 6  # chunks of 4 slides: the first chunk is written, the second half computed, then SIGKILL


def _killed_run(card: Path, data: Path, out: Path) -> subprocess.CompletedProcess:
    """CHIEF's run in a process that sends itself SIGKILL at its sixth slide-encoder forward."""
    script = f"""
import os, signal, sys
from evalsuite.features import slide_embeddings
from evalsuite.cli import main
forward, calls = slide_embeddings.SlideForward.__call__, []
def dying(self, item):
    calls.append(item)
    if len(calls) == {KILL_AFTER_FORWARDS}:
        os.kill(os.getpid(), signal.SIGKILL)
    return forward(self, item)
slide_embeddings.SlideForward.__call__ = dying
sys.exit(main(["run", "--task", {str(card)!r}, "--data-root", {str(data)!r}, "--model", "chief", "--random-init",
               "--out", {str(out)!r}]))
"""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)


def _embedding_manifests(out: Path) -> dict:
    """{tiles key: manifest} of the slide-embedding caches under `out`, an unfinished one's chunk log replayed."""
    cache = FeatureCache(out / "cache")
    manifests = [cache.manifest(path.parent.name) for path in cache.root.glob("*/manifest.json")]
    return {m["fields"]["tiles_key"]: m for m in manifests if m["fields"].get("feature") == "slide_embedding"}


def test_a_slide_too_large_for_the_memory_budget_is_refused_before_any_forward(tmp_path):
    out = tmp_path / "out"
    data = _demo_subset(tmp_path / "data", {"train": 1, "val": 1, "test": 1})
    result = run_cli("run", "--task", "demo_slide", "--data-root", data, "--model", "chief", "--random-init",
                     "--mem", "2M", "--out", out)
    assert result.returncode == 3
    assert_one_line_error(result, "budget: slide", "chief's forward on it needs about", "--mem")
    assert not list((out / "cache").glob("*/features.npy"))  # no tile was embedded
