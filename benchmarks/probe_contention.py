"""Probes on a CPU shared with another busy process: how much slower, and with which thread settings.

What is measured
----------------
The demo-sized probe work of a run (the `linear` recipe's 12-head grid, 100 epochs, and the `knn` recipe) on
synthetic float16 features of BACH's size (400 tiles: 240 train, 60 val, 100 test; 1280 dimensions, four classes
as separable clusters plus noise), each configuration in a fresh process (OpenMP reads its settings when torch
loads):

- `alone`: this process's default threads (`--threads 0`: its share of the usable CPUs), nothing else running;
- `busy`: the same while one other process spins on a core (a Python busy loop), as a second sweep cell or
  another user's job would;
- `alone, 1 thread` and `busy, 1 thread`: torch.set_num_threads(1) for the probes;
- `busy, OMP_WAIT_POLICY=PASSIVE`: OpenMP threads sleep at barriers instead of spinning.

Each line prints the wall time and its ratio to `alone` (the target: the probes slow down in proportion to
the cores they lose, e.g. at most 2.5x on 2 cores with one taken). The host (CPU model, usable CPUs, torch's
capability, load average) is printed beside every figure; compare figures of one run only.

Run: ``python benchmarks/probe_contention.py`` (about a minute on 2 cores), ``--quick`` for a smoke size.
"""

import argparse
import os
import subprocess
import sys
import time

from _shared import machine_line

PROBE_CODE = """
import sys, time
import numpy as np
import torch
threads, epochs = int(sys.argv[1]), int(sys.argv[2])
if threads:
    torch.set_num_threads(threads)
from evalsuite.probes.knn import KNNProbe
from evalsuite.probes.linear import LinearProbe
from evalsuite.probes.recipes import load_recipe
rng = np.random.default_rng(0)
centres = rng.normal(size=(4, 1280)) * 0.6
def split(rows):
    labels = np.arange(rows) % 4
    return (centres[labels] + rng.normal(size=(rows, 1280))).astype(np.float16), labels
(train, train_y), (val, val_y), (test, test_y) = split(240), split(60), split(100)
started = time.perf_counter()
linear = load_recipe("linear").params | {"epochs": epochs}
LinearProbe(num_classes=4, seed=0, **linear).fit(train, train_y, val, val_y, "balanced_accuracy").predict_proba(test)
KNNProbe(num_classes=4, seed=0, **load_recipe("knn").params).fit(train, train_y, val, val_y,
                                                                  "balanced_accuracy").predict_proba(test)
print(time.perf_counter() - started)
"""

SPIN_CODE = "while True:\n    pass\n"


def _probe_seconds(threads: int, epochs: int, env: dict) -> float:
    result = subprocess.run([sys.executable, "-c", PROBE_CODE, str(threads), str(epochs)], capture_output=True,
                            text=True, env=env, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def _configurations() -> list:
    passive = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    return [("alone", False, 0, os.environ), ("alone, 1 thread", False, 1, os.environ), ("busy", True, 0, os.environ),
            ("busy, 1 thread", True, 1, os.environ), ("busy, OMP_WAIT_POLICY=PASSIVE", True, 0, passive)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 epochs instead of the recipe's 100")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration; the median is printed")
    args = parser.parse_args()
    epochs = 10 if args.quick else 100
    env = os.environ.get("OMP_WAIT_POLICY")
    print(f"host: {machine_line()}; OMP_WAIT_POLICY in this shell: {env or 'unset'}")
    baseline = None
    for name, busy, threads, config_env in _configurations():
        spinner = subprocess.Popen([sys.executable, "-c", SPIN_CODE]) if busy else None
        try:
            time.sleep(0.5 if busy else 0)
            seconds = sorted(_probe_seconds(threads, epochs, dict(config_env)) for _ in range(args.repeats))
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
        median = seconds[len(seconds) // 2]
        baseline = baseline or median
        print(f"{name:32s} {median:7.2f} s  ratio to alone {median / baseline:5.2f}  ({machine_line()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
