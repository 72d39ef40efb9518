"""The long leaderboard CSV: concurrent appends, torn lines, schema upgrades and bad files."""

import csv
import json
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import assert_one_line_error, leaderboard_rows, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard import COLUMNS, SCHEMA_VERSION, append_rows, read_rows

V1_COLUMNS = COLUMNS[: COLUMNS.index("headline_metric")]


def make_row(run_id="r0", value=0.5, seed=0, **fields) -> dict:
    row = {"run_id": run_id, "timestamp_utc": "2026-01-01T00:00:00+00:00", "task": "demo", "model": "m",
           "weights_id": "sha256:abc", "probe": "linear", "selected_params": json.dumps({"lr": 0.01}),
           "split": "test", "metric": "balanced_accuracy", "value": f"{value:.6f}", "seed": seed,
           "n_samples": 10, "headline_metric": "balanced_accuracy"}
    return {**row, **fields}


_WRITER = """
import json, os, sys, time
from pathlib import Path
from evalsuite.results.leaderboard import append_rows
board, go, writer = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
for i in range(25):
    # A 4 kB field makes an interleaved or torn write show up as a broken row.
    params = json.dumps({"writer": writer, "i": i, "pad": "x" * 4000})
    append_rows(board, [dict(run_id=f"w{writer}-{i}", timestamp_utc="2026-01-01T00:00:00+00:00", task="demo",
                             model=f"m{writer}", weights_id="sha256:abc", probe="linear", selected_params=params,
                             split="test", metric="balanced_accuracy", value="0.5", seed=i, n_samples=1,
                             headline_metric="balanced_accuracy")])
"""


def test_eight_processes_appending_25_rows_each_lose_and_duplicate_nothing(tmp_path):
    board, go = tmp_path / "leaderboard.csv", tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(board), str(go), str(w)]) for w in range(8)]
    time.sleep(1.0)  # let every writer import and wait at the start line, so they really overlap
    go.touch()
    assert all(w.wait(timeout=120) == 0 for w in writers)

    lines = board.read_text().splitlines()
    assert lines.count(",".join(COLUMNS)) == 1 and lines[0] == ",".join(COLUMNS)
    frame = pd.read_csv(board)
    assert len(frame) == 200 and frame["run_id"].is_unique
    assert set(frame["run_id"]) == {f"w{w}-{i}" for w in range(8) for i in range(25)}
    for row in read_rows(board):
        writer, i = (int(part) for part in row["run_id"][1:].split("-"))
        assert json.loads(row["selected_params"]) == {"writer": writer, "i": i, "pad": "x" * 4000}


def test_a_torn_last_line_is_ignored_by_readers_and_cut_off_by_the_next_append(tmp_path):
    board = tmp_path / "leaderboard.csv"
    append_rows(board, [make_row("r1"), make_row("r1", split="val")])
    with open(board, "a") as handle:  # what a writer killed inside write() leaves behind
        handle.write(f'{SCHEMA_VERSION},r2,2026-01-01T00:00:00+00:00,demo,m,sha256:abc,linear,"{{""lr')
    assert [r["run_id"] for r in read_rows(board)] == ["r1", "r1"]

    append_rows(board, [make_row("r3")])
    assert board.read_text().endswith("\n") and "r2" not in board.read_text()
    assert list(pd.read_csv(board)["run_id"]) == ["r1", "r1", "r3"]


def test_a_schema_1_file_is_widened_in_place_and_keeps_its_rows(tmp_path):
    board = tmp_path / "leaderboard.csv"
    with open(board, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=V1_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerow({**{k: v for k, v in make_row("old").items() if k in V1_COLUMNS}, "schema": 1})

    append_rows(board, [make_row("new", headline_metric="f1_macro")])
    frame = pd.read_csv(board)
    assert list(frame.columns) == COLUMNS
    assert list(frame["schema"]) == [1, SCHEMA_VERSION] and list(frame["run_id"]) == ["old", "new"]
    # Schema 1 rows have no headline column: the reader supplies the default of that time.
    assert [r["headline_metric"] for r in read_rows(board)] == ["balanced_accuracy", "f1_macro"]


def test_columns_from_a_newer_version_are_kept_on_append_and_ignored_by_the_reader(tmp_path):
    board = tmp_path / "leaderboard.csv"
    newer = COLUMNS + ["pixel_spacing_um", "stain"]
    with open(board, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=newer, lineterminator="\n")
        writer.writeheader()
        writer.writerow({**make_row("newer"), "schema": SCHEMA_VERSION + 1, "pixel_spacing_um": 0.5, "stain": "HE"})

    append_rows(board, [make_row("ours")])
    frame = pd.read_csv(board)
    assert list(frame.columns) == newer
    assert frame["pixel_spacing_um"].iloc[0] == 0.5 and pd.isna(frame["pixel_spacing_um"].iloc[1])
    assert [r["value"] for r in read_rows(board)] == [0.5, 0.5]


def test_appending_to_a_foreign_csv_refuses_and_leaves_it_alone(tmp_path):
    board = tmp_path / "leaderboard.csv"
    board.write_text("name,score\nx,1\n")
    with pytest.raises(EvalsuiteError, match="not an evalsuite leaderboard .*move it aside"):
        append_rows(board, [make_row()])
    assert board.read_text() == "name,score\nx,1\n"


def test_rows_written_by_the_runner_helper_match_the_conftest_reader(tmp_path):
    append_rows(tmp_path / "leaderboard.csv", [make_row("r1", value=0.25)])
    (row,) = leaderboard_rows(tmp_path)
    assert row["schema"] == str(SCHEMA_VERSION) and row["value"] == "0.250000"


@pytest.mark.parametrize("content, fragments", [
    ("", ["leaderboard.csv is empty"]),
    ("name,score\nx,1\n", ["not an evalsuite leaderboard", "missing columns: schema, run_id"]),
    (",".join(COLUMNS) + "\n", ["has a header but no rows"]),
    (",".join(COLUMNS) + "\n2,r,t,demo,m,w,linear,{},test,accuracy,high,0,1,accuracy" + "," * (len(COLUMNS) - 14) + "\n",
     ["line 2", "value 'high'", "not a number"]),
    (",".join(COLUMNS) + "\n2,r,t,demo,m\n", ["line 2", "wrong number of fields"]),
])
def test_a_bad_leaderboard_file_is_a_one_line_error(tmp_path, content, fragments):
    (tmp_path / "leaderboard.csv").write_text(content)
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path), *fragments)


def test_a_binary_file_and_a_missing_file_are_one_line_errors(tmp_path):
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path), "no leaderboard at", "--out")
    (tmp_path / "leaderboard.csv").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path), "not a text CSV")
