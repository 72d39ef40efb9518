"""Issue 41's report details, through `evalsuite report` on test_compare's board (t1, t2: good, close, weak, and a
random-init `floor` model; 150 test items per task, scored from stored probabilities): readable reliability
diagrams (ticks, bin counts), a reason where the overall ranking has no interval, the floor marked on the
random-init model's row instead of a second row, ranks in the LaTeX table, and the words on what a seed varies.
Commands wrapping instead of scrolling is a layout property: tests/e2e/test_report_browser.py measures it."""

import html
import re

import pytest
from conftest import run_cli
from test_compare import ITEMS, _model, add_model, build_board

from evalsuite.results.predictions import predictions_path


@pytest.fixture
def board(tmp_path):
    build_board(tmp_path)
    for task, headline in (("t1", "balanced_accuracy"), ("t2", "accuracy")):
        add_model(tmp_path, "floor", task, [_model(0.3, 5)], headline=headline, weights_id="random-init:seed0")
    return tmp_path


def _page(out) -> str:
    result = run_cli("report", "--out", out)
    assert result.returncode == 0, result.stderr
    return (out / "report.html").read_text(encoding="utf-8")


def _text(out, form: str) -> str:
    result = run_cli("report", "--out", out, "--format", form)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_reliability_diagrams_are_readable_with_ticks_and_every_bins_count(board):
    diagrams = list(re.finditer(r'<svg class="reliability" width="(\d+)" height="(\d+)"(.*?)</svg>', _page(board),
                                re.S))
    assert len(diagrams) == 7  # one per classification cell: good, weak, floor on t1 and t2, close on t1
    for match in diagrams:
        width, height, body = int(match.group(1)), int(match.group(2)), match.group(3)
        assert width >= 240 and height >= 240
        ticks = re.findall(r'<text x="[\d.]+" y="[\d.]+"(?: dy="4")? text-anchor="(?:end|middle)">([\d.]+)</text>',
                           body)
        assert ticks.count("0") == 2 and ticks.count("0.5") == 2 and ticks.count("1") == 2  # both axes
        counts = [int(n) for n in re.findall(r'<text class="n"[^>]*>(\d+)</text>', body)]
        assert sum(counts) == ITEMS and all(counts)  # every test item in one bin; empty bins unlabelled


def test_the_floor_is_marked_on_the_random_init_models_row_not_repeated(board):
    page = _page(board)
    overview = page.split('id="overview"')[1].split("</table>")[0]
    rows = re.findall(r"<tr[^>]*><th scope=\"row\"[^>]*>(.*?)</th>", overview)
    # `floor` is a random-init model whose architecture no shown model has: labelled so, once (issue 49).
    assert sum(row.startswith("floor") for row in rows) == 1 and "random-init floor</th>" not in overview
    label = "random-init (no model of its own here)"
    assert f'<th scope="row">floor<br><span class="sub">{label}</span>' in overview  # no floor: not greyed
    markdown = [line for line in _text(board, "markdown").splitlines() if "floor" in line and line.startswith("|")]
    assert len(markdown) == 1 and markdown[0].startswith(f"| floor *({label})* |")
    latex = [line for line in _text(board, "latex").splitlines() if "floor" in line and "&" in line]
    assert len(latex) == 1 and latex[0].startswith(rf"floor \textit{{({label})}} &")


def test_latex_keeps_each_cells_rank_and_rank_interval(board):
    latex = _text(board, "latex")
    good = next(line for line in latex.splitlines() if line.startswith("good &"))
    cells = good.removesuffix(r" \\").split(" & ")[1:]
    assert len(cells) == 2
    for cell in cells:
        assert re.search(r"\{\\scriptsize \\#1(\.5)? \([\d.]+--[\d.]+\)\}$", cell), cell


def test_an_overall_ranking_without_interval_says_which_task_lacks_draws_and_why(board):
    predictions_path(board, "weak-t2-0").unlink()
    overall = _page(board).split('id="overall"')[1].split("</table>")[0]
    assert "<td>–</td>" not in overall
    gap = html.unescape(re.search(r'<td rowspan="(\d+)" class="gap">(.*?)</td>', overall).group(2))
    assert gap.startswith("none: the interval needs every task's draws, and t2: a run has no stored test predictions")
    assert "t1" not in gap  # t1 has its draws


def test_the_page_says_what_a_seed_varies_and_why_a_cell_can_show_plus_minus_zero(board):
    page = html.unescape(re.sub(r"<[^>]+>", "", _page(board)))
    assert "What a seed varies. The probe, never the backbone" in page
    assert "features are extracted once and cached" in page
    assert "initial weights and the order of the mini-batches" in page and "kNN (ties broken by summed" in page
    assert "Why a cell can show ± 0." in page and "the [lo, hi] interval (the test items resampled)" in page
    notes = page.split("Notes")[-1]
    assert "What the page could not compute, and why" in notes
