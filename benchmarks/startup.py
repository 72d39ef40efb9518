"""Start-up: `evalsuite leaderboard` and a cached demo rerun, this checkout against a baseline revision, in one run.

What is measured
----------------
The baseline's source tree (``git archive REV``, default the last commit before the start-up work, see BASELINE)
and this checkout's are run side by side with the same interpreter and packages, each command in a fresh process
(imports included: what a user waits for):

- ``leaderboard``: ``python -m evalsuite leaderboard --out DIR`` on a demo output folder (two runs: pretrained and
  random-init, test predictions stored, so rank intervals are computed), written once by this checkout;
- ``cached run`` (not with ``--quick``): ``python -m evalsuite run --task demo --out DIR`` when the features are
  already cached (each side warms its own folder first: cache keys may differ between revisions).

Each line prints the median wall time of ``--repeats`` runs per side and the ratio this / baseline (below 1 is
faster). The host (CPU model, usable CPUs, torch's capability, load average) is printed beside every figure;
compare figures of one run only.

Run: ``python benchmarks/startup.py`` (about 2 minutes on 2 cores), ``--quick`` for the leaderboard only on a
synthetic folder (seconds), ``--baseline REV`` for another revision.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import checkout, machine_line

REPO = Path(__file__).resolve().parents[1]
BASELINE = "dc20aea"  # main before the report's draw scores and the lazy scikit-learn import (2026-11-25)
# Each side's own `python -m evalsuite` (its __main__.py, so its own way of exiting), from its own source tree.
CLI = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = ['evalsuite', *sys.argv[2:]]; "
       "runpy.run_module('evalsuite', run_name='__main__', alter_sys=True)")


def seconds(source: Path, args: list) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CLI, str(source), *map(str, args)], capture_output=True,
                            text=True, cwd=source)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"startup benchmark: {' '.join(map(str, args))} failed in {source}:\n{result.stderr}")
    return elapsed


def compare(name: str, sides: dict, args_of, repeats: int) -> None:
    medians = {side: statistics.median(seconds(source, args_of(side)) for _ in range(repeats))
               for side, source in sides.items()}
    ratio = medians["this"] / medians["baseline"]
    print(f"{name:14s} baseline {medians['baseline']:6.2f} s   this {medians['this']:6.2f} s   this/baseline "
          f"{ratio:4.2f}  (median of {repeats}; {machine_line()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision to compare with (default {BASELINE})")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side and command; the median is printed")
    parser.add_argument("--quick", action="store_true", help="leaderboard only, on a small synthetic folder")
    args = parser.parse_args()
    print(f"host: {machine_line()}")
    with tempfile.TemporaryDirectory(prefix="evalsuite_startup_") as scratch:
        scratch = Path(scratch)
        sides = {"baseline": checkout(REPO, args.baseline, scratch / "baseline"), "this": REPO}
        demo = scratch / "demo_out"
        if args.quick:
            _synthetic_board(demo)
        else:
            for extra in ([], ["--random-init"]):
                seconds(REPO, ["run", "--task", "demo", "--out", demo, *extra])
        compare("leaderboard", sides, lambda side: ["leaderboard", "--out", demo], args.repeats)
        if not args.quick:
            for side, source in sides.items():  # warm each side's own cache
                seconds(source, ["run", "--task", "demo", "--out", scratch / f"cached_{side}"])
            compare("cached run", sides, lambda side: ["run", "--task", "demo", "--out", scratch / f"cached_{side}"],
                    args.repeats)
    return 0


def _synthetic_board(out: Path) -> None:
    """A 3-model, 2-task folder in the formats a run writes (benchmarks/report_scale.py's builder)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import report_scale

    report_scale.build(out, dict(report_scale.QUICK))


if __name__ == "__main__":
    sys.exit(main())
