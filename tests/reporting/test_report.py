"""`evalsuite report` as data, Markdown and LaTeX: the column's best set, floors, the overall ranking,
provenance, bad input, and that the report changes no file it reads. Leaderboards are built in a temp folder with
test_compare's helpers (scores from stored probabilities); the HTML page has its own tests (test_report_html.py)."""

import hashlib
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from test_compare import _model, add_model, build_board

from evalsuite.reporting.page.data import Report, ReportCell, collect
from evalsuite.reporting.page.text import latex_report, markdown_report
from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows
from evalsuite.results.predictions import predictions_path

GOLDEN = Path(__file__).parent / "golden" / "report_overview.tex"


@pytest.fixture
def board(tmp_path):
    """test_compare's board (t1: good best, close three items from it, weak far below; t2: good vs weak) and
    `floor`, a random-init model on both tasks."""
    build_board(tmp_path)
    for task, headline in (("t1", "balanced_accuracy"), ("t2", "accuracy")):
        add_model(tmp_path, "floor", task, [_model(0.3, 5)], headline=headline, weights_id="random-init:seed0")
    return tmp_path


def test_best_sets_floors_and_overall_ranking(board):
    report = collect(board)
    cells = report.cells
    assert cells[("good", "t1")].rank == 1 and cells[("good", "t1")].best_set is True
    assert cells[("close", "t1")].best_set is True and cells[("close", "t1")].best_set_p >= 0.05
    assert cells[("weak", "t1")].best_set is False and cells[("weak", "t1")].best_set_p < 0.05
    assert cells[("weak", "t2")].best_set is False and cells[("floor", "t2")].best_set is False
    # `floor` is a random-init model of no architecture shown here: no model's floor (issue 49: each model's own
    # random-init row is its floor; tests/reporting/test_like_with_like.py).
    assert report.floors == {} and report.random_init == {"floor": []}
    overall = {model: (rank, interval) for model, rank, interval in report.overall}
    assert report.overall[0][0] == "good" and "close" not in overall  # close has no t2: not comparable over tasks
    # good is first on t2 in every draw and first or second (after close) on t1; floor (30 % right) is last on both
    # tasks (4th, 3rd) but changes places with weak (40 %) on one of them in some draws (each task's own draws).
    assert overall["good"] == (1.0, (1.0, 1.5)) and overall["floor"] == (3.5, (3.0, 3.5))
    # The rows carry no interval; the stored predictions give the interval of the mean shown (good: two seeds).
    low, high = cells[("good", "t1")].interval
    assert low < cells[("good", "t1")].mean < high
    assert cells[("good", "t1")].cost["throughput_img_s"] == pytest.approx(100.0)


def test_a_run_without_predictions_marks_its_column_untested_with_a_note(board):
    predictions_path(board, "weak-t1-0").unlink()
    result = run_cli("report", "--out", board, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert "t1 not tested (marked ?): a run has no stored test predictions" in result.stderr
    report = collect(board)
    assert report.cells[("close", "t1")].best_set is None and "no stored test predictions" in \
        report.cells[("close", "t1")].untested
    assert report.cells[("weak", "t2")].best_set is False
    close = next(line for line in result.stdout.splitlines() if line.startswith("| close "))
    assert " ? " in close and "◆" not in close


def test_markdown_is_a_table_with_bold_best_and_ties(board):
    text = markdown_report(collect(board))
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len({line.count("|") for line in table}) == 1  # every row has the header's columns
    assert table[1].startswith("|---|")
    good, close = (next(line for line in table if line.startswith(f"| {m} ")) for m in ("good", "close"))
    assert "**" in good and "◆" in close and "◆" in good.split("|")[2]
    weak = next(line for line in table if line.startswith("| weak "))
    assert "◆" not in weak and "?" not in weak
    floors = [line for line in table if "random-init" in line]  # the random-init model's own row, marked
    assert len(floors) == 1 and floors[0].startswith("| floor *(random-init (no model of its own here))* |")


def _hand_made_report() -> Report:
    def cell(model, task, mean, rank, in_set, interval=(0.5, 0.9)):
        return ReportCell(model=model, task=task, metric="balanced_accuracy", mean=mean, std=None, seeds=(0,),
                          probe="linear", rank=rank, rank_interval=(rank, rank + 1), interval=interval,
                          best_set=in_set)
    cells = {("uni_2", "crc"): cell("uni_2", "crc", 0.9512, 1, True),
             ("h-optimus&0", "crc"): cell("h-optimus&0", "crc", 0.9433, 2, True),
             ("uni_2", "pcam"): cell("uni_2", "pcam", 0.8801, 2, False, None),
             ("h-optimus&0", "pcam"): cell("h-optimus&0", "pcam", 0.9010, 1, True)}
    return Report(source="x", tasks=["crc", "pcam"], metrics={"crc": "balanced_accuracy", "pcam": "balanced_accuracy"},
                  models=["h-optimus&0", "uni_2"], cells=cells, floors={},
                  overall=[("h-optimus&0", 1.5, None), ("uni_2", 1.5, None)])


def test_latex_matches_the_golden_file():
    assert latex_report(_hand_made_report()) + "\n" == GOLDEN.read_text()


def _digests(folder: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_report_is_a_view_it_changes_no_file(board):
    before = _digests(board)
    for form in ("markdown", "latex"):
        assert run_cli("report", "--out", board, "--format", form).returncode == 0
    assert _digests(board) == before


def test_bad_input_is_one_line_and_exit_2(board, tmp_path_factory):
    empty = tmp_path_factory.mktemp("empty")
    assert_one_line_error(run_cli("report", "--out", empty), "no leaderboard")
    append_rows(empty / LEADERBOARD_FILE, [])
    (empty / LEADERBOARD_FILE).write_text((empty / LEADERBOARD_FILE).read_text() or "schema,run_id\n")
    assert run_cli("report", "--out", empty).returncode == 2
    foreign = tmp_path_factory.mktemp("foreign")
    (foreign / LEADERBOARD_FILE).write_text("a,b\n1,2\n")
    assert_one_line_error(run_cli("report", "--out", foreign), str(foreign / LEADERBOARD_FILE))
    assert_one_line_error(run_cli("report", "--out", board, "--task", "nope", "--format", "markdown"), "nope")
    assert_one_line_error(run_cli("report", "--out", board, "--model", "nope", "--format", "markdown"), "nope")
    blocker = board / "a_file"
    blocker.write_text("")
    assert_one_line_error(run_cli("report", "--out", board, "--html", blocker / "report.html"), "--html")


def test_the_reproduce_command_keeps_the_flags_that_change_what_is_scored():
    from evalsuite.reporting.page.data import reproduce_command

    record = {"seeds": [1], "config": {"task": "bach", "model": "m", "check_counts": False, "skip_bad_slides": True,
                                       "random_init": False, "data_root": "/data/my bach", "out_dir": "out"}}
    command = reproduce_command(record, [record, {"seeds": [0]}])
    assert command == ("evalsuite run --task bach --model m --data-root '/data/my bach' --no-count-check "
                       "--skip-bad-slides --seeds 0,1 --out out")
    defaults = {"seeds": [0], "config": {"task": "bach", "model": "m", "check_counts": True, "out_dir": "out"}}
    assert reproduce_command(defaults, [defaults]) == "evalsuite run --task bach --model m --seeds 0 --out out"


def test_a_column_of_one_cluster_is_marked_not_tested_with_a_note(tmp_path):
    """Every test item of one patient: nothing to resample, so no best set; the column's cells get "?" (report and
    leaderboard) and the note says why, never the no-mark reading "outside the best set"."""
    one_patient = ["patient7"] * 150
    add_model(tmp_path, "good", "t1", [_model(0.95, 1)], clusters=one_patient, unit="patient")
    add_model(tmp_path, "weak", "t1", [_model(0.4, 3)], clusters=one_patient, unit="patient")
    result = run_cli("report", "--out", tmp_path, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert "t1 not tested (marked ?): its test split is one patient: there is nothing to resample" in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith(("| good ", "| weak "))]
    assert len(rows) == 2 and all(" ? " in row and "◆" not in row for row in rows)
    report = collect(tmp_path)
    assert {cell.best_set for cell in report.cells.values()} == {None}
    assert all(cell.interval is None and cell.rank_interval is None for cell in report.cells.values())
    board = run_cli("leaderboard", "--out", tmp_path)
    assert "note: t1 not tested (marked ?)" in board.stderr
    assert all(line.endswith("?") for line in board.stdout.splitlines() if line.startswith(("good ", "weak ")))


def test_markdown_escapes_labels_as_the_html_and_latex_outputs_do(tmp_path):
    """Issue 40: a label's `<script>` reached a README or an issue as HTML; `*`, `_`, `[` and a line break changed or
    broke the table. An old or edited leaderboard can hold any label."""
    hostile = "<script>alert(1)</script>*x*_[y](z)`\nnext"
    add_model(tmp_path, hostile, "t1", [_model(0.9, 1)])
    add_model(tmp_path, "plain", "t1", [_model(0.5, 2)])
    result = run_cli("report", "--out", tmp_path, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert "<script>" not in result.stdout and "&lt;script&gt;alert(1)&lt;/script&gt;" in result.stdout
    assert r"\*x\*\_\[y\](z)\` next" in result.stdout
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert len(table) == 4 and len({line.count(" | ") for line in table[2:]}) == 1  # header, rule, two models
    board = run_cli("leaderboard", "--out", tmp_path, "--format", "markdown")  # its Markdown table too
    assert board.returncode == 0, board.stderr
    assert "<script>" not in board.stdout and r"&lt;script&gt;alert(1)&lt;/script&gt;\*x\*" in board.stdout
    rows = [line for line in board.stdout.splitlines() if line.startswith("|")]
    assert len(rows) == 4 and len({line.count(" | ") for line in rows}) == 1


def test_a_damaged_predictions_file_is_named_as_damaged_not_as_missing(board):
    """Issue 40: the note said "no stored test predictions (made before they were stored...)", where
    `leaderboard --compare` says the file is damaged."""
    path = predictions_path(board, "weak-t1-0")
    path.write_bytes(path.read_bytes()[:200])
    for command in (["report", "--format", "markdown"], ["leaderboard"]):
        result = run_cli(*command, "--out", board)
        assert result.returncode == 0, result.stderr
        note = next(line for line in result.stderr.splitlines() if line.startswith("note: t1 not tested"))
        assert f"cannot read predictions {path}" in note and "the file is damaged: delete it and rerun" in note
        assert "made before they were stored" not in note
