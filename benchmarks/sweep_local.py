"""Wall time of `evalsuite sweep run` (local executor) against the same cells as separate `evalsuite run` processes.

What is measured
----------------
One sweep: 2 models (``efficientnet_lite0_imagenet`` and the same architecture with ``random_init: true``, labelled
``efficientnet_lite0_imagenet+random-init``) x 2 tasks (``demo``, ``demo_seg``) x seeds 0,1, each card's default
probes (demo: linear, knn; demo_seg: seg_linear, seg_masktransformer), ``device: cpu``. ``--seg-linear-only`` fixes
demo_seg's probes to ``seg_linear`` on both sides: ``seg_masktransformer`` takes 23-29 s per fit on 2 idle cores but
36-41 s at load 5 and 390-450 s at load 7 (other jobs on the host; 4 fits per side), so on a busy host its fits are
most of the time measured and most of the noise, while what the two sides differ in is start-up and model builds.
Four cells, run two ways, each in its own empty output folder (no feature cache is shared between the sides; each
extracts its own):

- side A: the 4 cells as 4 separate processes, ``python -m evalsuite run --task T --model M [--random-init]
  --seeds 0,1 --out DIR_A ...``, one after another; each starts Python, imports torch and timm, builds the model;
- side B: one process, ``python -m evalsuite sweep run sweep.yaml`` with ``out: DIR_B``; cells of one model run in a
  row and share its loaded backbone.

Both sides get the same explicit settings: device, precision (``--precision``, default ``auto``), extraction batch
size, DataLoader workers and torch threads (the values are printed). Wall time is the whole process, start-up and
imports included: what a user waits. Side B's per-cell seconds are taken when its progress line for the cell
appears (the first cell includes the process start-up). The in-run seconds are the run JSONs' ``timings_s``
(setup + features + probes), the same on both sides, so ``wall - in-run`` is what a side spends outside the runs.

Also measured: what importing the runner costs a fresh process, ``python -c "import evalsuite.runner"`` (median of 3,
before the sides, which also warms the page cache for both). Side A pays it 4 times, side B once: ``saved imports
= import x (4 - 1)``.

How to read it
--------------
- ``B / A``: the sweep's wall time over the four processes'. Below 1 is what the sweep saves.
- ``B / (A - saved imports)``: the acceptance figure. Without the imports the sweep saves, the sweep should cost no
  more than the separate runs (target <= 1.15; the line says PASS or over). Above 1 means the sweep spends time
  the separate runs do not (the per-cell table shows in which cell, and whether in-run or outside the runs).
- ``rows``: leaderboard rows on each side; they must be equal (the script exits 1 otherwise).
- With ``--repeats N`` the sides alternate (A B, B A, ...), each round in fresh folders; seconds and ratios are
  medians over rounds, ``range`` the smallest and largest per-round ratio. The machine line and the load average
  before and after are printed: compare ratios, not seconds, and only on one machine.

``--quick`` is a smoke variant: the tiny ``test_vit`` with random init as two differently named models (their
feature caches coincide, on both sides alike), the ``demo`` task, seed 0, the ``knn`` probe only (the cheapest
probe: the smoke variant checks the script, not the probes).

Run: ``python benchmarks/sweep_local.py`` (about 7 minutes on 2 idle cores, an hour on a busy host;
``--seg-linear-only`` about 3 minutes idle), ``--quick`` (about 35 s idle).
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from _shared import format_table, machine_line

TARGET = 1.15
IMPORT_REPEATS = 3


@dataclass(frozen=True)
class Cell:
    label: str  # the sweep's model label
    model: str
    random_init: bool
    task: str

    @property
    def name(self) -> str:
        return f"{self.label} x {self.task}"


@dataclass(frozen=True)
class Setup:
    cells: tuple
    seeds: tuple
    probes: dict  # {task: probe recipes}; a task not named here: its card's default probes
    device: str
    precision: str
    batch_size: int
    num_workers: int
    threads: int

    def models(self) -> list:
        seen = {}
        for cell in self.cells:
            seen.setdefault(cell.label, cell)
        return list(seen.values())

    def tasks(self) -> list:
        return list(dict.fromkeys(cell.task for cell in self.cells))


def full_cells() -> tuple:
    models = [("efficientnet_lite0_imagenet", "efficientnet_lite0_imagenet", False),
              ("efficientnet_lite0_imagenet+random-init", "efficientnet_lite0_imagenet", True)]
    return tuple(Cell(label, model, random_init, task) for label, model, random_init in models
                 for task in ("demo", "demo_seg"))


def quick_cells() -> tuple:
    labels = ("test_vit+random-init-a", "test_vit+random-init-b")
    return tuple(Cell(label, "test_vit", True, "demo") for label in labels)


def fixed_probes(quick: bool, seg_linear_only: bool) -> dict:
    """{task: probes} the same on both sides; a task not named runs its card's default probes."""
    if quick:
        return {"demo": ("knn",)}
    return {"demo_seg": ("seg_linear",)} if seg_linear_only else {}


def _env() -> dict:
    return {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}


def _failed(what: str, code: int, stderr: str) -> None:
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    raise SystemExit(f"sweep_local: {what} failed (exit {code}):\n{tail}")


def import_seconds() -> float:
    """Median wall seconds of a fresh `python -c "import evalsuite.runner"`."""
    times = []
    for _ in range(IMPORT_REPEATS):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "import evalsuite.runner"], env=_env(), capture_output=True,
                              text=True)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            _failed("import evalsuite.runner", done.returncode, done.stderr)
    return statistics.median(times)


def shared_flags(setup: Setup) -> list:
    return ["--device", setup.device, "--precision", setup.precision, "--batch-size", str(setup.batch_size),
            "--num-workers", str(setup.num_workers), "--threads", str(setup.threads)]


def _run_jsons(out: Path) -> set:
    return set((out / "runs").glob("*.json"))


def run_side_a(setup: Setup, out: Path) -> dict:
    """{"wall": s, "cells": {cell name: {"wall": s, "in_run": {...}}}}: one `evalsuite run` per cell."""
    cells, total = {}, 0.0
    for cell in setup.cells:
        command = [sys.executable, "-m", "evalsuite", "run", "--task", cell.task, "--model", cell.model,
                   "--seeds", ",".join(map(str, setup.seeds)), "--out", str(out), *shared_flags(setup)]
        command += ["--random-init"] if cell.random_init else []
        command += ["--probes", ",".join(setup.probes[cell.task])] if setup.probes.get(cell.task) else []
        before = _run_jsons(out)
        started = time.perf_counter()
        done = subprocess.run(command, env=_env(), capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            _failed(f"side A cell {cell.name}", done.returncode, done.stderr)
        total += seconds
        cells[cell.name] = {"wall": seconds, "in_run": in_run_seconds(_run_jsons(out) - before)}
        print(f"    A {cell.name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return {"wall": total, "cells": cells}


def sweep_yaml(setup: Setup, out: Path) -> dict:
    models = []
    for cell in setup.models():
        entry = {"name": cell.label, "model": cell.model}
        if cell.random_init:
            entry["random_init"] = True
        models.append(entry)
    tasks = [{"task": task, "probes": list(setup.probes[task])} if setup.probes.get(task) else task
             for task in setup.tasks()]
    sweep = {"name": "sweep_local", "models": models, "tasks": tasks, "seeds": list(setup.seeds),
             "device": setup.device, "precision": setup.precision, "batch_size": setup.batch_size,
             "num_workers": setup.num_workers, "threads": setup.threads, "out": str(out)}
    return sweep


def run_side_b(setup: Setup, out: Path, work: Path) -> dict:
    """{"wall": s, "cells": {cell name: {"wall": s, "in_run": {...}}}, "lines": [the sweep's stdout]}: one `evalsuite
    sweep run`; a cell's seconds end when its `[n/N] ...` progress line appears."""
    path = work / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_yaml(setup, out), sort_keys=False))
    lines, marks = [], []
    with open(work / "sweep.stderr", "w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "evalsuite", "sweep", "run", str(path)], env=_env(),
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
        for line in process.stdout:
            now = time.perf_counter() - started
            lines.append(line.rstrip("\n"))
            if line.startswith("["):
                marks.append(now)
                print(f"    B {line.strip()}", file=sys.stderr, flush=True)
        code = process.wait()
        wall = time.perf_counter() - started
        if code != 0:
            stderr.seek(0)
            _failed("side B (evalsuite sweep run)", code, "\n".join(lines) + "\n" + stderr.read())
    if len(marks) != len(setup.cells):
        raise SystemExit(f"sweep_local: side B printed {len(marks)} cell lines, expected {len(setup.cells)}:\n"
                         + "\n".join(lines))
    runs = {}
    for json_path in _run_jsons(out):
        record = json.loads(json_path.read_text())
        runs.setdefault(f"{record['model']['name']} x {record['task']['name']}", []).append(json_path)
    cells, previous = {}, 0.0
    for cell, mark in zip(setup.cells, marks):  # the sweep runs its cells model by model, tasks in file order
        cells[cell.name] = {"wall": mark - previous, "in_run": in_run_seconds(runs.get(cell.name, []))}
        previous = mark
    return {"wall": wall, "cells": cells, "lines": lines}


def in_run_seconds(runs) -> dict:
    """Summed run-JSON timings (setup, features, probes) of a cell's runs, and each probe fit's seconds
    {(probe, seed): s}; read while the folder exists."""
    total, fits = {"setup": 0.0, "features": 0.0, "probes": 0.0}, {}
    for path in runs:
        record = json.loads(Path(path).read_text())
        for key in total:
            total[key] += record["timings_s"].get(f"{key}_s", 0.0)
        for result in record.get("probes", []):
            fits[(result["probe"], result["seed"])] = result.get("fit_s", 0.0)
    return {**total, "fits": fits}


def _in_run_total(timings: dict) -> float:
    return timings["setup"] + timings["features"] + timings["probes"]


def leaderboard_rows(out: Path) -> int:
    path = out / "leaderboard.csv"
    if not path.is_file():
        return 0
    with open(path, newline="") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def one_round(setup: Setup, folder: Path, b_first: bool) -> dict:
    out_a, out_b = folder / "A", folder / "B"
    folder.mkdir(parents=True)
    result = {"import": import_seconds()}
    print(f"    import evalsuite.runner: {result['import']:.1f} s (median of {IMPORT_REPEATS})", file=sys.stderr,
          flush=True)
    for side in ("B", "A") if b_first else ("A", "B"):
        result[side] = run_side_b(setup, out_b, folder) if side == "B" else run_side_a(setup, out_a)
    result["rows"] = {"A": leaderboard_rows(out_a), "B": leaderboard_rows(out_b)}
    result["saved"] = result["import"] * (len(setup.cells) - 1)
    result["ratio"] = result["B"]["wall"] / result["A"]["wall"]
    result["acceptance"] = result["B"]["wall"] / (result["A"]["wall"] - result["saved"])
    return result


def _median(values) -> float:
    return statistics.median(list(values))


def _range(values) -> str:
    values = list(values)
    return f"{min(values):.2f}-{max(values):.2f}"


def cell_table(setup: Setup, rounds: list) -> str:
    header = ["cell", "A wall s", "B wall s", "B/A", "A in-run s", "B in-run s", "A feat s", "B feat s",
              "A probes s", "B probes s"]
    rows, sums = [], {}
    for cell in setup.cells:
        a_wall = _median(r["A"]["cells"][cell.name]["wall"] for r in rounds)
        b_wall = _median(r["B"]["cells"][cell.name]["wall"] for r in rounds)
        a_in = [r["A"]["cells"][cell.name]["in_run"] for r in rounds]
        b_in = [r["B"]["cells"][cell.name]["in_run"] for r in rounds]
        values = {"A wall": a_wall, "B wall": b_wall,
                  "A in-run": _median(map(_in_run_total, a_in)), "B in-run": _median(map(_in_run_total, b_in)),
                  "A feat": _median(t["features"] for t in a_in), "B feat": _median(t["features"] for t in b_in),
                  "A probes": _median(t["probes"] for t in a_in), "B probes": _median(t["probes"] for t in b_in)}
        for key, value in values.items():
            sums[key] = sums.get(key, 0.0) + value
        rows.append([cell.name, f"{a_wall:.1f}", f"{b_wall:.1f}", f"{b_wall / a_wall:.2f}",
                     *(f"{values[k]:.1f}" for k in ("A in-run", "B in-run", "A feat", "B feat", "A probes",
                                                    "B probes"))])
    rows.append(["sum", f"{sums['A wall']:.1f}", f"{sums['B wall']:.1f}", f"{sums['B wall'] / sums['A wall']:.2f}",
                 *(f"{sums[k]:.1f}" for k in ("A in-run", "B in-run", "A feat", "B feat", "A probes", "B probes"))])
    return format_table(header, rows, left=1)


def fit_table(setup: Setup, rounds: list) -> str:
    """Each probe fit's seconds (run JSON `fit_s`) on both sides: where in-run time differs."""
    rows = []
    for cell in setup.cells:
        for key in rounds[0]["A"]["cells"][cell.name]["in_run"]["fits"]:
            a = _median(r["A"]["cells"][cell.name]["in_run"]["fits"].get(key, float("nan")) for r in rounds)
            b = _median(r["B"]["cells"][cell.name]["in_run"]["fits"].get(key, float("nan")) for r in rounds)
            rows.append([cell.name, key[0], key[1], f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}" if a > 0 else "-"])
    return format_table(["cell", "probe", "seed", "A fit s", "B fit s", "B/A"], rows, left=2)


def host_tag() -> str:
    """The facts a speed figure depends on, short enough to sit beside each figure."""
    import torch

    from evalsuite.runtime.cpus import usable_cpus
    from evalsuite.runtime.precision import cpu_has_native_bf16

    return (f"host: {torch.backends.cpu.get_cpu_capability()}, native bf16 "
            f"{'yes' if cpu_has_native_bf16() else 'no'}, {usable_cpus()} CPUs")


def main(argv=None) -> int:
    from evalsuite.runtime.cpus import default_num_workers, intra_op_threads
    from evalsuite.runtime.precision import PRECISIONS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke variant: test_vit (random init) twice, demo only, seed 0, knn probe only")
    parser.add_argument("--keep", metavar="DIR", help="write the outputs under DIR (new or empty) and keep them "
                                                      "(default: a temporary folder, removed)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds, alternating the order of the sides (A B, B A, ...); medians are shown "
                             "(default: 1)")
    parser.add_argument("--seg-linear-only", action="store_true",
                        help="demo_seg with seg_linear only on both sides (drops the card's seg_masktransformer, "
                             "slow and noisy on a busy host); default: every card's default probes")
    parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                        help="precision of every run on both sides (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="extraction batch size (default: %(default)s)")
    parser.add_argument("--num-workers", type=int, default=None,
                        help="DataLoader workers on both sides (default: evalsuite's default for a CPU run here)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads on both sides (default: evalsuite's default here)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.batch_size < 1 or (args.num_workers is not None and args.num_workers < 0) or \
            (args.threads is not None and args.threads < 1):
        parser.error("--batch-size and --threads must be >= 1, --num-workers >= 0")
    if args.keep and Path(args.keep).exists() and any(Path(args.keep).iterdir()):
        parser.error(f"--keep {args.keep}: the folder is not empty (both sides must start from empty folders)")
    setup = Setup(cells=quick_cells() if args.quick else full_cells(), seeds=(0,) if args.quick else (0, 1),
                  probes=fixed_probes(args.quick, args.seg_linear_only), device="cpu", precision=args.precision,
                  batch_size=args.batch_size,
                  num_workers=default_num_workers("cpu") if args.num_workers is None else args.num_workers,
                  threads=intra_op_threads(0) if args.threads is None else args.threads)

    print(machine_line(), flush=True)
    host = host_tag()
    probes = "; ".join(f"{task}: {', '.join(setup.probes[task]) if setup.probes.get(task) else 'card defaults'}"
                       for task in setup.tasks())
    print(f"sweep: {len(setup.models())} models x {len(setup.tasks())} tasks ({', '.join(setup.tasks())}) = "
          f"{len(setup.cells)} cells, seeds {','.join(map(str, setup.seeds))}, probes: {probes}; device "
          f"{setup.device}, precision {setup.precision}, batch size {setup.batch_size}, workers "
          f"{setup.num_workers}, threads {setup.threads}; {args.repeats} round(s)", flush=True)
    load_before = os.getloadavg()[0]
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        rounds = [one_round(setup, Path(args.keep).resolve() / f"round{n}", b_first=n % 2 == 1)
                  for n in range(args.repeats)]
    else:
        with tempfile.TemporaryDirectory(prefix="sweep_local.") as tmp:
            rounds = [one_round(setup, Path(tmp) / f"round{n}", b_first=n % 2 == 1) for n in range(args.repeats)]
    load_after = os.getloadavg()[0]

    a_wall, b_wall = _median(r["A"]["wall"] for r in rounds), _median(r["B"]["wall"] for r in rounds)
    imported, saved = _median(r["import"] for r in rounds), _median(r["saved"] for r in rounds)
    ratio, acceptance = _median(r["ratio"] for r in rounds), _median(r["acceptance"] for r in rounds)
    spread = len(rounds) > 1
    print(f"load average (1 min): {load_before:.1f} before, {load_after:.1f} after")
    print(f"{host}; seconds and ratios are medians of {len(rounds)} round(s)")
    print(f"side A: {len(setup.cells)} separate `evalsuite run` processes: {a_wall:.1f} s in total; per cell:")
    for cell in setup.cells:
        print(f"  {cell.name}: {_median(r['A']['cells'][cell.name]['wall'] for r in rounds):.1f} s")
    print(f"side B: one `evalsuite sweep run`: {b_wall:.1f} s")
    print(cell_table(setup, rounds))
    print("probe fits (run JSON fit_s):")
    print(fit_table(setup, rounds))
    print(f"import evalsuite.runner in a fresh process: {imported:.1f} s (median of {IMPORT_REPEATS}); saved imports "
          f"= {imported:.1f} s x {len(setup.cells) - 1} = {saved:.1f} s ({host})")
    print(f"ratio B / A: {ratio:.2f}" + (f" (range {_range(r['ratio'] for r in rounds)})" if spread else "")
          + f" ({host})")
    verdict = "PASS" if acceptance <= TARGET else "over"
    print(f"acceptance ratio B / (A - saved imports): {acceptance:.2f}"
          + (f" (range {_range(r['acceptance'] for r in rounds)})" if spread else "")
          + f"; target <= {TARGET:.2f}: {verdict} ({host})")
    counts = [(r["rows"]["A"], r["rows"]["B"]) for r in rounds]
    equal = all(a == b and a > 0 for a, b in counts)
    print("leaderboard rows: " + "; ".join(f"A {a}, B {b}" for a, b in counts) + (" (equal)" if equal else
                                                                                  " (DIFFER)"))
    if not equal:
        print("sweep_local: the two sides wrote different numbers of leaderboard rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
