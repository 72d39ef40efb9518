"""Issue 41: a model's cost on the report is its backbone's FLOPs per image, not a rate that moves with the host's
load. Two runs of one architecture (test_vit, random-init, under two labels) get very different measured rates
injected, as a loaded host gives them; the page shows them equal cost, and shows the rates apart, beside the device
and the host load they were measured under."""

import csv
import html
import json
import re

import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow
RATES = {"vit_a": ("4.600000", "5.000000", "0.200000"), "vit_b": ("8.100000", "9.000000", "0.100000")}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("cost_out")
    for label in RATES:  # the second run reads the first one's cache
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                         "--probes", "linear", "--label", label, "--out", out)
        assert result.returncode == 0, result.stderr
    return out


def _inject_rates(out) -> None:
    path = out / "leaderboard.csv"
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    for row in rows:
        row["throughput_img_s"], row["forward_img_s"], row["device_hours_est"] = RATES[row["model"]]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _runs(out) -> dict:
    records = [json.loads(path.read_text()) for path in (out / "runs").glob("*.json")]
    return {record["model"]["name"]: record for record in records}


def test_each_run_records_its_flops_parameters_and_the_load_its_rates_were_measured_under(out):
    runs = _runs(out)
    cost = runs["vit_a"]["cost"]
    assert cost == runs["vit_b"]["cost"] and cost["gflops_per_image"] > 0 and cost["params"] > 0
    assert cost["input_size_px"] == list(runs["vit_a"]["model"]["data_config"]["resize"])
    measured = runs["vit_a"]["throughput"]
    assert measured["device_name"] and measured["host_load_1m"] >= 0 and measured["device_hours_est"] > 0
    assert "gpu_hours_est" not in measured
    with open(out / "leaderboard.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {float(row["gflops_per_image"]) for row in rows} == {cost["gflops_per_image"]}
    shown = run_cli("show", runs["vit_a"]["run_id"], "--out", out).stdout
    assert f"{cost['params']:,} parameters" in shown and "host load" in shown


def test_one_architecture_shows_one_cost_whatever_its_measured_rates(out):
    _inject_rates(out)
    result = run_cli("report", "--out", out)
    assert result.returncode == 0, result.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    cost = page.split('id="cost"')[1].split("</table>")[0]
    figures = {model: re.search(rf"<td>{model}</td>((?:<td>[^<]*</td>)+)</tr>", cost).group(1) for model in RATES}
    assert figures["vit_a"] == figures["vit_b"] and "–" not in figures["vit_a"]
    measured = html.unescape(page.split('id="measured"')[1].split("</table>")[0])
    assert "<td>4.6</td><td>5</td><td>0.2</td>" in measured and "<td>8.1</td><td>9</td><td>0.1</td>" in measured
    points = re.findall(r"<circle class=\"dot\"[^>]*><title>(vit_\w): ([\d.]+) GFLOPs, ", page)
    assert len(points) == 2 and points[0][1] == points[1][1]  # the same x: neither is cheaper
