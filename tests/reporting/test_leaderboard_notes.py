"""A table without a probe's cells says why (issue 25 item 8): `invariance` rows hold cosine_* and *_delta_*."""

from conftest import run_cli
from test_leaderboard_wide import add_run

from evalsuite.results.leaderboard import append_rows

INVARIANCE_METRICS = ("cosine_hed", "cosine_median_hed", "balanced_accuracy_delta_hed")


def _board(folder):
    add_run(folder / "leaderboard.csv", "A", "demo", 0, 0.8)
    append_rows(folder / "leaderboard.csv", [
        {"run_id": "robustness-1", "timestamp_utc": "2026-01-05T00:00:00+00:00", "task": "demo", "model": "A",
         "weights_id": "sha256:same", "probe": "invariance", "selected_params": "{}", "split": "test",
         "metric": metric, "value": "0.9", "seed": 0, "n_samples": 10, "headline_metric": "balanced_accuracy"}
        for metric in INVARIANCE_METRICS])


def test_an_empty_table_names_the_metrics_its_probe_has(tmp_path):
    _board(tmp_path)
    result = run_cli("leaderboard", "--out", tmp_path, "--task", "demo", "--probe", "invariance")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: the table is empty")]
    assert notes == ["note: the table is empty: probe 'invariance' has no balanced_accuracy rows on the test split, "
                     "so it has no cell; its test rows hold balanced_accuracy_delta_hed, cosine_hed, "
                     "cosine_median_hed; pass --metric balanced_accuracy_delta_hed --probe invariance"]
    shown = run_cli("leaderboard", "--out", tmp_path, "--probe", "invariance", "--metric", "cosine_hed")
    assert "0.9000 [invariance, 1, #1]" in shown.stdout and "no cell" not in shown.stderr


def test_a_table_with_cells_still_says_which_probe_it_leaves_out(tmp_path):
    _board(tmp_path)
    result = run_cli("leaderboard", "--out", tmp_path)
    assert "0.8000 [linear, 1, #1]" in result.stdout
    assert "note: probe 'invariance' has no balanced_accuracy rows on the test split" in result.stderr
    assert "table is empty" not in result.stderr and "probe 'linear'" not in result.stderr
