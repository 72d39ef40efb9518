"""The slide demo end to end through the CLI: built slides -> tissue tiles -> per-slide caches -> ABMIL and mean-pool."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import leaderboard_rows, library_warnings, run_cli

pytestmark = pytest.mark.slow

SLIDES = {"train": 24, "val": 12, "test": 16}


@pytest.fixture(scope="module")
def slide_out(tmp_path_factory):
    """A pretrained run, a random-init run and a repeat of the pretrained run in one output folder."""
    out = tmp_path_factory.mktemp("slide_out")
    runs = {}
    for name, extra in [("pretrained", []), ("random", ["--random-init"]), ("repeat", [])]:
        result = run_cli("run", "--task", "demo_slide", "--out", out, *extra)
        assert result.returncode == 0, result.stderr
        run_id = next(line.split()[5] for line in result.stdout.splitlines() if line.startswith("task "))
        runs[name] = json.loads((out / "runs" / f"{run_id}.json").read_text())
        runs[name]["stderr"] = result.stderr
    return out, runs


def _test_score(record: dict, probe: str, metric: str = "balanced_accuracy") -> float:
    return next(p["metrics"]["test"][metric] for p in record["probes"] if p["probe"] == probe)


def test_pretrained_beats_random_init_on_the_slide_demo(slide_out):
    _, runs = slide_out
    margins = {}
    for probe in ("abmil", "meanpool"):
        margins[probe] = {metric: (_test_score(runs["pretrained"], probe, metric),
                                   _test_score(runs["random"], probe, metric))
                          for metric in ("balanced_accuracy", "auroc_macro_ovr")}
    print("test scores, pretrained vs random-init:", margins)
    # Measured (docs/slides.md, seed 0): balanced accuracy abmil 1.000 vs 0.500, meanpool 1.000 vs 0.812; AUROC
    # abmil 1.000 vs 0.703, meanpool 1.000 vs 0.906. The nest pieces' colour statistics are matched and every slide
    # has its own stain, so random convolutional features have no colour shortcut left. 0.125 is two of 16 slides.
    for probe, scores in margins.items():
        pretrained, random = scores["balanced_accuracy"]
        assert pretrained >= random + 0.125, (probe, margins)
        assert scores["auroc_macro_ovr"][0] > scores["auroc_macro_ovr"][1], (probe, margins)


def test_pretrained_abmil_is_a_trained_head_not_an_argmax_over_near_ties(slide_out):
    _, runs = slide_out
    ece, brier = (_test_score(runs["pretrained"], "abmil", metric) for metric in ("ece", "brier"))
    # Measured at seed 0 (docs/slides.md): keeping the first epoch at val balanced accuracy 1.0 (eva's rule) gave
    # epoch 4, test probabilities 0.50-0.52, ECE 0.490, Brier 0.481; ties by val loss keep epoch 85, ECE 5e-8.
    assert ece < 0.05 and brier < 0.05, (ece, brier)


def test_leaderboard_rows_as_for_other_tasks(slide_out):
    out, runs = slide_out
    frame = pd.read_csv(out / "leaderboard.csv")
    assert set(frame["task"]) == {"demo_slide"}
    assert set(frame["probe"]) == {"abmil", "meanpool"}
    assert set(frame["metric"]) >= {"balanced_accuracy", "f1_macro", "auroc_macro_ovr"}
    rows = leaderboard_rows(out)
    assert {row["run_id"] for row in rows} == {r["run_id"] for r in runs.values()}
    test_rows = [row for row in rows if row["split"] == "test"]
    assert {int(row["n_samples"]) for row in test_rows} == {SLIDES["test"]}  # slides, not tiles


def test_run_json_records_slides_tiles_and_the_patient_bootstrap(slide_out):
    _, runs = slide_out
    record = runs["pretrained"]
    assert {split: info["slides"] for split, info in record["slides"].items()} == SLIDES
    assert all(info["tiles"] >= 10 * info["slides"] and not info["skipped"] for info in record["slides"].values())
    abmil = next(p for p in record["probes"] if p["probe"] == "abmil")
    assert abmil["intervals_95_unit"] == "patient"
    low, high = abmil["intervals_95"]["test"]["balanced_accuracy"]
    assert low <= abmil["metrics"]["test"]["balanced_accuracy"] <= high


def test_slide_cache_holds_float16_bags_with_coordinates_and_slide_aligned_chunks(slide_out):
    out, _ = slide_out
    manifests = [json.loads(p.read_text()) for p in (out / "cache").glob("*/manifest.json")]
    assert len(manifests) == 6  # three splits, two backbones
    for manifest in manifests:
        folder = out / "cache" / manifest["key"]
        features = np.load(folder / "features.npy", mmap_mode="r")
        coords = np.load(folder / "coords_level0.npy")
        offsets = manifest["slides"]["offsets"]
        assert features.dtype == np.float16 and coords.shape == (features.shape[0], 2) and offsets[-1] == len(features)
        assert len(manifest["slides"]["ids"]) == SLIDES[manifest["fields"]["split"]]
        slide_starts = set(offsets)
        assert all(chunk["start"] in slide_starts or chunk["start"] % manifest["chunk_rows"] == 0
                   for chunk in manifest["chunks"])
        assert all(np.searchsorted(offsets, c["start"], "right") == np.searchsorted(offsets, c["stop"] - 1, "right")
                   for c in manifest["chunks"])  # no chunk spans two slides
        assert (coords % 224 == 0).all()  # the demo's pieces sit on the 224 px grid, and so do the tiles


def test_second_run_reuses_the_caches_and_repeats_the_numbers(slide_out):
    _, runs = slide_out
    assert sum(runs["repeat"]["samples_extracted"].values()) == 0
    for probe in ("abmil", "meanpool"):
        assert _test_score(runs["repeat"], probe) == _test_score(runs["pretrained"], probe)


def test_slide_runs_print_no_library_warnings(slide_out):
    _, runs = slide_out
    for name, record in runs.items():
        assert not library_warnings(record["stderr"]), (name, library_warnings(record["stderr"]))
