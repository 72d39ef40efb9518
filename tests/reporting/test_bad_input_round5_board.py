"""Hostile inputs to the leaderboard and the report (issue 48): a last row without its line break, torn lines,
duplicate columns, numbers Python's float() reads too loosely, columns and seeds whose values are nan, a damaged
predictions file beside a lone model, and --compare sides that name no probe or hold other metrics."""

import csv
import io
import re

import pytest
from conftest import assert_one_line_error, run_cli
from test_compare import _model, add_model

import evalsuite
from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard import COLUMNS, LEADERBOARD_FILE, append_rows

T1 = "2026-01-02T00:00:00+00:00"


def _row(run_id: str, split: str = "test", value: str = "0.750000", seed: int = 0, **fields) -> dict:
    return {"run_id": run_id, "timestamp_utc": T1, "task": "demo", "model": "earlier", "weights_id": "w",
            "probe": "linear", "selected_params": "{}", "split": split, "metric": "balanced_accuracy",
            "value": value, "seed": seed, "n_samples": 10, "headline_metric": "balanced_accuracy", **fields}


def _board_without_final_line_break(out) -> list:
    """Three complete rows, the last one saved without its line break (as an editor leaves it)."""
    rows = [_row("e1", "val"), _row("e1", "test"), _row("e2", "test", value="0.812500", seed=1)]
    append_rows(out / LEADERBOARD_FILE, rows)
    board = out / LEADERBOARD_FILE
    board.write_bytes(board.read_bytes().rstrip(b"\n"))
    return rows


def _edit_values(board, change) -> None:
    """Rewrite the CSV with `change(row)` applied to each row (a hand edit)."""
    rows = list(csv.DictReader(io.StringIO(board.read_text())))
    for row in rows:
        change(row)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    board.write_text(text.getvalue())


# Case 0: a last row without its line break, torn lines, duplicate columns, strict numbers.

@pytest.mark.slow
def test_a_run_after_a_last_row_without_line_break_keeps_every_earlier_row(tmp_path):
    _board_without_final_line_break(tmp_path)
    run = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                  "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    frame = evalsuite.load_leaderboard(tmp_path)
    earlier = frame[frame["model"] == "earlier"]
    assert list(earlier["run_id"]) == ["e1", "e1", "e2"] and list(earlier["value"]) == [0.75, 0.75, 0.8125]
    new = frame[frame["model"] != "earlier"]
    assert len(new) > 0 and len(frame) == 3 + len(new)
    board = run_cli("leaderboard", "--out", tmp_path, "--format", "csv")
    assert board.returncode == 0, board.stderr
    shown = {line.split(",")[0]: line for line in board.stdout.splitlines()[1:]}
    assert len(shown) == 2 and ",0.781250,0.044194,2," in shown["earlier"]  # both of its test rows
    assert f"{tmp_path / LEADERBOARD_FILE}: its last row had no line break" in run.stderr  # the repair is said


def test_a_last_row_without_line_break_is_read_by_every_reader(tmp_path):
    _board_without_final_line_break(tmp_path)
    frame = evalsuite.load_leaderboard(tmp_path)
    assert list(frame["run_id"]) == ["e1", "e1", "e2"] and frame["value"].iloc[-1] == 0.8125
    board = run_cli("leaderboard", "--out", tmp_path, "--format", "csv")
    assert board.returncode == 0, board.stderr
    assert board.stdout.splitlines()[1].split(",")[:2] == ["earlier", "test"]
    assert ",0.781250,0.044194,2," in board.stdout  # seeds 0 and 1: the last row counted


def test_an_append_to_an_older_header_keeps_a_last_row_without_line_break(tmp_path):
    board = tmp_path / LEADERBOARD_FILE
    old_columns = COLUMNS[: COLUMNS.index("precision")]  # schema 3: the append widens the header
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=old_columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerow({**_row("old"), "schema": 3})
    board.write_text(text.getvalue().rstrip("\n"))
    append_rows(board, [_row("new")])
    assert list(evalsuite.load_leaderboard(tmp_path)["run_id"]) == ["old", "new"]


TORN = "6,torn,2026-01-02T00:00:00+00:00,demo,earl"


def test_a_torn_last_line_is_named_with_its_file_and_line_by_every_reader(tmp_path):
    board = tmp_path / LEADERBOARD_FILE
    append_rows(board, [_row("e1", "val"), _row("e1", "test")])
    with open(board, "a") as handle:
        handle.write(TORN)
    result = run_cli("leaderboard", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{board} line 4 is unfinished" in result.stderr
    with pytest.warns(UserWarning, match=re.escape(f"{board} line 4 is unfinished")):
        frame = evalsuite.load_leaderboard(tmp_path)
    assert list(frame["run_id"]) == ["e1", "e1"]


def test_an_append_cuts_a_torn_last_line_off_and_says_so(tmp_path, capfd):
    board = tmp_path / LEADERBOARD_FILE
    append_rows(board, [_row("e1")])
    with open(board, "a") as handle:
        handle.write(TORN)
    append_rows(board, [_row("e2")])
    assert f"{board}: cut off its unfinished last line" in capfd.readouterr().err
    assert "torn" not in board.read_text() and list(evalsuite.load_leaderboard(tmp_path)["run_id"]) == ["e1", "e2"]


def test_a_header_with_a_column_twice_is_refused_by_readers_and_appends(tmp_path):
    board = tmp_path / LEADERBOARD_FILE
    row = {**_row("e1"), "schema": 6}
    board.write_text(",".join(COLUMNS + ["value"]) + "\n" + ",".join(str(row.get(name, "")) for name in COLUMNS)
                     + ",0.1\n")  # two numbers: the reader would silently take the second
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path), str(board), "'value'", "more than once")
    with pytest.raises(EvalsuiteError, match="'value' more than once"):
        evalsuite.load_leaderboard(tmp_path)
    before = board.read_bytes()
    with pytest.raises(EvalsuiteError, match="more than once"):
        append_rows(board, [_row("e2")])
    assert board.read_bytes() == before


@pytest.mark.parametrize("column, text", [("value", "0_5"), ("value", " 0.5"), ("value", "٠.٥"),
                                          ("value", "infinity"), ("seed", "1_0"), ("seed", " 1")])
def test_a_number_written_loosely_is_refused_not_read_as_another(tmp_path, column, text):
    append_rows(tmp_path / LEADERBOARD_FILE, [_row("e1", **{column: text})])
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path), f"{tmp_path / LEADERBOARD_FILE} line 2",
                          f"{column} '{text}'", "not a number")
    with pytest.raises(EvalsuiteError, match="not a number"):
        evalsuite.load_leaderboard(tmp_path)


def test_an_optional_number_column_is_parsed_strictly_by_the_api(tmp_path):
    append_rows(tmp_path / LEADERBOARD_FILE, [_row("e1", ci_low="0_1", ci_high="0.9")])
    with pytest.raises(EvalsuiteError, match="ci_low '0_1' of 'e1' is not a number"):
        evalsuite.load_leaderboard(tmp_path)


# Case 4: a column with no finite value, a nan seed.

def _nan_column_board(out):
    """t1: good > weak; t2: the same predictions, but every test value of the headline nan (edited)."""
    for task in ("t1", "t2"):
        add_model(out, "good", task, [_model(0.95, 1)])
        add_model(out, "weak", task, [_model(0.4, 3)])

    def nan_t2(row):
        if row["task"] == "t2" and row["split"] == "test" and row["metric"] == "balanced_accuracy":
            row["value"] = "nan"
    _edit_values(out / LEADERBOARD_FILE, nan_t2)
    return out


def test_a_column_without_a_finite_value_is_not_tested_and_counts_in_no_rank(tmp_path):
    out = _nan_column_board(tmp_path)
    result = run_cli("leaderboard", "--out", out)
    assert result.returncode == 0, result.stderr
    cells = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith(("good ", "weak "))}
    for model in ("good", "weak"):
        assert cells[model].rstrip().endswith("nan [linear, 1, #-]?"), cells[model]
    assert cells["good"].split()[1:3] == ["1", "1.00"] and cells["weak"].split()[1:3] == ["2", "2.00"]
    assert "t2 not tested (marked ?): no model has a finite balanced_accuracy on the test split" in result.stderr

    wide = evalsuite.load_wide(out)
    assert wide["t2_rank"].isna().all() and wide["t2_rank_low"].isna().all() and wide["t2_in_best_set"].isna().all()
    assert list(wide["mean_rank"]) == list(wide["t1_rank"]) == [1.0, 2.0]

    report = run_cli("report", "--out", out, "--format", "markdown")
    assert report.returncode == 0, report.stderr
    assert "good 1.00 (1.00-1.00), weak 2.00 (2.00-2.00)" in report.stdout
    html = run_cli("report", "--out", out)
    assert html.returncode == 0, html.stderr
    page = (out / "report.html").read_text()
    for model in ("good", "weak"):
        cell = re.search(rf'<td class="cell" data-model="{model}" data-task="t2".*?</td>', page).group(0)
        assert "◆" not in cell and "(1–1)" not in cell and "(2–2)" not in cell and "not tested" in cell
    compare = run_cli("leaderboard", "--out", out, "--compare", "good", "weak")
    for said in (result, report, html, compare):
        assert "fewer than 2 clusters" not in said.stdout + said.stderr


def test_a_nan_seed_is_a_note_naming_it_not_an_internal_error(tmp_path):
    add_model(tmp_path, "good", "t1", [_model(0.95, 1), _model(0.95, 2)])
    add_model(tmp_path, "weak", "t1", [_model(0.4, 3)])

    def nan_seed(row):
        if row["run_id"] == "good-t1-1" and row["split"] == "test" and row["metric"] == "balanced_accuracy":
            row["value"] = "nan"
    _edit_values(tmp_path / LEADERBOARD_FILE, nan_seed)
    for command in (["leaderboard"], ["report", "--format", "markdown"]):
        result = run_cli(*command, "--out", tmp_path)
        assert result.returncode == 0 and "internal error" not in result.stderr, result.stderr
        assert "model 'good' on task 't1' (probe linear): balanced_accuracy on test is nan (undefined) for seed 1 " \
               "of 2" in result.stderr
    assert evalsuite.load_wide(tmp_path)["t1_rank"].tolist() == [1.0, 2.0]  # weak first: good's mean is nan


# Case 5: one model and a damaged predictions file.

def test_a_lone_models_damaged_predictions_file_is_named_with_the_fix(tmp_path):
    add_model(tmp_path, "good", "t1", [_model(0.95, 1)])
    damaged = tmp_path / "runs" / "good-t1-0.predictions.npz"
    damaged.write_bytes(damaged.read_bytes()[:200])
    for command in (["report"], ["leaderboard"]):
        result = run_cli(*command, "--out", tmp_path)
        assert result.returncode == 0, result.stderr
        named = [line for line in result.stderr.splitlines() if str(damaged) in line]
        assert named and all("delete it and rerun" in line for line in named), result.stderr
        assert "(one model)" not in result.stderr
    assert "no reliability diagram of good × t1" in run_cli("report", "--out", tmp_path).stderr


# Case 6: --compare sides.

def _text_retrieval_board(out):
    add_model(out, "good", "t1", [_model(0.95, 1)])
    add_model(out, "weak", "t1", [_model(0.4, 3)])
    rows = [{"run_id": "good-tr", "timestamp_utc": T1, "task": "t1", "model": "good", "weights_id": "w",
             "probe": "text_retrieval", "selected_params": "{}", "split": "test", "metric": metric, "value": "0.5",
             "seed": 0, "n_samples": 150, "headline_metric": "balanced_accuracy"}
            for metric in ("text_retrieval_r@1", "text_retrieval_r@5")]
    append_rows(out / LEADERBOARD_FILE, rows)
    return out


def test_compare_a_probe_whose_rows_hold_other_metrics_names_them_and_metric(tmp_path):
    out = _text_retrieval_board(tmp_path)
    assert_one_line_error(run_cli("leaderboard", "--out", out, "--compare", "good@text_retrieval", "weak"),
                          "good@text_retrieval", "text_retrieval_r@1, text_retrieval_r@5",
                          "--metric text_retrieval_r@1")


@pytest.mark.parametrize("side, what", [("good@", "names no probe"), ("@linear", "names no model")])
def test_compare_with_an_empty_probe_or_model_is_refused(tmp_path, side, what):
    out = _text_retrieval_board(tmp_path)
    assert_one_line_error(run_cli("leaderboard", "--out", out, "--compare", side, "weak"), f"'{side}' {what}",
                          "pass MODEL@PROBE or MODEL")
