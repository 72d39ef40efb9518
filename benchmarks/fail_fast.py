"""Seconds of two answers that tests check by their call path, not by a clock (a clock fails on a loaded host).

1. `evalsuite run --task demo --model uni2-h` with the hub unreachable (HF_ENDPOINT on a refused local port), a
   fresh process each round: the README promises "within seconds". Most of it is importing torch and timm; the
   hub costs one refused connect (tests/models/test_registry.py::test_unreachable_hub_is_one_connect_attempt_then_offline).
   A figure near 30 s or more means huggingface_hub retried online.
2. `c_index_interval` on 5000 slides, 1000 bootstrap draws, in this process: about a second when it is one sort
   and one sweep over all draws (tests/metrics/test_survival.py::test_bootstrap_of_5000_slides_is_one_sort_and_one_sweep_of_all_draws).

Prints the machine, the load average before and after, and the median, fastest and slowest seconds per case.
Usage: python benchmarks/fail_fast.py [--rounds 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _shared import format_table, machine_line


def _offline_hub_s(out_dir: str) -> float:
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": os.path.join(out_dir, "hf"),
           "HF_HUB_OFFLINE": "0"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evalsuite", "run", "--task", "demo", "--model", "uni2-h",
                           "--out", os.path.join(out_dir, "out")], env=env, capture_output=True, text=True)
    elapsed_s = time.perf_counter() - started
    if done.returncode != 2 or "unreachable" not in done.stderr:  # a different answer is not the case measured
        sys.exit(f"fail_fast.py: expected the offline one-line error, got exit {done.returncode}: {done.stderr}")
    return elapsed_s


def _survival_bootstrap_s() -> float:
    import numpy as np

    from evalsuite.metrics.survival import c_index_interval

    rng = np.random.default_rng(0)
    time_, event, risk = rng.exponential(size=5000), rng.integers(0, 2, 5000), rng.normal(size=5000)
    started = time.perf_counter()
    c_index_interval(time_, event, risk)
    return time.perf_counter() - started


def _row(name: str, seconds: list) -> list:
    return [name, f"{statistics.median(seconds):.2f}", f"{min(seconds):.2f}", f"{max(seconds):.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of each case (default 3)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    print(machine_line())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        hub_s = [_offline_hub_s(folder) for _ in range(args.rounds)]
    survival_s = [_survival_bootstrap_s() for _ in range(args.rounds)]
    print(format_table(["case", "median s", "fastest s", "slowest s"],
                       [_row("run, hub unreachable (fresh process)", hub_s),
                        _row("c-index bootstrap, 5000 slides x 1000 draws", survival_s)], left=1))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
