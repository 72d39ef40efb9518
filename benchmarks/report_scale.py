"""Time and size of `evalsuite report` on a large output folder: 30 models x 20 tasks x 5 seeds with test predictions.

What is measured
----------------
A synthetic ``--out`` folder in the formats a run writes, built with the real writers:

- ``leaderboard.csv``: one batch per run through ``evalsuite.results.leaderboard.rows_from_record`` and
  ``append_rows`` (the run's code path): every probe x seed x split (train, val, test) x metric (balanced_accuracy,
  f1_macro, accuracy, auroc_macro_ovr, ece, mce, brier, nll), with test intervals and the cost columns;
- ``runs/<run_id>.predictions.npz``: the test class probabilities of every probe and seed through
  ``evalsuite.results.predictions.save_predictions``; every other task names patient clusters (10 items each);
- ``runs/<run_id>.json``: a minimal run record with what ``evalsuite.reporting.page.data`` reads (run_id,
  timestamp_utc, seeds, config, task, model, versions, cache.keys, device, precision, probes, throughput), written
  by ``evalsuite.results.run_json.write_run_json``.

One run per model x task (all seeds in it, as ``--seeds 0,1,2,3,4`` makes), probes ``linear`` and ``knn`` (so the
wide table chooses one on val). ``--tasks`` tasks of ``--items`` test (and val) items and ``--classes`` classes,
labels drawn once per task so every model is scored on the same items (paired tests and rank intervals apply).
Model m's probabilities are a softmax of noise plus a margin on the true class that grows with m (model 0 is
``+random-init``, weights id ``random-init``, the floor), so accuracies spread from chance to about 0.95 and ranks
mean something; each seed adds its own noise. The metric values are the benchmark's own numpy versions of
``evalsuite.metrics.classification`` (same definitions; scikit-learn's input checks made building the full folder
take many minutes), the calibration metrics are ``evalsuite.metrics.calibration``'s; test intervals are +-1.96
binomial standard errors, not a bootstrap: the report only shows them.

Then, timed: ``evalsuite.reporting.page.data.collect`` and ``evalsuite.reporting.page.html.html_report``
in this process (imports excluded), and ``python -m evalsuite report --out DIR`` in a fresh process (wall time,
imports included: what a user waits; and its peak RSS). The page's size is that of the CLI's ``report.html``.

How to read it
--------------
- The targets: the report command under 10 s and the page under 5 MB (1 MB = 10^6 bytes); each line says PASS or
  over. Seconds depend on the machine and its load: the host (torch's CPU capability, usable cores, load average
  1/5/15 min when the figure was taken) is printed beside every figure. Compare figures of one run.
- ``collect`` includes the model confidence sets behind the best-set marks, the intervals of the seed means and the
  bootstrap rank intervals (1000 draws per task over every model), which grow with models x seeds x items.
- The best sets: per task, how many models are in the 95 % set of best models, and whether the random-init floor
  (model 0) is outside it on every task (issue 38: with Holm over 29 comparisons it was inside at 27 models and more).
- The building time is printed for information; it is not part of any target.

Run: ``python benchmarks/report_scale.py`` (building the full folder takes a few minutes on 2 cores), ``--quick``
for a smoke size (3 models x 2 tasks x 2 seeds, 200 items; seconds).
"""

import argparse
import datetime as dt
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _shared import host_tag, machine_line

TIME_TARGET_S = 10.0
SIZE_TARGET_MB = 5.0
MB = 1e6
PROBES = ("linear", "knn")
SPLITS = ("train", "val", "test")
CLUSTER_ITEMS = 10  # items per patient on the clustered tasks
FULL = {"models": 30, "tasks": 20, "seeds": 5, "items": 500, "classes": 4}
QUICK = {"models": 3, "tasks": 2, "seeds": 2, "items": 200, "classes": 4}


# --- the metrics of a probability matrix (definitions of evalsuite.metrics.classification) -------------------------

def classification_metrics(labels: np.ndarray, proba: np.ndarray) -> dict:
    from scipy.stats import rankdata

    from evalsuite.metrics.calibration import calibration_metrics

    classes = proba.shape[1]
    predicted = proba.argmax(axis=1)
    confusion = np.bincount(labels * classes + predicted, minlength=classes * classes).reshape(classes, classes)
    hits, truth, called = np.diag(confusion).astype(float), confusion.sum(axis=1), confusion.sum(axis=0)
    present = truth > 0
    recall = np.divide(hits, truth, out=np.zeros(classes), where=present)
    precision = np.divide(hits, called, out=np.zeros(classes), where=called > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(classes), where=precision + recall > 0)
    aurocs = []
    for c in range(classes):
        positives = labels == c
        n_pos, n_neg = int(positives.sum()), int((~positives).sum())
        if n_pos and n_neg:
            ranks = rankdata(proba[:, c])
            aurocs.append((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    metrics = {"balanced_accuracy": float(recall[present].mean()), "f1_macro": float(f1[present | (called > 0)].mean()),
               "accuracy": float(hits.sum() / len(labels)),
               "auroc_macro_ovr": float(np.mean(aurocs)) if aurocs else float("nan")}
    metrics.update(calibration_metrics(labels, proba))
    return metrics


def interval(value: float, units: int) -> list:
    spread = 1.96 * np.sqrt(max(min(value, 1.0) * (1 - min(value, 1.0)), 0.01) / units)
    return [max(value - spread, 0.0), value + spread]


# --- the synthetic output folder ------------------------------------------------------------------------------------

def probabilities(rng, labels: np.ndarray, classes: int, margin: float, shared: np.ndarray) -> np.ndarray:
    """Softmax of (shared noise + this seed's noise + `margin` on the true class), float32 [N, C]."""
    logits = shared + 0.6 * rng.normal(size=shared.shape)
    logits[np.arange(len(labels)), labels] += margin
    logits -= logits.max(axis=1, keepdims=True)
    proba = np.exp(logits)
    return (proba / proba.sum(axis=1, keepdims=True)).astype(np.float32)


def versions_field() -> dict:
    """The run JSON's `versions` fields the report shows, from the installed packages' metadata (importing timm to
    ask it, as a run does, takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"evalsuite_git": "0" * 40}
    for name in ("evalsuite", "torch", "timm", "numpy", "scikit-learn"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "unknown"
    return found


def model_names(count: int) -> list:
    return [f"model{m:02d}" + ("+random-init" if m == 0 else "") for m in range(count)]


def build(out: Path, size: dict) -> dict:
    """Write the folder; returns {runs, rows, predictions_bytes}."""
    from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows, rows_from_record
    from evalsuite.results.predictions import save_predictions
    from evalsuite.results.run_json import write_run_json
    rng = np.random.default_rng(0)
    versions = versions_field()
    models, seeds = model_names(size["models"]), list(range(size["seeds"]))
    classes, items = size["classes"], size["items"]
    class_names = [f"class{c}" for c in range(classes)]
    started = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    runs = rows = 0
    for t in range(size["tasks"]):
        task = f"task{t:02d}"
        labels = {split: rng.integers(0, classes, items) for split in SPLITS}
        clustered = t % 2 == 0
        clusters = np.array([f"p{i // CLUSTER_ITEMS:03d}" for i in range(items)]) if clustered else None
        units = items // CLUSTER_ITEMS if clustered else items
        difficulty = 0.6 + 0.8 * rng.random()  # tasks differ in how far the margins carry
        for m, model in enumerate(models):
            margin = 0.0 if m == 0 else difficulty * (0.4 + 3.0 * m / max(len(models) - 1, 1))
            stamp = started + dt.timedelta(minutes=runs)
            run_id = f"{stamp:%Y%m%dT%H%M%SZ}-{rng.integers(1 << 32):08x}"
            probe_results, test_probas = [], {}
            for p, probe in enumerate(PROBES):
                shared = {split: rng.normal(size=(items, classes)) for split in SPLITS}
                for seed in seeds:
                    metrics, proba = {}, {}
                    for split in SPLITS:
                        boost = 1.0 if split == "train" else 0.0  # a probe fits its train split better
                        proba[split] = probabilities(rng, labels[split], classes, margin * (1 - 0.15 * p) + boost,
                                                     shared[split])
                        metrics[split] = classification_metrics(labels[split], proba[split])
                    test_probas[f"{probe}/seed{seed}"] = proba["test"]
                    probe_results.append({
                        "probe": probe, "seed": seed,
                        "selected_params": {"lr": 0.001, "weight_decay": 0.0001} if probe == "linear" else {"k": 20},
                        "metrics": metrics,
                        "intervals_95": {"test": {name: interval(value, units)
                                                  for name, value in metrics["test"].items()}},
                        "intervals_95_unit": "patient" if clustered else "tile"})
            record = {
                "run_id": run_id, "timestamp_utc": stamp.isoformat(timespec="seconds"), "seeds": seeds,
                "config": {"task": task, "model": model.removesuffix("+random-init"), "random_init": m == 0,
                           "probes": list(PROBES), "seeds": seeds, "precision": "auto", "out_dir": str(out),
                           "weights": None, "pooling": None, "data_root": None, "label": None},
                "task": {"name": task, "path": f"/cards/{task}.yaml", "sha256": f"{t:064x}",
                         "selection_metric": "balanced_accuracy", "classes": class_names},
                "model": {"name": model, "weights_id": "random-init:seed0" if m == 0 else f"sha256:{m:064x}"},
                "device": "cuda:0", "precision": "bf16", "versions": versions,
                "cache": {"keys": {split: f"{t:04x}{m:04x}{s:016x}" for s, split in enumerate(SPLITS)}},
                "probes": probe_results,
                "throughput": {"throughput_img_s": 2000.0 / (1 + m), "forward_img_s": 2500.0 / (1 + m),
                               "device_name": "NVIDIA A100-SXM4-80GB", "device_hours_est": 0.01 * (1 + m),
                               "host_load_1m": 0.5, "host_cpus": 64},
                "cost": {"gflops_per_image": 1.0 + m, "params": 1_000_000 * (1 + m), "input_size_px": [224, 224]},
            }
            save_predictions(out, run_id, labels["test"], clusters, test_probas,
                             "patient" if clustered else "tile", class_names=class_names)
            write_run_json(out, record)
            batch = rows_from_record(record, {split: items for split in SPLITS})
            append_rows(out / LEADERBOARD_FILE, batch)
            runs, rows = runs + 1, rows + len(batch)
        print(f"  built {task}: {runs} runs", file=sys.stderr, flush=True)
    predictions = sum(path.stat().st_size for path in (out / "runs").glob("*.predictions.npz"))
    return {"runs": runs, "rows": rows, "predictions_bytes": predictions}


# --- the measurements -------------------------------------------------------------------------------------------------

def time_in_process(out: Path) -> dict:
    from evalsuite.reporting.page.data import collect
    from evalsuite.reporting.page.html import html_report

    started = time.perf_counter()
    report = collect(out)
    collected = time.perf_counter()
    collect_host = host_tag()
    page = html_report(report)
    done = time.perf_counter()
    return {"collect": collected - started, "collect_host": collect_host, "html": done - collected,
            "html_host": host_tag(), "bytes": len(page.encode()), "notes": report.notes, "sets": best_sets(report)}


def best_sets(report) -> dict:
    """{task: (models in the best set, the floor's MCS p-value or None)}."""
    floor = next(model for model in report.models if model.endswith("+random-init"))
    found = {}
    for task in report.tasks:
        cells = [cell for (_, name), cell in report.cells.items() if name == task]
        found[task] = (sum(cell.best_set is True for cell in cells), report.cells[(floor, task)].best_set_p)
    return found


def time_cli(out: Path) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evalsuite", "report", "--out", str(out)], env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"report_scale: `evalsuite report` failed (exit {done.returncode}):\n{done.stderr.strip()}")
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far: this one
    page = out / "report.html"
    return {"seconds": seconds, "host": host_tag(), "bytes": page.stat().st_size, "peak_mib": peak_mib}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "over"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size: 3 models x 2 tasks x 2 seeds, 200 items")
    for name, help_text in (("models", "models (the first is the random-init floor)"), ("tasks", "tasks"),
                            ("seeds", "seeds per run"), ("items", "test (and val) items per task"),
                            ("classes", "classes per task")):
        parser.add_argument(f"--{name}", type=int, help=f"{help_text} (default {FULL[name]}; --quick {QUICK[name]})")
    parser.add_argument("--keep", metavar="DIR", help="build the folder in DIR (new or empty) and keep it "
                                                      "(default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    size = {name: getattr(args, name) or (QUICK if args.quick else FULL)[name] for name in FULL}
    if size["models"] < 2 or size["tasks"] < 1 or size["seeds"] < 1 or size["classes"] < 2 or \
            size["items"] < 2 * CLUSTER_ITEMS:
        parser.error(f"--models >= 2, --tasks >= 1, --seeds >= 1, --classes >= 2 and --items >= {2 * CLUSTER_ITEMS} "
                     "are needed")
    if args.keep and Path(args.keep).exists() and any(Path(args.keep).iterdir()):
        parser.error(f"--keep {args.keep}: the folder is not empty")

    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="report_scale.") as tmp:
        out = Path(args.keep).resolve() if args.keep else Path(tmp) / "out"
        out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        built = build(out, size)
        build_s = time.perf_counter() - started
        csv_mb = (out / "leaderboard.csv").stat().st_size / MB
        print(f"out folder: {size['models']} models x {size['tasks']} tasks x {size['seeds']} seeds, probes "
              f"{', '.join(PROBES)}, {size['items']} test items x {size['classes']} classes: {built['runs']} runs, "
              f"{built['rows']} leaderboard rows ({csv_mb:.1f} MB), predictions {built['predictions_bytes'] / MB:.1f} "
              f"MB; built in {build_s:.1f} s ({host_tag()})", flush=True)
        measured = time_in_process(out)
        cli = time_cli(out)

    in_process = measured["collect"] + measured["html"]
    print(f"collect: {measured['collect']:.2f} s ({measured['collect_host']})")
    print(f"html_report: {measured['html']:.2f} s ({measured['html_host']})")
    print(f"collect + html_report in process: {in_process:.2f} s; target < {TIME_TARGET_S:.0f} s: "
          f"{verdict(in_process < TIME_TARGET_S)} ({measured['html_host']})")
    print(f"CLI `python -m evalsuite report --out DIR`: {cli['seconds']:.2f} s wall, peak RSS "
          f"{cli['peak_mib']:.0f} MiB; target < {TIME_TARGET_S:.0f} s: {verdict(cli['seconds'] < TIME_TARGET_S)} "
          f"({cli['host']})")
    print(f"HTML size: {cli['bytes'] / MB:.2f} MB (in process {measured['bytes'] / MB:.2f} MB); target < "
          f"{SIZE_TARGET_MB:.0f} MB: {verdict(cli['bytes'] / MB < SIZE_TARGET_MB)} ({cli['host']})")
    sizes = [count for count, _ in measured["sets"].values()]
    floor_p = [p for _, p in measured["sets"].values()]
    outside = all(p is not None and p < 0.05 for p in floor_p)
    print(f"best sets: {min(sizes)}-{max(sizes)} of {size['models']} models per task; the random-init floor is "
          f"outside the set on {sum(p is not None and p < 0.05 for p in floor_p)} of {len(floor_p)} tasks "
          f"(largest MCS p {max((p for p in floor_p if p is not None), default=float('nan')):.4f}): "
          f"{verdict(outside) if outside else 'INSIDE'}")
    for note in measured["notes"]:
        print(f"note from collect: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
