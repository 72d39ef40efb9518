"""Several processes appending to one leaderboard lose no row."""

import multiprocessing

import pandas as pd

from evalsuite.results.leaderboard import COLUMNS, append_rows


def _append_many(path, writer: int, runs: int) -> None:
    for run in range(runs):
        rows = [{"run_id": f"w{writer}-r{run}", "task": "demo", "model": f"model{writer}", "probe": "linear",
                 "split": split, "metric": "accuracy", "value": "0.5", "seed": 0} for split in ("val", "test")]
        append_rows(path, rows)


def test_four_processes_appending_lose_no_row(tmp_path):
    path = tmp_path / "leaderboard.csv"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(path, w, 20)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    board = pd.read_csv(path)
    assert list(board.columns) == COLUMNS
    assert len(board) == 4 * 20 * 2
    assert board.groupby("run_id").size().eq(2).all() and board["run_id"].nunique() == 80
