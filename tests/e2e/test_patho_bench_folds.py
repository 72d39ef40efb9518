"""A Patho-Bench split file (hub layout, tests/readers/slides/patho_bench_layout.py) over 8 demo slides, run through
`evalsuite run` fold by fold: the run JSON holds both folds, each with the file's test slides and its train slides
(val carved from them), and every fold's probe rows; each slide's tiles are forwarded once over the folds (the second
fold copies them from the first fold's caches). Reference: the fold columns written here. A cross-cohort code
(`cohort_a==cohort_b--task`) runs as one fold."""

import importlib.util

import pytest
import yaml
from conftest import REPO, run_cli, run_record

from evalsuite.readers.demo.demo_slides import demo_slides_folder

pytestmark = pytest.mark.slow

# 8 slides; a fold tests 2 a class and trains on the other 2 (one of them carved to val). 4 tiles a slide (the card's
# max_tiles) keep it to about 7 s of CPU: tiling, not the forward, is most of it.
PER_CLASS, FOLDS = 4, 2
SPEC = importlib.util.spec_from_file_location("patho_bench_layout_e2e",
                                              REPO / "tests" / "readers" / "slides" / "patho_bench_layout.py")
layout = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(layout)


def _card(folder, task_code: str):
    """A card whose patho_bench reader reads `task_code` under folder/splits, the slides from the demo's folder; 4
    tiles a slide (max_tiles)."""
    card = {"name": "patho_bench_demo", "kind": "slide", "data_root": str(folder),
            "reader": {"name": "patho_bench", "args": {"task_code": task_code, "splits_root": "splits",
                                                       "slides": str(demo_slides_folder() / "{slide_id}.*")}},
            "classes": ["stroma", "tumour"], "splits": ["train", "val", "test"],
            "tiling": {"target_mpp": 0.5, "tile_size_px": 224, "min_tissue_fraction": 0.5, "max_tiles": 4},
            "selection_metric": "balanced_accuracy", "probes": ["meanpool"]}
    (folder / "card.yaml").write_text(yaml.safe_dump(card))
    return folder / "card.yaml"


def test_each_fold_column_runs_and_the_run_json_holds_both_folds(tmp_path):
    rows = layout.demo_rows(PER_CLASS, FOLDS)
    layout.write_task(tmp_path / "splits", "demo_cohort", "tumour", rows, label_dict={0: "stroma", 1: "tumour"})
    out = tmp_path / "out"
    result = run_cli("run", "--task", _card(tmp_path, "demo_cohort--tumour"), "--model", "test_vit", "--random-init",
                     "--probes", "meanpool", "--num-workers", "0", "--out", out)
    assert result.returncode == 0, result.stderr
    record = run_record(out, result)
    assert [fold["fold"] for fold in record["folds"]] == list(range(FOLDS))
    for fold in record["folds"]:
        in_file = {split: sorted(r["slide_id"] for r in rows if r["folds"][fold["fold"]] == split)
                   for split in ("train", "test")}
        assert fold["column"] == f"fold_{fold['fold']}"
        assert sorted(fold["test"]) == in_file["test"]
        assert sorted(fold["train"] + fold["val"]) == in_file["train"] and fold["val"]
        assert fold["scored"] == {split: len(fold[split]) for split in ("train", "val", "test")}
    meanpool = next(p for p in record["probes"] if p["probe"] == "meanpool")
    assert {f"test_fold{k}" for k in range(FOLDS)} <= set(meanpool["metrics"])
    assert record["scored"]["test"] == len(rows)  # every slide is tested once over the folds
    # Fold 0's three splits hold every slide: fold 1 copies their tiles (features/slide_donors.py), forwards none.
    tiles = sum(info["tiles"] for info in record["slides"].values())  # the last fold's splits: all slides once
    assert sum(record["samples_extracted"].values()) == tiles
    assert "copied from slide caches" in result.stderr


def test_a_cross_cohort_task_trains_on_one_cohort_and_tests_on_the_other(tmp_path, cli_in_process):
    """`cohort_a==cohort_b--tumour` (Patho-Bench's cross-cohort code): the demo's train slides as cohort A's file,
    its test slides as cohort B's; one fold, trained (and val carved) on A, scored on every slide of B."""
    train = layout.demo_rows(PER_CLASS, FOLDS)
    test = [{**row, "case_id": row["case_id"].replace("case-", "case-b-"),
             "slide_id": row["slide_id"].replace("train-", "test-")} for row in layout.demo_rows(2, FOLDS)]
    layout.write_task(tmp_path / "splits", "cohort_a", "tumour", train, label_dict={0: "stroma", 1: "tumour"})
    layout.write_task(tmp_path / "splits", "cohort_b", "tumour", test, label_dict=None)  # A's config is read
    result = cli_in_process("run", "--task", _card(tmp_path, "cohort_a==cohort_b--tumour"), "--model", "test_vit",
                            "--random-init",
                            "--num-workers", "0", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    record = run_record(tmp_path / "out", result)
    assert "folds" not in record  # one fold: a plain run
    assert record["scored"]["test"] == len(test)
    assert record["scored"]["train"] + record["scored"]["val"] == len(train) and record["scored"]["val"]
    assert record["slides"]["test"]["slides"] == len(test)
