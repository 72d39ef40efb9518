"""`evalsuite report`'s HTML page as a browser shows it: real runs, the real command, headless Chromium.

One output folder is built once for the module: the demo, demo_seg and demo_slide tasks, each with
efficientnet_lite0_imagenet pretrained and with --random-init, seeds 0 and 1, one cheap probe per task (linear; a
3-epoch copy of seg_linear; meanpool). `evalsuite report --out OUT` writes OUT/report.html, which Chromium loads from
its file:// URL (tests/e2e/browser.py drives it over the DevTools protocol). The page must be self-contained: no
request beyond its own file (data: and about: URLs aside), no console error, no uncaught exception. Its overview
cells (`<table id="overview">`, `<td class="cell" data-model data-task data-probe data-mean>`) must be the leaderboard's
numbers: the mean over seeds of the task's headline metric on test for the probe shown, and every (model, task) with
test rows must have one. The full-page screenshot is kept in the test's tmp folder, and copied to
docs/img/report_overview.png when EVALSUITE_SAVE_SCREENSHOT is set; it must not be blank.

Chromium: Debian's `chromium` (or `chromium-browser`) on PATH. Without it the module is skipped, unless
EVALSUITE_REQUIRE_BROWSER=1 (CI installs it and sets that), where it fails.
"""

import io
import json
import os
import shutil
import statistics
from collections import defaultdict

import numpy as np
import pytest
import yaml
from browser import Browser, find_chromium
from conftest import REPO, leaderboard_rows, run_cli
from PIL import Image

MODEL = "efficientnet_lite0_imagenet"
SEEDS = (0, 1)
SEG_PROBE = "seg_linear_3ep"  # probes/seg_linear.yaml with 3 epochs instead of 30: enough to score, cheap to fit
RUN_TIMEOUT_S = 1800  # one run on a busy 2-core host; idle it is well under a minute
SCREENSHOT_COPY = REPO / "docs" / "img" / "report_overview.png"

# CI sets EVALSUITE_REQUIRE_BROWSER=1 after installing Chromium: there a missing browser is a failure, not a skip.
_required = os.environ.get("EVALSUITE_REQUIRE_BROWSER") == "1"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None and not _required,
                       reason="no headless browser: neither chromium nor chromium-browser is on PATH "
                              "(apt-get install chromium; CI installs it)"),
]

OVERVIEW_CELLS_JS = """JSON.stringify({
  table: document.querySelector('table#overview') !== null,
  cells: Array.from(document.querySelectorAll('table#overview td.cell')).map(td => ({
    model: td.dataset.model, task: td.dataset.task, probe: td.dataset.probe, mean: td.dataset.mean,
    text: td.textContent.trim()})),
})"""


def _seg_recipe(folder):
    recipe = yaml.safe_load((REPO / "probes" / "seg_linear.yaml").read_text())
    recipe["name"], recipe["params"]["epochs"] = SEG_PROBE, 3
    path = folder / f"{SEG_PROBE}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    """Everything the tests check, gathered once: the report command's result, the leaderboard rows, and what
    Chromium saw on the page (requests, console, overview cells, screenshot). The browser is gone on return."""
    if find_chromium() is None:  # only with EVALSUITE_REQUIRE_BROWSER=1 (else skipped): fail before the long build
        pytest.fail("EVALSUITE_REQUIRE_BROWSER=1 but neither chromium nor chromium-browser is on PATH")
    work = tmp_path_factory.mktemp("report_browser")
    out = work / "out"
    probes = {"demo": "linear", "demo_seg": _seg_recipe(work), "demo_slide": "meanpool"}
    for task, probe in probes.items():
        for extra in ([], ["--random-init"]):
            result = run_cli("run", "--task", task, "--model", MODEL, *extra, "--probes", probe,
                             "--seeds", ",".join(map(str, SEEDS)), "--num-workers", "0", "--out", out,
                             timeout=RUN_TIMEOUT_S)
            assert result.returncode == 0, (task, extra, result.stderr)
    report = run_cli("report", "--out", out, timeout=300)
    assert report.returncode == 0, report.stderr
    html = out / "report.html"
    with Browser() as browser:
        page = browser.load(html)
        overview = json.loads(page.evaluate(OVERVIEW_CELLS_JS))
        screenshot = work / "report_overview.png"
        page.screenshot(screenshot)
        seen = {"url": page.url, "requests": page.requests, "console": page.console}
    return {"out": out, "html": html, "report": report, "rows": leaderboard_rows(out), "overview": overview,
            "screenshot": screenshot, **seen}


def test_report_command_writes_the_page(report_page):
    assert report_page["report"].stdout.strip().splitlines()[-1] == f"report: {report_page['html']}"
    assert report_page["html"].is_file()


def test_page_logs_no_console_error_or_exception(report_page):
    problems = [str(message) for message in report_page["console"] if message.level == "error"]
    assert not problems, problems


def test_page_requests_nothing_but_its_own_file(report_page):
    own = report_page["url"]
    foreign = [url for url in report_page["requests"]
               if url.split("#")[0] != own and not url.startswith(("data:", "about:"))]
    assert not foreign, foreign
    assert own in report_page["requests"]  # the listener saw the page itself, so it was listening


def test_overview_cells_are_the_leaderboard_means(report_page):
    overview, rows = report_page["overview"], report_page["rows"]
    assert overview["table"], "no <table id=\"overview\"> on the page"
    headline = {row["task"]: row["headline_metric"] for row in rows}
    values = defaultdict(list)  # (model, task, probe) -> test values of the headline metric, one per seed
    for row in rows:
        if row["split"] == "test" and row["metric"] == headline[row["task"]]:
            values[(row["model"], row["task"], row["probe"])].append(float(row["value"]))
    cells = overview["cells"]
    keys = [(cell["model"], cell["task"]) for cell in cells]
    assert len(keys) == len(set(keys)), f"a (model, task) has more than one cell: {sorted(keys)}"
    assert set(keys) == {(model, task) for model, task, _ in values}
    assert set(keys) == {(model, task) for model in (MODEL, f"{MODEL}+random-init")
                         for task in ("demo", "demo_seg", "demo_slide")}
    for cell in cells:
        seeds = values[(cell["model"], cell["task"], cell["probe"])]
        assert len(seeds) == len(SEEDS), (cell, seeds)  # the probe shown was run, once per seed
        assert float(cell["mean"]) == pytest.approx(statistics.fmean(seeds), abs=1e-6), (cell, seeds)
        assert cell["text"], cell


def test_screenshot_is_not_blank(report_page):
    path = report_page["screenshot"]
    if os.environ.get("EVALSUITE_SAVE_SCREENSHOT"):
        SCREENSHOT_COPY.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOT_COPY)
    with Image.open(io.BytesIO(path.read_bytes())) as image:
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    assert len(pixels) > 0 and (pixels != pixels[0]).any(), f"{path}: every pixel has one colour"
    packed = pixels[:, 0].astype(np.int64) << 16 | pixels[:, 1].astype(np.int64) << 8 | pixels[:, 2]
    colours, counts = np.unique(packed, return_counts=True)
    background = colours[counts.argmax()]  # the most frequent colour
    differing = float(np.mean(packed != background))
    assert differing > 0.01, f"{path}: only {differing:.2%} of the pixels differ from the background"
