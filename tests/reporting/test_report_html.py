"""The HTML report against a hand-made Report: one well-formed page without script or network request, each cell's
numbers and marks, the floor row, the Pareto front, escaping and the page size; and once through the real CLI."""

import dataclasses
import html
import math
import re
from html.parser import HTMLParser

import pytest
from conftest import run_cli

from evalsuite.reporting.page.data import Report, ReportCell
from evalsuite.reporting.page.html import html_report
from evalsuite.reporting.page.svg import nice_axis, pareto_front

ODD = '<b>&"x"'  # a model name that breaks a page that does not escape
CONTAINERS = {"html", "head", "body", "table", "thead", "tbody", "tr", "td", "th", "section", "svg", "details",
              "summary", "dl", "ul", "pre", "code", "div", "header"}
PROVENANCE = {"evalsuite": "0.1.0", "commit": "abc123", "torch": "2.5.0", "timm": "1.0.0", "device": "cpu",
              "precision": "fp32", "seeds": [0, 1, 2], "cache_keys": {"train": "k1", "test": "k2"},
              "card": "cards/t1.yaml", "card_sha256": "f" * 64, "date": "2026-01-01T00:00:00+00:00",
              "runs": ["run-a"], "command": "evalsuite run --task t1 --model A --seeds 0,1,2 --out out"}


def cell(model, task, mean, rank, gflops=None, **fields) -> ReportCell:
    cost = {"gflops_per_image": gflops, "params": gflops and gflops * 2e6, "throughput_img_s": 100.0,
            "forward_img_s": 250.0, "device_hours_est": 0.5, "device_name": "GPU X", "host_load_1m": 1.5}
    values = dict(metric="balanced_accuracy" if task == "t1" else "accuracy", std=0.01, seeds=(0, 1, 2),
                  probe="linear", rank_interval=None, interval=None,
                  extra={"ece": 0.05, "brier": 0.2, "f1_macro": mean - 0.01}, cost=cost if gflops else {})
    return ReportCell(model=model, task=task, mean=mean, rank=rank, **{**values, **fields})


def hand_made() -> Report:
    """t1: A 0.90 best, B 0.88 in the best set (MCS p 0.4), C 0.70 outside it (p 0.01), ODD 0.50 (the random-init
    floor). t2 untested (best_set None, a reason), no intervals, ODD missing. GFLOPs per image: A 1.0, B 0.5, C 0.8 and
    mean ranks A 1, B 2, C 3: B is cheaper and better than C, so the front is B then A."""
    t1 = [cell("A", "t1", 0.90, 1.0, 1.0, rank_interval=(1.0, 2.0), interval=(0.85, 0.95), best_set=True,
               best_set_p=1.0, provenance=PROVENANCE),
          cell("B", "t1", 0.88, 2.0, 0.5, rank_interval=(1.0, 2.0), interval=(0.83, 0.93), best_set=True,
               best_set_p=0.4),
          cell("C", "t1", 0.70, 3.0, 0.8, rank_interval=(3.0, 3.0), interval=(0.64, 0.76), best_set=False,
               best_set_p=0.01),
          cell(ODD, "t1", 0.50, 4.0, std=None, seeds=(0,), rank_interval=(4.0, 4.0), interval=(0.4, 0.6),
               best_set=False, best_set_p=0.001)]
    untested = "its test split is one patient: there is nothing to resample"
    t2 = [cell("A", "t2", 0.80, 1.0, 1.0, untested=untested), cell("B", "t2", 0.75, 2.0, 0.5, untested=untested),
          cell("C", "t2", 0.72, 3.0, 0.8, untested=untested)]
    return Report(source="out/leaderboard.csv", tasks=["t1", "t2"], metrics={"t1": "balanced_accuracy",
                                                                             "t2": "accuracy"},
                  models=["A", "B", "C", ODD], cells={(c.model, c.task): c for c in t1 + t2},
                  floors={("A", "t1"): (ODD, 0.50)}, random_init={ODD: ["A"]},
                  overall=[("A", 1.0, None), ("B", 2.0, None), ("C", 3.0, None)],
                  notes=["t2 untested: <no predictions> & so on"])


class Tags(HTMLParser):
    """Start tags with their attributes, and the container tags left open or closed out of order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.starts, self.stack, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, dict(attrs)))
        if tag in CONTAINERS:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in CONTAINERS:
            if not self.stack or self.stack[-1] != tag:
                self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            else:
                self.stack.pop()


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    return tags


def overview_cells(page: str) -> dict:
    """(model, task) -> (td classes, inner HTML) of the overview's present cells."""
    found = re.findall(r'<td class="(cell[^"]*)" data-model="([^"]*)" data-task="([^"]*)"[^>]*>(.*?)</td>', page)
    return {(html.unescape(model), task): (classes.split(), inner) for classes, model, task, inner in found}


@pytest.fixture(scope="module")
def page():
    return html_report(hand_made())


def test_the_page_is_well_formed_html_without_script_network_or_nan(page):
    tags = parse(page)
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert not tags.errors and not tags.stack, (tags.errors, tags.stack)
    assert "<script" not in page.lower()
    assert not re.search(r"\son\w+=", page)  # no event-handler attribute either
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\bnan\b", page, re.IGNORECASE)
    assert {tag for tag, _ in tags.starts} >= {"style", "table", "section", "svg", "details"}
    assert not any(tag in ("link", "img", "iframe", "object") for tag, _ in tags.starts)


def test_sections_come_in_order(page):
    marks = ['id="overview"', 'id="overall"', 'id="task-t1"', 'id="task-t2"', 'id="calibration"', 'id="cost"',
             "<summary>A × t1</summary>", "<h2>Notes</h2>"]
    positions = [page.index(mark) for mark in marks]
    assert positions == sorted(positions)
    assert re.search(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", page)
    assert "4 models × 2 tasks" in page and "out/leaderboard.csv" in page


def test_every_present_cell_carries_its_mean_to_six_decimals(page):
    report, attributes = hand_made(), [a for tag, a in parse(page).starts if tag == "td" and "data-mean" in a]
    assert {(a["data-model"], a["data-task"]) for a in attributes} == set(report.cells)
    for found in attributes:
        expected = report.cells[(found["data-model"], found["data-task"])]
        assert found["data-mean"] == f"{expected.mean:.6f}" and found["data-probe"] == expected.probe


def test_best_is_bold_the_best_set_is_marked_and_an_untested_column_has_its_own_mark(page):
    cells = overview_cells(page)
    best_classes, best = cells[("A", "t1")]
    assert "best" in best_classes and "<b>0.9000</b>" in best and "◆" in best
    assert "[0.8500, 0.9500]" in best and "#1 (1–2)" in best and "± 0.0100" in best
    assert "◆" in cells[("B", "t1")][1] and "MCS p = 0.400" in cells[("B", "t1")][1]
    assert "◆" not in cells[("C", "t1")][1] and "◆" not in cells[(ODD, "t1")][1]
    assert "?" not in cells[("C", "t1")][1]  # outside the set: no mark at all
    assert "±" not in cells[(ODD, "t1")][1]  # one seed: no spread
    for (_, task), (_, inner) in cells.items():
        if task == "t2":  # untested: its own mark naming why, never the "outside the set" reading of no mark
            assert "◆" not in inner and 'class="untested"' in inner and "nothing to resample" in inner
    assert "best" in cells[("A", "t2")][0] and "[" not in cells[("B", "t2")][1]  # no interval set
    assert sum("best" in classes for classes, _ in cells.values()) == 2


def test_a_missing_cell_is_a_dash_and_the_floor_is_marked_on_its_models_row(page):
    """ODD is A's random-init floor on t1 (issue 49: each model's own), labelled once, on ODD's own row."""
    odd_row = re.search(r'<th scope="row" data-floor="1">' + re.escape(html.escape(ODD)) +
                        r'<br><span class="sub">random-init floor of A \(t1\)</span></th>(.*?)</tr>', page).group(1)
    assert odd_row.endswith('<td class="missing">–</td>')
    assert "random-init floor</th>" not in page  # no second row repeating the floor model's numbers
    no_floors = html_report(dataclasses.replace(hand_made(), floors={}, random_init={}))
    assert 'class="floor"' not in no_floors.split('id="overall"')[0]


def test_overall_ranking_names_the_models_left_out(page):
    overall = page.split('id="overall"')[1].split("</table>")[0]
    assert [html.unescape(m) for m in re.findall(r"<tr><td>([^<]*)</td>", overall)] == ["A", "B", "C"]
    assert "Left out (missing a task): " + html.escape(ODD) + "." in page


def test_calibration_cost_and_provenance_tables(page):
    calibration = page.split('id="calibration"')[1].split("</table>")[0]
    assert calibration.count("<tr>") == 1 + 7 and "0.0500" in calibration and "0.2000" in calibration
    cost = page.split('id="cost"')[1].split("</table>")[0]
    assert re.search(re.escape(html.escape(ODD)) + r"</td>(.*?)</tr>", cost).group(1) == "<td>–</td>" * 2  # none
    assert "<td>A</td><td>1</td><td>2.000</td>" in cost and "<td>B</td><td>0.5</td><td>1.000</td>" in cost
    measured = page.split('id="measured"')[1].split("</table>")[0]
    assert re.search(re.escape(html.escape(ODD)) + r"</td><td>t1</td>(.*?)</tr>", measured).group(1) == "<td>–</td>" * 5
    assert "<td>100</td><td>250</td><td>0.5</td><td>GPU X</td><td>1.5</td>" in measured
    assert "<dt>card sha256</dt><dd>" + "f" * 64 in page and "<dt>cache keys</dt><dd>train: k1, test: k2</dd>" in page
    assert "<pre><code>evalsuite run --task t1 --model A --seeds 0,1,2 --out out</code></pre>" in page
    assert page.count("<details>") == 7
    assert "<li>t2 untested: &lt;no predictions&gt; &amp; so on</li>" in page


def test_the_pareto_front_lists_the_models_no_other_dominates(page):
    sentence = re.search(r'<p id="pareto">.*?strictly\): (.*?)\.</p>', page).group(1)
    assert sentence == "B, A"  # C costs more than B and scores less; ODD lacks t2
    assert "<polyline" in page
    assert pareto_front([("x", 1, 0.5), ("y", 1, 0.6), ("z", 2, 0.6)]) == ["y"]  # equal cost, lower score: dominated
    assert pareto_front([("x", 1, 0.5), ("y", 2, 0.4)], higher_better=False) == ["x", "y"]


def test_fewer_than_two_costed_models_give_a_sentence_not_a_plot():
    report = hand_made()
    report.cells = {key: dataclasses.replace(c, cost={}) if c.model != "A" else c for key, c in report.cells.items()}
    page = html_report(report)
    assert "fewer than 2 models have every task and a FLOP count" in page and "<polyline" not in page


def test_a_model_name_with_markup_is_escaped_everywhere(page):
    assert ODD not in page and html.escape(ODD) in page
    models = {a["data-model"] for tag, a in parse(page).starts if tag == "td" and "data-model" in a}
    assert ODD in models  # the attribute parses back to the name


def test_missing_and_non_finite_numbers_print_as_a_dash():
    report = hand_made()
    nan = float("nan")
    report.cells[("C", "t1")] = dataclasses.replace(report.cells[("C", "t1")], mean=nan, std=nan, interval=(nan, nan),
                                                    extra={"ece": nan}, best_set_p=nan, best_set=True)
    report.floors = {("A", "t1"): (ODD, math.inf)}
    page = html_report(report)
    assert not re.search(r"\b(nan|inf)\b", page, re.IGNORECASE)
    assert 'data-model="C" data-task="t1" data-probe="linear" data-mean="–"' in page
    assert not parse(page).errors


def test_nice_axis_ticks_are_round_numbers():
    start, stop, ticks = nice_axis(0.52, 0.91)
    assert (start, stop) == pytest.approx((0.5, 1.0)) and ticks == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    start, stop, ticks = nice_axis(3.0, 3.0)
    assert start <= 3.0 <= stop and len(ticks) >= 2


def test_a_30_model_20_task_page_stays_small():
    models, tasks = [f"model_{i:02d}_with_a_long_name" for i in range(30)], [f"task_{j:02d}" for j in range(20)]
    cells = {(m, t): cell(m, t, 0.5 + i / 100 + j / 1000, float(i + 1), 0.1 + i, rank_interval=(i + 1.0, i + 3.0),
                          interval=(0.4, 0.7), best_set=i < 3, best_set_p=0.5, provenance=PROVENANCE)
             for i, m in enumerate(models) for j, t in enumerate(tasks)}
    report = Report(source="out/leaderboard.csv", tasks=tasks, metrics=dict.fromkeys(tasks, "balanced_accuracy"),
                    models=models, cells=cells, floors={(models[0], t): (models[-1], 0.5) for t in tasks},
                    random_init={models[-1]: [models[0]]},
                    overall=[(m, i + 1.0, (i + 1.0, i + 3.0)) for i, m in enumerate(models)])
    page = html_report(report)
    assert len(page.encode()) < 5_000_000
    assert not parse(page).errors


@pytest.mark.slow
def test_the_cli_writes_a_report_of_two_real_models(tmp_path):
    out = tmp_path / "out"
    for pooling in ("cls", "mean_patch"):
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                         "--seeds", "0,1", "--probes", "linear", "--pooling", pooling, "--out", out, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    result = run_cli("report", "--out", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    models = {a["data-model"] for tag, a in parse(page).starts if tag == "td" and "data-mean" in a}
    assert models == {"test_vit+random-init+pooling=cls", "test_vit+random-init+pooling=mean_patch"}
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert not re.search(r"\bnan\b", page, re.IGNORECASE) and not parse(page).errors
    # Two random-init models and no pretrained one: neither is a floor of a model shown (issue 49).
    assert "random-init (no model of its own here)" in page and 'id="calibration"' in page and "<summary>" in page
