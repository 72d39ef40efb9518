"""The wide table never chooses a probe on a val that is train (issue 38, part 6: HEST's val is each fold's train).

HEST runs write no val rows now; runs written before wrote val rows equal to their train rows, on which the probe
that fits train closest wins. Either way a cell shows the card's recipe where the task's card names one of its
probes, and otherwise asks for --probe in one line. A genuine val is still chosen on.
"""

import pytest
from conftest import assert_one_line_error, run_cli

from evalsuite.reporting.table.wide import build_wide_table
from evalsuite.results.leaderboard import append_rows, read_rows

T1 = "2026-01-02T00:00:00+00:00"


def add_run(board, task, probe, train, test, val="train", model="A", seed=0):
    """One run's train, val and test rows of pearson and mse (mse = 1 - pearson); val="train" writes val rows equal
    to the train rows (a HEST run before this change), None writes none (a HEST run since)."""
    scores = {"train": train, "test": test, **({} if val is None else {"val": train if val == "train" else val})}
    sizes = {"train": 300, "val": 300 if val == "train" else 100, "test": 150}
    rows = [{"run_id": f"{model}-{task}-{probe}-{seed}", "timestamp_utc": T1, "task": task, "model": model,
             "weights_id": "sha256:w", "probe": probe, "selected_params": "{}", "split": split, "metric": metric,
             "value": f"{number:.6f}", "seed": seed, "n_samples": sizes[split], "headline_metric": "pearson"}
            for split, value in scores.items() for metric, number in (("pearson", value), ("mse", 1 - value))]
    append_rows(board, rows)


def _hest_board(tmp_path, task="hest_prad", val="train"):
    """ridge_hest_16 fits train closer (0.90 against 0.60) but does worse on test (0.30 against 0.40)."""
    board = tmp_path / "leaderboard.csv"
    for seed in (0, 1):
        add_run(board, task, "ridge_hest", 0.60, 0.40, val=val, seed=seed)
        add_run(board, task, "ridge_hest_16", 0.90, 0.30, val=val, seed=seed)
    return board


@pytest.mark.parametrize("val", ["train", None], ids=["val_rows_equal_train_rows", "no_val_rows"])
def test_a_hest_cell_shows_the_card_recipe_not_the_best_in_sample_score(tmp_path, val):
    table = build_wide_table(read_rows(_hest_board(tmp_path, val=val)))
    cell = table.rows[0].cells["hest_prad"]
    assert (cell.probe, cell.mean, cell.seeds) == ("ridge_hest", pytest.approx(0.40), (0, 1))


def test_without_a_card_naming_one_probe_the_leaderboard_asks_for_one(tmp_path):
    _hest_board(tmp_path, task="my_hest")  # a card run from its own path: not found by name
    result = run_cli("leaderboard", "--out", tmp_path)
    assert_one_line_error(result, "model 'A' on task 'my_hest' has probes ridge_hest, ridge_hest_16",
                          "its val rows are its train scores", "pass --probe NAME")
    chosen = run_cli("leaderboard", "--out", tmp_path, "--probe", "ridge_hest_16")
    assert chosen.returncode == 0, chosen.stderr
    assert "0.3000" in chosen.stdout and "0.4000" not in chosen.stdout


def test_a_genuine_val_beside_train_rows_is_still_chosen_on(tmp_path):
    board = tmp_path / "leaderboard.csv"
    add_run(board, "my_task", "linear", train=0.99, val=0.70, test=0.60)
    add_run(board, "my_task", "knn", train=0.95, val=0.80, test=0.50)
    cell = build_wide_table(read_rows(board)).rows[0].cells["my_task"]
    assert (cell.probe, cell.mean) == ("knn", pytest.approx(0.50))
