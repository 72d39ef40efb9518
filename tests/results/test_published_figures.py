"""The peers' published figures (evalsuite/data/published/*.csv) beside a user's rows: in `evalsuite leaderboard`,
its wide CSV, `load_wide` and the HTML report, with their source; never for a model or task the user did not run."""

import csv
import re

import pytest
from conftest import make_mhist

from evalsuite.models.registry import REGISTRY
from evalsuite.reporting.table.wide import Cell, ModelRow, WideTable
from evalsuite.results.published import figures_beside, load_published
from evalsuite.tasks.cards import find_card, load_card

# The cards issue 52 adds (their figures may land before the cards do).
ISSUE_52_CARDS = {"spider_breast", "spider_colorectal", "spider_skin", "spider_thorax", "starc9", "tcga_tils",
                  "tcga_crc_msi", "camelyon17_wilds", "gleason_arvaniti", "unitopatho", "bcss", "ocelot",
                  "segpath_epithelial", "segpath_lymphocytes", "plism"}


def _card_metric(task: str):
    try:
        find_card(task)
    except Exception:  # an issue-52 card not shipped yet
        return None
    return load_card(task).selection_metric


def test_every_figure_names_our_model_task_and_metric_and_its_source():
    figures = load_published()
    assert {f.peer for f in figures} == {"eva", "HEST-Benchmark", "plismbench", "THUNDER"}
    keys = [(f.model, f.task, f.metric) for f in figures]
    assert len(keys) == len(set(keys)), "one figure per model, task and metric"
    for figure in figures:
        assert figure.model in REGISTRY, figure
        metric = _card_metric(figure.task)
        headline_or_part = metric == figure.metric or (figure.task == "plism" and figure.metric.startswith("plism_"))
        assert headline_or_part or (metric is None and figure.task in ISSUE_52_CARDS), figure
        assert re.fullmatch(r"[0-9a-f]{40}", figure.commit) and figure.source_file and figure.protocol_difference
        assert 0.0 <= figure.value <= 1.0 and figure.value_text == f"{figure.value_text}".strip()
    by_key = {(f.peer, f.model, f.task, f.metric): f.value_text for f in figures}
    # Spot checks against the files as published (eva's CSV at 0.4.5, HEST's README, plismbench's README,
    # THUNDER's docs/leaderboards.md at 05eb5dc, which prints percent: 86.7 is stored as 0.867).
    assert by_key[("eva", "virchow2-cls", "bach", "balanced_accuracy")] == "0.883"
    assert by_key[("eva", "uni", "pcam", "balanced_accuracy")] == "0.937"  # patch_camelyon/test, not the val column
    assert by_key[("HEST-Benchmark", "h0-mini-cls", "hest_ccrcc", "pearson")] == "0.2670"
    assert by_key[("plismbench", "conch", "plism", "plism_leaderboard_metric")] == "0.498"
    assert by_key[("plismbench", "gpfm", "plism", "plism_leaderboard_metric")] == "0.265"
    assert by_key[("THUNDER", "uni2-h", "spider_breast", "f1_macro")] == "0.867"
    assert by_key[("THUNDER", "virchow2", "camelyon17_wilds", "f1_macro")] == "0.900"  # wilds, as published


def _table(model: str, task: str, metric: str, split: str = "test") -> WideTable:
    row = ModelRow(model=model, cells={task: Cell(mean=0.5, std=None, seeds=(0,), probe="knn")})
    return WideTable(split=split, tasks=[task], metrics={task: metric}, rows=[row])


def test_no_figure_without_a_user_row_of_that_model_task_metric_and_split():
    assert figures_beside(_table("efficientnet_lite0_imagenet", "mhist", "balanced_accuracy")) == {}
    assert figures_beside(_table("uni", "mhist", "f1_macro")) == {}  # another metric than the one published
    assert figures_beside(_table("uni", "mhist", "balanced_accuracy", split="val")) == {}
    found = figures_beside(_table("uni", "mhist", "balanced_accuracy"))
    assert found[("uni", "mhist")].value_text == "0.843" and not found[("uni", "mhist")].other_weights


def test_a_published_figure_shows_beside_a_run_of_the_same_model_and_task(cli_in_process, tmp_path):
    """Acceptance: a random-init run of kaiko-vits16 on MHIST; eva 0.4.5 published kaiko_vits16's 0.831."""
    import evalsuite

    out, data = tmp_path / "out", make_mhist(tmp_path / "mhist", {"train": 2, "test": 1}, size=(16, 16))
    ran = cli_in_process("run", "--task", "mhist", "--model", "kaiko-vits16", "--random-init", "--data-root", data,
                         "--no-count-check", "--probes", "knn", "--num-workers", "0", "--precision", "fp32", "--out", out)
    assert ran.returncode == 0, ran.stderr
    source = "published: eva 0.4.5, kaiko-ai/eva tools/data/leaderboards/pathology.csv (mhist) at 8207100"

    board = cli_in_process("leaderboard", "--out", out)
    assert board.returncode == 0, board.stderr
    block = board.stdout.split("published figures beside your rows", 1)[1]
    line = next(line for line in block.splitlines() if line.startswith("kaiko-vits16+random-init"))
    assert "mhist" in line and "0.831" in line and source in line and "your row is kaiko-vits16+random-init, not kaiko-vits16 as published" in line

    with open(out / "leaderboard_wide.csv", newline="") as handle:
        wide = next(csv.DictReader(handle))
    assert (wide["mhist_published"], wide["mhist_published_source"]) == ("0.831", source)

    frame = evalsuite.load_wide(out)
    assert frame.loc[0, "mhist_published"] == pytest.approx(0.831)
    assert frame.loc[0, "mhist_published_source"] == source
    assert "no search" in frame.loc[0, "mhist_published_difference"]

    assert cli_in_process("report", "--out", out).returncode == 0
    page = (out / "report.html").read_text()
    assert "published 0.831 · eva 0.4.5" in page and 'id="published-figures"' in page and source in page
    markdown = cli_in_process("report", "--out", out, "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    line = next(line for line in markdown.stdout.splitlines() if line.startswith("- kaiko-vits16+random-init"))
    assert "on mhist" in line and "published 0.831" in line and "pathology.csv" in line
    latex = cli_in_process("report", "--out", out, "--format", "latex")
    assert "published 0.831" in latex.stdout
