"""`leaderboard --compare A B`, the wide table's rank intervals, the predictions files and `--metric throughput_img_s`,
on leaderboards and predictions built in a temp folder."""

import io

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.classification import compute_metrics
from evalsuite.metrics.multiple_comparisons import stepdown_max_t
from evalsuite.reporting.statistics.compare import compare_models
from evalsuite.reporting.table.wide import Filters, build_wide_table
from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows, read_rows
from evalsuite.results.predictions import load_predictions, predictions_path, save_predictions

T1 = "2026-01-02T00:00:00+00:00"
ITEMS = 150
RNG = np.random.default_rng(0)
LABELS = RNG.integers(0, 3, ITEMS)


def _model(accuracy: float, seed: int) -> np.ndarray:
    """Probabilities right (with a margin) on about `accuracy` of the items."""
    rng = np.random.default_rng(seed)
    proba = rng.random((ITEMS, 3)) * 0.5
    right = rng.random(ITEMS) < accuracy
    proba[np.flatnonzero(right), LABELS[right]] += 1.0
    return (proba / proba.sum(axis=1, keepdims=True)).astype(np.float32)


def add_model(out, model, task, probas, headline="balanced_accuracy", labels=LABELS, clusters=None, save=True,
              throughput=None, weights_id="w", unit="tile", probe="linear"):
    """One run per seed: leaderboard rows scored from the probabilities (val = test) and its predictions file."""
    for seed, proba in enumerate(probas):
        run_id = f"{model}-{task}-{seed}" if probe == "linear" else f"{model}-{task}-{probe}-{seed}"
        metrics = compute_metrics(labels, proba)
        rows = [{"run_id": run_id, "timestamp_utc": T1, "task": task, "model": model, "weights_id": weights_id,
                 "probe": probe, "selected_params": "{}", "split": split, "metric": metric,
                 "value": f"{value:.6f}", "seed": seed, "n_samples": len(labels), "headline_metric": headline,
                 "throughput_img_s": "" if throughput is None else f"{throughput + seed:.6f}"}
                for split in ("val", "test") for metric, value in metrics.items()]
        append_rows(out / LEADERBOARD_FILE, rows)
        if save:
            save_predictions(out, run_id, labels, clusters, {f"{probe}/seed{seed}": proba}, unit=unit)


def build_board(out):
    """good (~95 % right, 2 seeds) > close (good with 3 items changed) >> weak (~40 %) on t1 (balanced accuracy)
    and t2 (accuracy, one seed each: McNemar)."""
    good = [_model(0.95, 1), _model(0.95, 2)]
    close = good[0].copy()
    close[:3] = close[:3, ::-1]
    add_model(out, "good", "t1", good, throughput=100.0)
    add_model(out, "close", "t1", [close], throughput=300.0)
    add_model(out, "weak", "t1", [_model(0.4, 3)], throughput=200.0)
    add_model(out, "good", "t2", good[:1], headline="accuracy", throughput=100.0)
    add_model(out, "weak", "t2", [_model(0.4, 4)], headline="accuracy", throughput=200.0)
    return out


@pytest.fixture
def board(tmp_path):
    return build_board(tmp_path)


def _compare(out, a, b, **filters):
    source = out / LEADERBOARD_FILE
    table = build_wide_table(read_rows(source), "test", filters=Filters(models=(a, b), **filters), source=str(source))
    return table, compare_models(table, out, a, b, source=str(source), draws=300)


def test_predictions_round_trip_and_leave_no_temp_file(tmp_path):
    proba = _model(0.9, 1)
    path = save_predictions(tmp_path, "run1", LABELS, [f"p{i // 3}" for i in range(ITEMS)], {"linear/seed0": proba},
                            unit="patient")
    assert path == predictions_path(tmp_path, "run1") and path.name == "run1.predictions.npz"
    stored = load_predictions(tmp_path, "run1")
    assert stored.labels.dtype == np.int64 and np.array_equal(stored.labels, LABELS)
    assert stored.probas["linear/seed0"].dtype == np.float32 and np.array_equal(stored.probas["linear/seed0"], proba)
    assert stored.cluster_unit == "patient" and stored.clusters[4] == "p1"
    assert save_predictions(tmp_path, "run2", LABELS, None, {"knn/seed3": proba}).exists()
    assert load_predictions(tmp_path, "run2").clusters is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["run1.predictions.npz", "run2.predictions.npz"]


def test_a_missing_or_damaged_predictions_file_is_one_line_naming_it_and_the_fix(tmp_path):
    with pytest.raises(EvalsuiteError, match="run old has no test predictions .*rerun it"):
        load_predictions(tmp_path, "old")
    path = save_predictions(tmp_path, "bad", LABELS, None, {"linear/seed0": _model(0.9, 1)})
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(EvalsuiteError) as error:
        load_predictions(tmp_path, "bad")
    assert str(path) in str(error.value) and "damaged" in str(error.value) and "\n" not in str(error.value)


def test_a_clearly_better_model_is_significant_on_every_task_with_step_down_adjusted_p(board):
    table, comparison = _compare(board, "good", "weak")
    by_task = {c.task: c for c in comparison.tasks}
    assert [c.verdict for c in comparison.tasks] == ["good better", "good better"]
    assert by_task["t1"].result.method == "bootstrap" and by_task["t2"].result.method == "mcnemar"
    # The compared scores are the wide table's cells (mean over good's two seeds on t1).
    cells = {row.model: row.cells for row in table.rows}
    assert by_task["t1"].result.a == pytest.approx(cells["good"]["t1"].mean, abs=1e-6)
    assert by_task["t1"].result.b == pytest.approx(cells["weak"]["t1"].mean, abs=1e-6)
    draws = np.stack([c.draws for c in comparison.tasks], axis=1)
    adjusted = stepdown_max_t([c.result.difference for c in comparison.tasks], draws)
    assert [c.p_adjusted for c in comparison.tasks] == pytest.approx(list(adjusted))
    # No draw comes near the observed differences: the smallest attainable p, not multiplied by the 2 tasks.
    assert [c.p_adjusted for c in comparison.tasks] == pytest.approx([1 / 301, 1 / 301])
    assert all(c.result.low > 0 for c in comparison.tasks)


def test_a_model_compared_with_itself_shows_no_difference(board):
    _, comparison = _compare(board, "good", "good")
    for task in comparison.tasks:
        assert (task.result.difference, task.result.p_value, task.p_adjusted) == (0.0, 1.0, 1.0)
        assert task.verdict == "no significant difference"


def test_a_model_a_few_items_apart_is_not_significantly_different(board):
    _, comparison = _compare(board, "good", "close", tasks=("t1",))
    assert comparison.tasks[0].verdict == "no significant difference" and comparison.tasks[0].p_adjusted > 0.05


def test_the_cli_prints_the_comparison(board):
    result = run_cli("leaderboard", "--out", board, "--compare", "good", "weak")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("A = good, B = weak") and "step-down max-t over the 2 task(s)" in lines[1]
    t1 = next(line for line in lines if line.startswith("t1 "))
    assert t1.split()[:4] == ["t1", "balanced_accuracy", "150", "150"] and t1.endswith("good better")
    assert " mcnemar " in next(line for line in lines if line.startswith("t2 "))
    same = run_cli("leaderboard", "--out", board, "--compare", "weak", "weak", "--task", "t2")
    assert same.returncode == 0 and "+0.0000" in same.stdout
    assert same.stdout.rstrip().endswith("no significant difference")


def test_model_at_probe_compares_two_probes_of_one_model(board):
    """Issue 42's zero-shot against linear of one model: the wide table keeps one probe per model (chosen on val),
    so MODEL@PROBE names each side's probe instead of a --label at run time."""
    add_model(board, "good", "t1", [_model(0.4, 8)], probe="zeroshot")
    result = run_cli("leaderboard", "--out", board, "--compare", "good@linear", "good@zeroshot")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("A = good@linear, B = good@zeroshot")
    (t1,) = [line for line in lines if line.startswith("t1 ")]
    assert t1.endswith("good@linear better"), result.stdout
    assert not any(line.startswith("t2 ") for line in lines)  # good has no zeroshot run on t2
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--compare", "good@knn", "weak"),
                          "model 'good' has no 'knn' runs", "its probes: linear, zeroshot")


def test_compare_errors_are_one_line(board):
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--compare", "good", "nobody"),
                          "unknown model 'nobody'", "close, good, weak")
    add_model(board, "shifted", "t1", [_model(0.9, 5)[:-1]], labels=LABELS[:-1])
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--compare", "good", "shifted"),
                          "share no test items on task 't1'", "150 vs 149")
    add_model(board, "old", "t1", [_model(0.9, 6)], save=False)
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--compare", "old", "good"),
                          "run old-t1-0 has no test predictions", "rerun it")
    add_model(board, "elsewhere", "t3", [_model(0.9, 7)])
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--compare", "elsewhere", "good"), "share no task")
    result = run_cli("leaderboard", "--out", board, "--compare", "good", "weak", "--split", "val")
    assert_one_line_error(result, "--compare")
    assert result.returncode == 2


def test_the_wide_table_marks_the_models_in_the_best_set(board):
    result = run_cli("leaderboard", "--out", board, "--task", "t1")
    assert result.returncode == 0, result.stderr
    assert "* in the column's 95 % model confidence set" in result.stdout
    rows = {line.split()[0]: line for line in result.stdout.splitlines()
            if line.split()[0] in {"good", "close", "weak"}}
    assert rows["close"].endswith("*") and rows["good"].endswith("*") and rows["weak"].endswith("]")
    assert "#3 (3-3)]" in rows["weak"]
    written = pd.read_csv(board / "leaderboard_wide.csv").set_index("model")
    assert written.loc["weak", "t1_rank_low"] == 3 and written.loc["weak", "t1_rank_high"] == 3
    assert written.loc["good", "t1_rank_low"] == 1 and written.loc["close", "t1_rank_low"] <= 2
    assert list(written["t1_in_best_set"]) == [1, 1, 0] and written.loc["weak", "t1_best_set_p"] < 0.05
    assert (written["t1_ci_low"] < written["t1"]).all() and (written["t1"] < written["t1_ci_high"]).all()


def test_a_task_with_a_run_lacking_predictions_is_marked_untested_with_a_note(board):
    add_model(board, "old", "t2", [_model(0.9, 6)], headline="accuracy", save=False)
    result = run_cli("leaderboard", "--out", board, "--format", "csv")
    assert result.returncode == 0, result.stderr
    written = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    assert written["t2_rank_low"].isna().all() and written["t1_rank_low"].notna().sum() == 3
    assert written["t2_in_best_set"].isna().all() and written["t1_in_best_set"].notna().sum() == 3
    assert "note: t2 not tested (marked ?): a run has no stored test predictions" in result.stderr
    # The untested column's cells carry "?", never the "outside the set" reading of no mark.
    text = run_cli("leaderboard", "--out", board, "--task", "t2")
    assert all(line.endswith("?") for line in text.stdout.splitlines() if line.split()[0] in {"good", "weak", "old"})


def test_metric_throughput_reads_the_runs_column_and_ranks_higher_first(board):
    result = run_cli("leaderboard", "--out", board, "--metric", "throughput_img_s", "--format", "csv")
    assert result.returncode == 0, result.stderr
    written = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    # good has two seeds' runs on t1 (100 and 101 img/s): their mean.
    assert written.loc["good", "t1"] == pytest.approx(100.5) and written.loc["close", "t1"] == 300
    assert list(written["t1_rank"].sort_values().index) == ["close", "weak", "good"]
    assert (written["t1_metric"] == "throughput_img_s").all()
    assert_one_line_error(run_cli("leaderboard", "--out", board, "--metric", "throughput_img_s", "--compare",
                                  "good", "weak"), "throughput_img_s on task 't1' is measured per run")


def test_a_metric_not_made_of_class_probabilities_gets_no_rank_intervals_and_cannot_be_compared(board):
    for model, value in (("good", 0.9), ("weak", 0.8)):  # e.g. a robustness score, one number per run
        append_rows(board / LEADERBOARD_FILE, [{
            "run_id": f"{model}-t1-0", "timestamp_utc": T1, "task": "t1", "model": model, "probe": "linear",
            "split": split, "metric": "cosine_jpeg", "value": value, "seed": 0, "headline_metric": "balanced_accuracy"}
            for split in ("val", "test")])
    result = run_cli("leaderboard", "--out", board, "--metric", "cosine_jpeg", "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert pd.read_csv(io.StringIO(result.stdout))["t1_rank_low"].isna().all()
    compared = run_cli("leaderboard", "--out", board, "--metric", "cosine_jpeg", "--compare", "good", "weak")
    assert_one_line_error(compared, "cosine_jpeg on task 't1' is not computed from per-item predictions")


def test_metric_throughput_on_an_older_csv_is_a_clear_error(tmp_path):
    old = tmp_path / LEADERBOARD_FILE
    old.write_text("schema,run_id,timestamp_utc,task,model,probe,split,metric,value,seed,headline_metric\n"
                   f"4,r1,{T1},t1,m,linear,test,accuracy,0.5,0,accuracy\n")
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path, "--metric", "throughput_img_s"),
                          "no throughput_img_s column", "rerun")
    add_model(tmp_path, "new", "t1", [_model(0.9, 1)], headline="accuracy")  # widens the header, value empty
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path, "--metric", "forward_img_s"),
                          "no run", "forward_img_s value")


INDEPENDENT = ("intervals and paired tests treat the 150 test tiles as independent items (no patient or slide ids "
               "known); items of one slide are correlated, so they may be too narrow")


def test_without_clusters_compare_and_rank_intervals_say_they_assume_independent_items(board):
    compared = run_cli("leaderboard", "--out", board, "--compare", "good", "weak")
    assert compared.returncode == 0, compared.stderr
    # t2 is exact McNemar, t1 a bootstrap over single items: both treat the 150 items as independent.
    assert [line for line in compared.stderr.splitlines() if "independent" in line] == [
        f"note: t1: {INDEPENDENT}", f"note: t2: {INDEPENDENT}"]
    table = run_cli("leaderboard", "--out", board)
    assert table.returncode == 0, table.stderr
    assert ("note: intervals, rank intervals and best sets of t1, t2 treat the test items as independent (no patient "
            "or slide ids known)") in table.stderr


def test_with_clusters_there_is_no_independence_note(tmp_path):
    slides = [f"slide{i // 10}" for i in range(ITEMS)]  # 15 clusters of 10 items
    add_model(tmp_path, "good", "t1", [_model(0.95, 1)], headline="accuracy", clusters=slides)
    add_model(tmp_path, "weak", "t1", [_model(0.4, 3)], headline="accuracy", clusters=slides)
    compared = run_cli("leaderboard", "--out", tmp_path, "--compare", "good", "weak")
    assert compared.returncode == 0, compared.stderr
    row = next(line for line in compared.stdout.splitlines() if line.startswith("t1 "))
    assert row.split()[2:4] == ["150", "15"] and " bootstrap " in row
    table = run_cli("leaderboard", "--out", tmp_path)
    assert "independent" not in compared.stderr + table.stderr and "#1 (1-1)" in table.stdout
