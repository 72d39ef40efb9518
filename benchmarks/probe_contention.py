"""Probes on a CPU shared with another process: this checkout against a baseline revision, in one run.

What is measured
----------------
The probe work of a run, each configuration in a fresh process (OpenMP reads its settings when torch loads), with
this process's default threads (its share of the usable CPUs):

- ``bach``: BACH's size (400 tiles: 240 train, 60 val, 100 test; 1,280 dimensions, 4 classes as separable clusters
  plus noise), the ``linear`` recipe (12 heads, 100 epochs; 10 with ``--quick``) and the ``knn`` recipe;
- ``wide`` (not with ``--quick``): the ``linear`` recipe's training alone at the widest heads we ship (2,560
  dimensions, 9 classes: 108 head outputs, 106 MFLOP a step) on 6,400 rows for 5 epochs: where a second thread
  helps the most when the machine is free.

Each runs next to each competitor:

- ``alone``: nothing else running;
- ``spinner``: one Python busy loop on a core;
- ``torch``: another torch process multiplying [512, 1536] matrices on 2 threads, as a second sweep cell or
  another user's job on the same 2 cores would.

Both sides run with the same interpreter and packages: the baseline (``git archive REV``, default BASELINE, the
2-thread autograd steps) and this checkout (the linear heads' steps on one thread, their gradient written out:
``evalsuite.runtime.cpus.threads_for_steps``). Each line prints the median wall time of ``--repeats`` runs and its
ratio to the same side's ``alone``; losing one core of two should cost at most about 2x. The host (CPU model,
usable CPUs, torch's capability, load average) is printed beside the table; compare figures of one run only.

Run: ``python benchmarks/probe_contention.py`` (about 3 minutes on 2 cores), ``--quick`` for a smoke size,
``--baseline REV`` for another revision.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import checkout, format_table, machine_line

REPO = Path(__file__).resolve().parents[1]
BASELINE = "4c89145"  # main before the linear heads ran on one thread with a written-out gradient (2026-11-25)

PROBE_CODE = """
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from evalsuite.probes import KNNProbe, LinearProbe  # the package exports both in the baseline layout too
from evalsuite.probes.recipes import load_recipe
shape, quick = sys.argv[2], sys.argv[3] == "1"
dim, classes, rows, epochs = (1280, 4, 400, 10 if quick else 100) if shape == "bach" else (2560, 9, 6400, 5)
rng = np.random.default_rng(0)
centres = rng.normal(size=(classes, dim)) * 0.6
def split(count):
    labels = np.arange(count) % classes
    return (centres[labels] + rng.normal(size=(count, dim))).astype(np.float16), labels
(train, train_y), (val, val_y), (test, test_y) = split(rows * 6 // 10), split(rows * 15 // 100), split(rows // 4)
started = time.perf_counter()
linear = LinearProbe(num_classes=classes, seed=0, **(load_recipe("linear").params | {"epochs": epochs}))
if shape == "bach":
    linear.fit(train, train_y, val, val_y, "balanced_accuracy").predict_proba(test)
    KNNProbe(num_classes=classes, seed=0, **load_recipe("knn").params).fit(
        train, train_y, val, val_y, "balanced_accuracy").predict_proba(test)
else:
    linear._train_heads(train, train_y)
print(time.perf_counter() - started)
"""

COMPETITORS = {
    "alone": None,
    "spinner": "while True:\n    pass\n",
    "torch": "import torch\ntorch.set_num_threads(2)\na = torch.randn(512, 1536)\nwhile True:\n    a @ a.T\n",
}


def probe_seconds(source: Path, shape: str, quick: bool) -> float:
    env = {**os.environ, "TQDM_DISABLE": "1"}
    result = subprocess.run([sys.executable, "-c", PROBE_CODE, str(source), shape, str(int(quick))],
                            capture_output=True, text=True, env=env, cwd=source)
    if result.returncode != 0:
        raise SystemExit(f"probe_contention: the {shape} probes failed in {source}:\n{result.stderr[-2000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def timed_beside(competitor: str, run) -> float:
    """`run()`'s result while the competitor process runs (it gets half a second to start)."""
    code = COMPETITORS[competitor]
    process = subprocess.Popen([sys.executable, "-c", code]) if code else None
    try:
        time.sleep(0.5 if process else 0)
        return run()
    finally:
        if process is not None:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="bach only, 10 epochs")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration; the median is printed")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision to compare with (default {BASELINE})")
    args = parser.parse_args()
    print(f"host: {machine_line()}; OMP_WAIT_POLICY in this shell: {os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="evalsuite_contention_") as scratch:
        sides = {"baseline": checkout(REPO, args.baseline, Path(scratch) / "baseline"), "this": REPO}
        for shape in ("bach",) if args.quick else ("bach", "wide"):
            alone = {}
            for competitor in COMPETITORS:
                for side, source in sides.items():
                    median_s = statistics.median(
                        timed_beside(competitor, lambda: probe_seconds(source, shape, args.quick))
                        for _ in range(args.repeats))
                    alone.setdefault(side, median_s)
                    rows.append([side, shape, competitor, f"{median_s:.2f}", f"{median_s / alone[side]:.2f}"])
    print(format_table(["side", "shape", "beside", "seconds", "ratio_to_alone"], rows))
    print(f"baseline revision {args.baseline}; median of {args.repeats}; {machine_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
