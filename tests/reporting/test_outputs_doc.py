"""docs/outputs.md's Python block gives the cells of `evalsuite leaderboard` (issue 25 item 9, issue 41: the API
replaced a 13-line pandas recipe): reruns replaced, not averaged in; the probe chosen on val, an exact val tie broken
by val NLL."""

import math
import re

import pytest
from conftest import REPO
from test_leaderboard_wide import T1, add_run

from evalsuite.reporting.table.wide import build_wide_table
from evalsuite.results.leaderboard import append_rows, read_rows

T0, T2 = "2026-01-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00"


def _documented_snippet() -> str:
    text = (REPO / "docs" / "outputs.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "load_leaderboard" in b]
    assert len(blocks) == 1, "docs/outputs.md should hold one Python block reading the leaderboard"
    return blocks[0]


def _val_nll(board, model, task, probe, seed, test, value):
    """The val NLL row of the run add_run wrote with these arguments (same run id and timestamp)."""
    append_rows(board, [{"run_id": f"{model}-{task}-{probe}-{seed}-{T1}-{test}", "timestamp_utc": T1,
                         "task": task, "model": model, "weights_id": "sha256:same", "probe": probe,
                         "selected_params": "{}", "split": "val", "metric": "nll", "value": f"{value:.6f}",
                         "seed": seed, "n_samples": 10, "headline_metric": "accuracy"}])


@pytest.fixture
def out(tmp_path):
    folder = tmp_path / "evalsuite_out"
    board = folder / "leaderboard.csv"
    for seed in (0, 1):
        add_run(board, "A", "t1", seed, 0.10, timestamp=T0)  # replaced by the rerun below: must not count
        add_run(board, "A", "t1", seed, 0.80 + 0.02 * seed)  # test 0.80, 0.82 -> mean 0.81
        add_run(board, "A", "t1", seed, 0.95, val=0.50, probe="knn")  # better on test, worse on val: not shown
        add_run(board, "B", "t1", seed, 0.70, timestamp=T2)
        add_run(board, "B", "t2", seed, 0.60 + 0.1 * seed, headline="accuracy")  # mean 0.65
    # C on t2: linear and knn tie on val (0.9); linear has the lower val NLL, so linear (test 0.4) is shown, not knn,
    # which the name alone would pick.
    add_run(board, "C", "t2", 0, 0.40, val=0.9, headline="accuracy")
    add_run(board, "C", "t2", 0, 0.30, val=0.9, probe="knn", headline="accuracy")
    _val_nll(board, "C", "t2", "linear", 0, 0.40, 0.4)
    _val_nll(board, "C", "t2", "knn", 0, 0.30, 0.9)
    return folder


def test_documented_python_block_gives_the_leaderboard_cells(out, monkeypatch):
    monkeypatch.chdir(out.parent)
    namespace = {}
    exec(_documented_snippet(), namespace)  # noqa: S102 - the documentation's own code, run as a reader would
    table, board = namespace["table"], namespace["board"]
    assert len(board) == len(read_rows(out / "leaderboard.csv")) and str(board["seed"].dtype) == "int64"
    wide = build_wide_table(read_rows(out / "leaderboard.csv"))
    expected = {(row.model, task): cell.mean for row in wide.rows for task, cell in row.cells.items()}
    got = {(model, task): float(table.loc[model, task]) for model in table.index for task in table.columns
           if not math.isnan(table.loc[model, task])}
    assert got == pytest.approx(expected, abs=1e-9)
    # Reference values: A/t1 0.81 (reruns replaced, linear chosen on val), C/t2 0.40 (linear wins the val tie on NLL).
    assert got[("A", "t1")] == pytest.approx(0.81) and got[("C", "t2")] == pytest.approx(0.40)
    assert got[("B", "t2")] == pytest.approx(0.65)


def test_outputs_doc_lists_every_metric_family_and_says_values_leave_0_1():
    text = (REPO / "docs" / "outputs.md").read_text()
    metric_row = next(line for line in text.splitlines() if line.startswith("| `metric` |"))
    for name in ("ece", "mce", "brier", "nll", "quadratic_kappa", "cosine_", "_delta_", "c_index", "dice_fg_mean",
                 "retrieval_acc@k", "robustness_index"):
        assert name in metric_row, name
    value_row = next(line for line in text.splitlines() if line.startswith("| `value` |"))
    assert "0..1 (" not in value_row and "2.13" in value_row and "-0.29" in value_row
