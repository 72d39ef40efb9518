"""Issue 49 items 4, 5 and 9: like with like.

4. A leaderboard, a report and a `--compare` show what precision each cell's backbone computed in, and where models
   of different precisions are compared they say so in one line naming the models and their precisions.
5. The overall ranking counts only columns with two or more models (a lone model's #1 ranked nothing and gave it a
   mean rank of 1.00), and says which columns it used; no mean of scores mixes two kinds of task.
9. Each model's random-init floor is its own random-init network's, per task, and the plot draws it on that
   model's row, not one random-init model's line for every row.

Leaderboards are built in a temp folder with test_compare's helpers (scores from stored probabilities)."""

import csv
import io
import json
import re

import pandas as pd
import pytest
from test_compare import _model, add_model, build_board

from evalsuite.reporting.page.data import collect
from evalsuite.reporting.page.html import html_report
from evalsuite.reporting.page.text import markdown_report
from evalsuite.results.leaderboard import LEADERBOARD_FILE


def set_precisions(out, precisions: dict) -> None:
    """Rewrite the leaderboard with each listed model's rows in that precision (the `precision` column)."""
    path = out / LEADERBOARD_FILE
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    for row in rows:
        row["precision"] = precisions.get(row["model"], row["precision"])
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _notes(result) -> list:
    return [line for line in result.stderr.splitlines() if line.startswith("note: ")]


# ---- 4. precision shown, and a mix said in one line

@pytest.fixture
def mixed(tmp_path):
    """test_compare's board (good, close, weak on t1; good, weak on t2): good ran in fp32 (a registry pin), close and
    weak in bf16, as `--precision auto` gives EfficientNet-Lite0 beside ResNet-18."""
    build_board(tmp_path)
    set_precisions(tmp_path, {"good": "fp32", "close": "bf16", "weak": "bf16"})
    return tmp_path


def test_a_mixed_precision_compare_names_the_models_and_their_precisions_in_one_line(mixed, cli_in_process):
    result = cli_in_process("leaderboard", "--out", mixed, "--compare", "good", "weak")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("A = good (fp32), B = weak (bf16): test split")
    lines = [line for line in _notes(result) if "precision" in line]
    assert len(lines) == 1, result.stderr
    assert "different precisions" in lines[0] and "t1, t2: good fp32, weak bf16" in lines[0]
    assert "0.078" in lines[0] and "--precision" in lines[0]
    same = cli_in_process("leaderboard", "--out", mixed, "--compare", "close", "weak", "--task", "t1")
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith("A = close (bf16), B = weak (bf16)")
    assert not [line for line in _notes(same) if "precision" in line]  # both bf16: nothing to say


def test_the_leaderboard_shows_each_cells_precision_and_one_note_for_the_mix(mixed, cli_in_process):
    table = cli_in_process("leaderboard", "--out", mixed)
    assert table.returncode == 0, table.stderr
    assert "precision (the backbone's forward): good fp32; weak bf16; close bf16" in table.stdout
    (note,) = [line for line in _notes(table) if "precision" in line]
    assert "t1: close bf16, good fp32, weak bf16" in note and "t2: good fp32, weak bf16" in note
    wide = pd.read_csv(io.StringIO(cli_in_process("leaderboard", "--out", mixed, "--format", "csv").stdout))
    assert dict(zip(wide["model"], wide["t1_precision"])) == {"good": "fp32", "close": "bf16", "weak": "bf16"}
    assert wide.set_index("model").loc["close", "t2_precision"] != wide.set_index("model").loc["close", "t2_precision"]
    markdown = cli_in_process("leaderboard", "--out", mixed, "--format", "markdown").stdout
    assert "_precision (the backbone's forward): good fp32; weak bf16; close bf16_" in markdown


def test_one_precision_everywhere_is_one_legend_line_and_no_note(tmp_path, cli_in_process):
    build_board(tmp_path)
    set_precisions(tmp_path, {"good": "fp32", "close": "fp32", "weak": "fp32"})
    table = cli_in_process("leaderboard", "--out", tmp_path)
    assert "precision (the backbone's forward): fp32 in every cell" in table.stdout
    assert not [line for line in _notes(table) if "precision" in line]


def test_the_report_shows_each_cells_precision_and_notes_the_mix(mixed):
    report = collect(mixed)
    assert report.cells[("good", "t1")].precision == "fp32" and report.cells[("weak", "t2")].precision == "bf16"
    assert sum("different precisions" in note for note in report.notes) == 1
    page = html_report(report)
    good = re.search(r'data-model="good" data-task="t1"[^>]*>(.*?)</td>', page).group(1)
    assert "<small>linear · fp32</small>" in good
    assert "precision (the backbone's forward): good fp32; weak bf16; close bf16." in markdown_report(report)


# ---- 5. the overall ranking counts columns with two or more models; means stay within one kind of task

@pytest.fixture
def lone(tmp_path):
    """good beats weak on t1, weak beats good on t2; good alone on t3. Before issue 49, weak (missing t3) was left
    out and good ranked 1.00: #1 on t3 with no one to beat. Counting t1 and t2 only, both have mean rank 1.5."""
    strong, poor = _model(0.95, 1), _model(0.5, 3)
    add_model(tmp_path, "good", "t1", [strong])
    add_model(tmp_path, "weak", "t1", [poor])
    add_model(tmp_path, "good", "t2", [poor])
    add_model(tmp_path, "weak", "t2", [strong])
    add_model(tmp_path, "good", "t3", [strong])
    return tmp_path


def test_a_column_with_one_model_does_not_enter_the_rank_sum_or_mean_rank(lone, cli_in_process):
    result = cli_in_process("leaderboard", "--out", lone, "--format", "csv")
    assert result.returncode == 0, result.stderr
    wide = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    assert wide.loc["good", "rank_sum"] == wide.loc["weak", "rank_sum"] == 3.0
    assert wide.loc["good", "mean_rank"] == wide.loc["weak", "mean_rank"] == 1.5
    assert list(wide["ranked_tasks"]) == ["t1;t2", "t1;t2"] and wide.loc["good", "t3_rank"] == 1.0
    # Its interval runs over t1 and t2, both with draws: the lone t3 no longer blocks it.
    assert wide["mean_rank_low"].notna().all() and wide["mean_rank_high"].notna().all()
    assert not [line for line in _notes(result) if "mean rank" in line]
    text = cli_in_process("leaderboard", "--out", lone).stdout
    assert "mean_rank: mean of the model's ranks (1 = best) over t1, t2, the columns with two or more models " \
           "(t3 left out" in text


def test_the_reports_overall_ranking_counts_only_columns_with_two_models(lone):
    report = collect(lone)
    assert report.ranked_tasks == ["t1", "t2"]
    assert {model: rank for model, rank, _ in report.overall} == {"good": 1.5, "weak": 1.5}
    assert all(interval is not None for _, _, interval in report.overall)
    page = html_report(report)
    overall = page.split('id="overall"')[1].split("</table>")[0]
    assert sorted(re.findall(r"<tr><td>([^<]*)</td><td>1.50</td>", overall)) == ["good", "weak"]
    assert "over t1, t2, the columns with two or more models (t3 left out" in page
    assert "Overall (mean rank over t1, t2, the columns with two or more models (t3 left out" in \
        markdown_report(report)


def _slide_card(folder):
    """A copy of the shipped demo_slide card under another name, at a path only a run JSON names."""
    from evalsuite.tasks.cards import find_card

    text = find_card("demo_slide").read_text()
    path = folder / "my_slides.yaml"
    path.write_text(re.sub(r"(?m)^name:.*$", "name: my_slides", text))
    return path


def test_no_mean_of_scores_runs_over_two_kinds_of_task(tmp_path, cli_in_process):
    """demo (tiles) and demo_slide, my_slides (slides) all show balanced accuracy: the slides get a mean of their
    own, the tile task none (one task of its kind), and no column averages a tile and a slide task."""
    card = _slide_card(tmp_path)
    models = {"A": (_model(0.9, 1), _model(0.6, 2)), "B": (_model(0.7, 3), _model(0.8, 4))}
    for model, (first, second) in models.items():
        for task, proba in (("demo", first), ("demo_slide", second), ("my_slides", first)):
            add_model(tmp_path, model, task, [proba])
        runs = tmp_path / "runs"
        (runs / f"{model}-my_slides-0.json").write_text(json.dumps({"task": {"name": "my_slides", "path": str(card)}}))
    wide = pd.read_csv(io.StringIO(cli_in_process("leaderboard", "--out", tmp_path, "--format", "csv").stdout))
    means = [name for name in wide.columns if name.startswith("mean_") and not name.startswith("mean_rank")]
    assert means == ["mean_balanced_accuracy_over_2_slide_tasks"]
    wide = wide.set_index("model")
    for model in models:
        expected = (wide.loc[model, "demo_slide"] + wide.loc[model, "my_slides"]) / 2
        assert wide.loc[model, "mean_balanced_accuracy_over_2_slide_tasks"] == pytest.approx(expected, abs=1e-6)


# ---- 9. each model's own random-init floor

@pytest.fixture
def two_floors(tmp_path):
    """resnet and effnet, each with its own random-init network on t1 and t2; effnet's random init (0.45) scores
    above resnet's (0.3), so the floor before issue 49 (the best random-init model of the column) was effnet's for
    both. `vit-random`, a sweep's random-init model, is vit-ft's floor by architecture (their run JSONs); `stray`
    is a random-init network of no shown model."""
    for task in ("t1", "t2"):
        add_model(tmp_path, "resnet", task, [_model(0.8, 1)])
        add_model(tmp_path, "resnet+random-init", task, [_model(0.3, 2)], weights_id="random-init:seed0")
        add_model(tmp_path, "effnet", task, [_model(0.9, 3)])
        add_model(tmp_path, "effnet+random-init", task, [_model(0.45, 4)], weights_id="random-init:seed0")
        add_model(tmp_path, "vit-ft", task, [_model(0.85, 5)], weights_id="sha256:ft")
        add_model(tmp_path, "vit-random", task, [_model(0.35, 6)], weights_id="random-init:seed0")
        add_model(tmp_path, "stray", task, [_model(0.4, 7)], weights_id="random-init:seed0")
        for model, architecture in (("vit-ft", "vit_base_patch16_224"), ("vit-random", "vit_base_patch16_224"),
                                    ("stray", "resnet50")):
            (tmp_path / "runs" / f"{model}-{task}-0.json").write_text(json.dumps(
                {"model": {"architecture_name": architecture}, "config": {"model": architecture}}))
    return tmp_path


def test_each_models_floor_is_its_own_random_init(two_floors):
    report = collect(two_floors)
    means = {key: cell.mean for key, cell in report.cells.items()}
    for task in ("t1", "t2"):
        assert report.floors[("resnet", task)] == ("resnet+random-init", means[("resnet+random-init", task)])
        assert report.floors[("effnet", task)] == ("effnet+random-init", means[("effnet+random-init", task)])
        assert report.floors[("vit-ft", task)] == ("vit-random", means[("vit-random", task)])
    assert {model for model, _ in report.floors} == {"resnet", "effnet", "vit-ft"}  # random-init rows have none
    assert report.random_init == {"resnet+random-init": ["resnet"], "effnet+random-init": ["effnet"],
                                  "vit-random": ["vit-ft"], "stray": []}


def test_each_floor_is_labelled_once_on_its_own_row(two_floors):
    report = collect(two_floors)
    rows = {line.split(" | ")[0]: line for line in markdown_report(report).splitlines() if line.startswith("| ")}
    assert "| resnet+random-init *(random-init floor)*" in rows
    assert "| effnet+random-init *(random-init floor)*" in rows
    assert "| vit-random *(random-init floor of vit-ft)*" in rows
    assert "| stray *(random-init (no model of its own here))*" in rows
    assert sum("floor" in line for line in rows) == 3
    overview = html_report(report).split('id="overview"')[1].split("</table>")[0]
    assert overview.count('data-floor="1"') == 3 and overview.count("random-init floor") == 3


def test_the_floor_line_of_a_tasks_plot_is_drawn_on_each_models_own_row(two_floors):
    report = collect(two_floors)
    section = html_report(report).split('id="task-t1"')[1].split("</section>")[0]
    floors = re.findall(r'<line class="floor" x1="([\d.]+)" y1="([\d.]+)"[^>]*><title>([^<]*)</title>', section)
    titles = [title for _, _, title in floors]
    mean = {model: report.cells[(model, "t1")].mean for model in report.models}
    assert sorted(titles) == sorted([f"effnet: random-init floor effnet+random-init {mean['effnet+random-init']:.4f}",
                                     f"resnet: random-init floor resnet+random-init {mean['resnet+random-init']:.4f}",
                                     f"vit-ft: random-init floor vit-random {mean['vit-random']:.4f}"])
    # Each tick lies on its model's row (the row's label and dot share its y), at its own floor's x.
    positions = {title.split(":")[0]: (float(x), float(y)) for x, y, title in floors}
    assert positions["resnet"][0] < positions["effnet"][0]  # resnet's own floor is below effnet's
    for model, (_, y) in positions.items():
        dot = re.search(rf'<circle class="dot" cx="[\d.]+" cy="([\d.]+)" r="4"><title>{re.escape(model)}: ', section)
        assert abs(float(dot.group(1)) - y) < 18 / 2
    assert "dashed tick on a row: that model's own random-init floor" in section
