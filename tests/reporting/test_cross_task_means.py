"""Issue 41: no figure over tasks averages two different headline metrics. A leaderboard with two classification
tasks (balanced accuracy) and a regression task (Pearson r): the wide CSV, the text and Markdown tables, the report
page and its Pareto plot give the mean rank over all tasks and a mean of scores only over the tasks of one metric,
in a column named for it; the mean of all three cells appears nowhere."""

import io
import re
import statistics

import pandas as pd
import pytest
from conftest import run_cli

from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows

T1 = "2026-01-02T00:00:00+00:00"
# model -> (cls_a, cls_b balanced accuracy, reg Pearson r); GFLOPs per image for the cost plot
SCORES = {"A": (0.8123, 0.7345, 0.2222), "B": (0.7011, 0.6876, 0.5431), "C": (0.6543, 0.7777, 0.1059)}
GFLOPS = {"A": 4.0, "B": 1.0, "C": 2.0}
TASKS = (("cls_a", "balanced_accuracy"), ("cls_b", "balanced_accuracy"), ("reg", "pearson"))


@pytest.fixture
def out(tmp_path):
    for model, scores in SCORES.items():
        for (task, headline), value in zip(TASKS, scores):
            append_rows(tmp_path / LEADERBOARD_FILE, [
                {"run_id": f"{model}-{task}", "timestamp_utc": T1, "task": task, "model": model, "weights_id": "w",
                 "probe": "linear", "selected_params": "{}", "split": split, "metric": headline,
                 "value": f"{value:.6f}", "seed": 0, "n_samples": 50, "headline_metric": headline,
                 "gflops_per_image": GFLOPS[model], "params": 1000}
                for split in ("val", "test")])
    return tmp_path


def _mixed_means() -> set:
    """Each model's mean of the three cells (two metrics mixed), as the tables and the page would print it."""
    means = [statistics.fmean(scores) for scores in SCORES.values()]
    return {f"{mean:{spec}}" for mean in means for spec in (".6f", ".4f", ".3f")}


def _mean_ranks() -> dict:
    ranks = {model: 0.0 for model in SCORES}
    for column in range(len(TASKS)):
        for place, model in enumerate(sorted(SCORES, key=lambda m: -SCORES[m][column]), 1):
            ranks[model] += place / len(TASKS)
    return ranks


def test_the_wide_csv_names_each_mean_for_its_metric_and_never_mixes_two(out):
    result = run_cli("leaderboard", "--out", out, "--format", "csv")
    assert result.returncode == 0, result.stderr
    wide = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    means = [name for name in wide.columns if name.startswith("mean_") and not name.startswith("mean_rank")]
    assert means == ["mean_balanced_accuracy_over_2_tasks"] and "mean_over_tasks" not in wide.columns
    for model, (cls_a, cls_b, _) in SCORES.items():
        assert wide.loc[model, "mean_balanced_accuracy_over_2_tasks"] == pytest.approx((cls_a + cls_b) / 2)
        assert wide.loc[model, "mean_rank"] == pytest.approx(_mean_ranks()[model])
    assert not _mixed_means() & set(re.findall(r"\d+\.\d+", result.stdout))


@pytest.mark.parametrize("form", [[], ["--format", "markdown"]])
def test_the_printed_tables_show_the_mean_rank_and_per_metric_means_only(out, form):
    result = run_cli("leaderboard", "--out", out, *form)
    assert result.returncode == 0, result.stderr
    assert "mean_rank" in result.stdout and "mean_balanced_accuracy_over_2_tasks" in result.stdout
    assert "mean_over_tasks" not in result.stdout
    assert not _mixed_means() & set(re.findall(r"\d+\.\d+", result.stdout))


def test_the_report_and_its_pareto_plot_rank_models_without_mixing_metrics(out):
    result = run_cli("report", "--out", out)
    assert result.returncode == 0, result.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "mean rank over 3 tasks (1 = best)" in page and "mean headline" not in page
    # Each point: the model's GFLOPs per image and its mean rank.
    points = dict((name, (float(x), float(y))) for name, x, y in
                  re.findall(r"<circle class=\"dot\"[^>]*><title>(\w+): ([\d.]+) GFLOPs, ([\d.]+)</title>", page))
    assert points == {m: (GFLOPS[m], pytest.approx(_mean_ranks()[m], abs=1e-3)) for m in SCORES}
    assert not _mixed_means() & set(re.findall(r"\d+\.\d+", page))
    markdown = run_cli("report", "--out", out, "--format", "markdown").stdout
    assert not _mixed_means() & set(re.findall(r"\d+\.\d+", markdown))
