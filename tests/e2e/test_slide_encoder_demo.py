"""Slide encoders end to end through the CLI (issue 51), with random weights:

- `evalsuite run --task demo_slide --model chief --random-init`: CHIEF on CTransPath tiles at its own tiling (256 px
  at 1 um/px, every tile touching tissue); rows with intervals over patients, stored predictions, the chance-level
  note, the report's cells, and `--compare` against ABMIL on the same tile encoder (CTransPath);
- MADELEINE (CONCH v1 tiles at 10x) on the demo slides with one tile per slide (the card's tiling.max_tiles: the
  smallest input that proves its path: CONCH's ViT-B/16 at 448 px is the suite's costly part here);
- on a card tiled as CHIEF tiles, a mean-pool run of CTransPath fills the tile caches and CHIEF's run extracts no
  tile; its slide-embedding extraction killed with SIGKILL mid-split resumes to a cache byte-identical to an
  uninterrupted one;
- a slide whose forward cannot fit the --mem budget is refused in one line before any forward.

Cost: CTransPath (Swin-T) over the demo's tiles twice (two tilings), CONCH over 26 tiles, small slide encoders."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import assert_one_line_error, leaderboard_rows, run_cli, run_record

from evalsuite.tasks.resources import cards_dir, find_yaml

pytestmark = pytest.mark.slow

CHIEF = "chief+random-init"
ABMIL = "ctranspath-abmil"  # a label: the wide table keeps one probe per model row
TEST_SLIDES = 16
EMBEDDING_FILES = ("features.npy", "labels.npy")


def _card(tmp_path: Path, name: str, **tiling) -> Path:
    """demo_slide's card with its tiling changed (the same slides, reader and classes)."""
    card = yaml.safe_load(find_yaml("demo_slide", cards_dir(), "task card", "task").read_text())
    card["tiling"] = {**card["tiling"], **tiling}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("slide_encoder_demo")
    chief = run_cli("run", "--task", "demo_slide", "--model", "chief", "--random-init", "--out", out)
    assert chief.returncode == 0, chief.stderr
    abmil = run_cli("run", "--task", "demo_slide", "--model", "ctranspath", "--random-init", "--probes", "abmil",
                    "--label", ABMIL, "--out", out)
    assert abmil.returncode == 0, abmil.stderr
    return out, chief, abmil


def test_chief_runs_on_the_demo_at_its_own_tiling_with_the_chance_level_note(demo):
    out, chief, _ = demo
    record = run_record(out, chief)
    assert record["model"]["name"] == CHIEF and record["model"]["tile_encoder"]["name"] == "ctranspath"
    assert record["model"]["tiling"] == {"target_mpp": 1.0, "tile_size_px": 256}
    assert [p["probe"] for p in record["probes"]] == ["logreg"]
    assert set(record["cache"]["slide_embedding_keys"]) == {"train", "val", "test"}
    assert "numbers are chance level" in chief.stdout


def test_slide_encoder_rows_carry_intervals_and_stored_predictions(demo):
    out, chief, _ = demo
    board = pd.read_csv(out / "leaderboard.csv")
    test = board[(board["model"] == CHIEF) & (board["split"] == "test")]
    assert set(test["metric"]) >= {"balanced_accuracy", "auroc_macro_ovr", "ece", "brier", "nll"}
    assert (test["n_samples"] == TEST_SLIDES).all()
    assert test["ci_low"].notna().all() and (test["ci_low"] <= test["value"] + 1e-9).all()
    record = run_record(out, chief)
    assert record["probes"][0]["intervals_95_unit"] == "patient"
    stored = np.load(out / "runs" / record["predictions"]["file"])
    assert stored["proba_0"].shape == (TEST_SLIDES, 2)


def test_compare_a_slide_encoder_with_abmil_on_the_same_tile_encoder(demo):
    out, _, _ = demo
    result = run_cli("leaderboard", "--out", out, "--compare", CHIEF, ABMIL)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("demo_slide ")], result.stdout


def test_the_report_shows_the_slide_encoder_row(demo, tmp_path):
    out, _, _ = demo
    result = run_cli("report", "--out", out, "--html", tmp_path / "report.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    assert CHIEF in page and ABMIL in page


def test_madeleine_on_one_tile_per_demo_slide(tmp_path):
    card = _card(tmp_path, "demo_slide_one_tile", max_tiles=1)
    result = run_cli("run", "--task", card, "--model", "madeleine", "--random-init", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    record = run_record(tmp_path / "out", result)
    assert record["model"]["tile_encoder"]["name"] == "conch" and record["model"]["embed_dim"] == 512
    assert record["slides"]["test"]["tiles"] == TEST_SLIDES  # one tile per slide
    assert record["probes"][0]["intervals_95"]["test"]["balanced_accuracy"]


KILL_AFTER_FORWARDS = 6  # chunks of 4 slides: the first chunk is written, the second half computed, then SIGKILL


def _killed_run(card: Path, out: Path) -> subprocess.CompletedProcess:
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
sys.exit(main(["run", "--task", {str(card)!r}, "--model", "chief", "--random-init", "--out", {str(out)!r}]))
"""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)


def _embedding_manifests(out: Path) -> dict:
    manifests = [json.loads(p.read_text()) for p in (out / "cache").glob("*/manifest.json")]
    return {m["fields"]["tiles_key"]: m for m in manifests if m["fields"].get("feature") == "slide_embedding"}


def test_tiles_are_shared_and_a_killed_slide_embedding_resumes_byte_identical(tmp_path):
    card = _card(tmp_path, "demo_slide_chief_tiling", target_mpp=1.0, tile_size_px=256, min_tissue_fraction=0.0)
    out, reference = tmp_path / "out", tmp_path / "reference"
    meanpool = run_cli("run", "--task", card, "--model", "ctranspath", "--random-init", "--probes", "meanpool",
                       "--out", out)
    assert meanpool.returncode == 0, meanpool.stderr
    shutil.copytree(out / "cache", reference / "cache", ignore=shutil.ignore_patterns(".locks"))
    killed = _killed_run(card, out)
    assert killed.returncode == -9, killed.stderr
    (train,) = [m for m in _embedding_manifests(out).values() if m["fields"]["tiles_key"]
                == run_record(out, meanpool)["cache"]["keys"]["train"]]
    assert not train["complete"]

    resumed = run_cli("run", "--task", card, "--model", "chief", "--random-init", "--out", out)
    assert resumed.returncode == 0, resumed.stderr
    record = run_record(out, resumed)
    assert record["samples_extracted"] == {"train": 0, "val": 0, "test": 0}  # the mean-pool run's tile caches
    assert record["cache"]["keys"] == run_record(out, meanpool)["cache"]["keys"]
    uninterrupted = run_cli("run", "--task", card, "--model", "chief", "--random-init", "--out", reference)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    ours, theirs = _embedding_manifests(out), _embedding_manifests(reference)
    assert set(ours) == set(theirs) and len(ours) == 3
    for tiles_key, manifest in ours.items():
        assert manifest["complete"] and manifest["key"] == theirs[tiles_key]["key"]
        for name in EMBEDDING_FILES:
            assert (out / "cache" / manifest["key"] / name).read_bytes() == \
                (reference / "cache" / manifest["key"] / name).read_bytes()
    assert len(leaderboard_rows(out)) > 0


def test_a_slide_too_large_for_the_memory_budget_is_refused_before_any_forward(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo_slide", "--model", "chief", "--random-init", "--mem", "2M",
                     "--out", out)
    assert result.returncode == 3
    assert_one_line_error(result, "budget: slide", "chief's forward on it needs about", "--mem")
    assert not list((out / "cache").glob("*/features.npy"))  # no tile was embedded
