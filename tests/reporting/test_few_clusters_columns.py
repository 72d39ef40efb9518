"""What `leaderboard`, `leaderboard --compare` and `report` say about a column with few clusters (issue 47): how many
clusters each column rests on, and "not tested" with its reason, never a confident mark, below few_clusters'
MIN_CLUSTERS. Leaderboards built in a temp folder with test_compare's helpers (scores from stored probabilities)."""

import io

import numpy as np
import pandas as pd
from conftest import run_cli
from test_compare import ITEMS, _model, add_model

PATIENTS_3 = np.arange(ITEMS) % 3  # 150 test items of 3 patients
PATIENTS_30 = np.arange(ITEMS) % 30


def _board(out):
    """good (~95 % right) and weak (~40 %) on `few` (3 patients) and `many` (30 patients)."""
    for task, patients in (("few", PATIENTS_3), ("many", PATIENTS_30)):
        add_model(out, "good", task, [_model(0.95, 1)], clusters=patients, unit="patient")
        add_model(out, "weak", task, [_model(0.4, 3)], clusters=patients, unit="patient")
    return out


def test_a_three_patient_column_is_not_tested_and_every_column_says_its_cluster_count(tmp_path):
    out = _board(tmp_path)
    result = run_cli("leaderboard", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "clusters the intervals, ranks and marks rest on: few 3 patients, many 30 patients" in result.stdout
    assert ("note: few not tested (marked ?): its test split has 3 patients, fewer than the 4 an interval or best-set "
            "mark needs") in result.stderr
    wide = pd.read_csv(io.StringIO(run_cli("leaderboard", "--out", out, "--format", "csv").stdout)).set_index("model")
    # A 0.55 gap on 30 patients is marked; on 3 nothing is, not even the interval of a run's own mean.
    assert wide.loc["good", "many_in_best_set"] == 1 and wide.loc["weak", "many_in_best_set"] == 0
    assert wide["few_in_best_set"].isna().all() and wide["few_ci_low"].isna().all()
    assert wide["few_rank_low"].isna().all() and wide["many_ci_low"].notna().all()
    assert wide["few_clusters"].tolist() == [3, 3] and wide["many_clusters"].tolist() == [30, 30]


def test_compare_says_why_a_three_patient_task_is_not_tested(tmp_path):
    out = _board(tmp_path)
    result = run_cli("leaderboard", "--out", out, "--compare", "good", "weak")
    assert result.returncode == 0, result.stderr
    few = next(line for line in result.stdout.splitlines() if line.startswith("few "))
    many = next(line for line in result.stdout.splitlines() if line.startswith("many "))
    assert " 3 patient " in few and "not tested: its test split has 3 patients, fewer than the 4" in few
    assert " 30 patient " in many and many.rstrip().endswith("good better")


def test_the_report_names_each_columns_clusters(tmp_path):
    out = _board(tmp_path)
    result = run_cli("report", "--out", out, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("| model "))
    assert "few (balanced\\_accuracy, 3 patients)" in header and "many (balanced\\_accuracy, 30 patients)" in header
    page = run_cli("report", "--out", out)
    assert page.returncode == 0, page.stderr
    assert "balanced_accuracy · 3 patients" in (out / "report.html").read_text()
