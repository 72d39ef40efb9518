"""`evalsuite report`'s HTML page as a browser shows it: real runs, the real command, headless Chromium.

One output folder is built once for the module by the README's documented command, scripts/readme_screenshot.py
(the demo tasks with shipped probes, efficientnet_lite0_imagenet pretrained and with --random-init, seeds 0 and 1;
its docstring lists them): it runs them, writes OUT/report.html with `evalsuite report --out OUT` and saves the
whole page as PNG, here into the test's tmp folder instead of docs/img/report_overview.png. The PNG must be the page
(at least the 1280 px window wide, taller than one screen) and not blank. Chromium then loads the page from its
file:// URL (tests/e2e/browser.py drives it over the DevTools protocol). The page must be self-contained: no request
beyond its own file (data: and about: URLs aside), no console error, no uncaught exception. Its overview cells
(`<table id="overview">`, `<td class="cell" data-model data-task data-probe data-mean>`) must be the leaderboard's
numbers: the mean over seeds of the task's headline metric on test for the probe shown, and every (model, task) with
test rows must have one. Every provenance command wraps inside its box (no sideways scrolling), and the reliability
diagrams are drawn at least 240 px wide.

Chromium: Debian's `chromium` (or `chromium-browser`) on PATH. Without it the module is skipped, unless
EVALSUITE_REQUIRE_BROWSER=1 (CI installs it and sets that), where it fails.
"""

import importlib.util
import io
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest
from browser import Browser, find_chromium
from conftest import REPO, leaderboard_rows
from PIL import Image

SCRIPT = REPO / "scripts" / "readme_screenshot.py"
SEEDS = (0, 1)
BUILD_TIMEOUT_S = 3600  # six runs and the report on a busy 2-core host; idle it is a few minutes

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


# Each provenance <pre> once every <details> is open: a box that scrolls sideways has scrollWidth > clientWidth.
PROVENANCE_JS = """JSON.stringify((() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  return Array.from(document.querySelectorAll('details pre')).map(pre => ({
    text: pre.textContent, scroll: pre.scrollWidth, client: pre.clientWidth}));
})())"""
RELIABILITY_JS = """JSON.stringify(Array.from(document.querySelectorAll('svg.reliability'))
  .map(svg => svg.getBoundingClientRect().width))"""


def _script():
    """scripts/readme_screenshot.py as a module (scripts/ is no package): its models and tasks."""
    spec = importlib.util.spec_from_file_location("readme_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    """Everything the tests check, gathered once: the report command's result, the leaderboard rows, and what
    Chromium saw on the page (requests, console, overview cells, screenshot). The browser is gone on return."""
    if find_chromium() is None:  # only with EVALSUITE_REQUIRE_BROWSER=1 (else skipped): fail before the long build
        pytest.fail("EVALSUITE_REQUIRE_BROWSER=1 but neither chromium nor chromium-browser is on PATH")
    work = tmp_path_factory.mktemp("report_browser")
    out, screenshot = work / "out", work / "report_overview.png"
    # The README's command, as a user types it (its own interpreter, run from the repository).
    script = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--png", str(screenshot), "--seeds",
                             ",".join(map(str, SEEDS))], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=BUILD_TIMEOUT_S)
    assert script.returncode == 0, script.stdout[-3000:] + script.stderr[-3000:]
    html = out / "report.html"
    with Browser() as browser:
        page = browser.load(html)
        overview = json.loads(page.evaluate(OVERVIEW_CELLS_JS))
        seen = {"url": page.url, "requests": page.requests, "console": page.console,
                "provenance": json.loads(page.evaluate(PROVENANCE_JS)),
                "reliability": json.loads(page.evaluate(RELIABILITY_JS))}
    return {"out": out, "html": html, "script": script, "rows": leaderboard_rows(out), "overview": overview,
            "screenshot": screenshot, **seen}


def test_the_readme_script_writes_the_page_and_its_screenshot(report_page):
    lines = report_page["script"].stdout.strip().splitlines()
    assert f"report: {report_page['html']}" in lines and lines[-1] == f"screenshot: {report_page['screenshot']}"
    assert report_page["html"].is_file() and report_page["screenshot"].is_file()


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
    script = _script()
    assert set(keys) == {(label, task) for _, label in script.MODELS for task in script.TASKS}
    for cell in cells:
        seeds = values[(cell["model"], cell["task"], cell["probe"])]
        assert len(seeds) == len(SEEDS), (cell, seeds)  # the probe shown was run, once per seed
        assert float(cell["mean"]) == pytest.approx(statistics.fmean(seeds), abs=1e-6), (cell, seeds)
        assert cell["text"], cell


def test_provenance_commands_wrap_and_reliability_diagrams_are_readable(report_page):
    boxes = report_page["provenance"]
    assert boxes and all("evalsuite run --task" in box["text"] for box in boxes)
    assert not [box for box in boxes if box["scroll"] > box["client"]], "a command scrolls sideways"
    assert report_page["reliability"] and min(report_page["reliability"]) >= 240


def test_screenshot_is_the_whole_page_and_not_blank(report_page):
    path = report_page["screenshot"]
    with Image.open(io.BytesIO(path.read_bytes())) as image:
        assert image.width >= 1200 and image.height > 900, image.size  # the 1280 x 900 window, scrolled to the end
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    assert len(pixels) > 0 and (pixels != pixels[0]).any(), f"{path}: every pixel has one colour"
    packed = pixels[:, 0].astype(np.int64) << 16 | pixels[:, 1].astype(np.int64) << 8 | pixels[:, 2]
    colours, counts = np.unique(packed, return_counts=True)
    background = colours[counts.argmax()]  # the most frequent colour
    differing = float(np.mean(packed != background))
    assert differing > 0.01, f"{path}: only {differing:.2%} of the pixels differ from the background"
