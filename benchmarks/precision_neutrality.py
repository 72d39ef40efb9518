"""Does the compute precision change the features, and the probe results? float32 vs bf16/fp16 autocast, plus the float16 cache.

What is measured
----------------
The backbone (``efficientnet_lite0_imagenet``, or ``--model``; ``--random-init`` for untrained
weights) embeds the task's (default ``demo``) train, val and test tiles once per precision:
float32 (the reference) and each lower precision the hardware offers - on a CPU bf16 autocast
(emulated when the CPU has no native bf16) and fp16 autocast where torch's CPU autocast supports
it; on CUDA fp16, and bf16 where the device computes it natively - or those of ``--precisions``.
Extraction is the real one (``evalsuite.features.prepare.prepare_features``: the run's loader, transform,
channels-last for CNNs, autocast, chunked float16 cache, budget plan) into a temporary cache,
one cache per precision as a run would keep them. The forward's own float32 output is recorded
on the way, before the cache's float16 cast. The probe recipes (``probes/linear.yaml``,
``probes/knn.yaml``) are then fitted on train and selected on val (same seed) on each
precision's float16 cache, as a run does, and once on the float32 output of the fp32 forward
(no cache), and scored with ``evalsuite.metrics.classification.compute_metrics`` on test.

How to read the result
----------------------
Feature table (per-vector relative error ||a - b|| / ||b||, median and 95th percentile over all
samples of all splits; b is the fp32 forward's float32 output):
- ``forward``: the precision's float32 output vs the reference: what autocast alone does;
- ``cached``: the precision's float16 cache vs the reference: what the probes of a run see;
- ``cast``: the precision's float16 cache vs its own float32 output: the cache's rounding alone
  (float16 keeps 11 significant bits, so ~1e-4 per vector; 0 when autocast already returns
  float16, or bf16 values, whose 8 bits float16 holds exactly unless they are tiny).
- ``extract / fp32``: extraction wall time over fp32's, measured in this run (whole
  ``prepare_features``: loader, forward, cache writes; each precision after a 2-tile warm-up). On a CPU without native bf16 (``native
  bf16: no`` in the first line) bf16 is emulated and several times slower. Timings move with
  machine load: read the ratio, not the seconds.

Metric table (test split; every metric of the card's classification scorer):
- ``fp32 float32``: probes on the fp32 forward's float32 output, no cache;
- ``fp32``: probes on the fp32 float16 cache; ``cast d`` = fp32 - fp32 float32: the cache's
  effect on the metric;
- per lower precision, its value on its float16 cache and ``d`` = value - fp32: what choosing that
  precision changes in a run's results.
On the demo's 110 test tiles one tile is about 0.009 of accuracy: a delta below that means at
most one prediction changed. ``selected`` shows the hyper-parameters each copy chose on val (a
delta usually comes from a flipped k or lr, not from the rounding itself); ``fp32 rerun`` fits
the linear probe again on the same fp32 cache: the run-to-run noise floor (0 when training is
deterministic).

Run: ``python benchmarks/precision_neutrality.py`` (5-10 minutes on 2 CPU cores without native
bf16, most of it the emulated bf16 and fp16 forwards); ``--model kaiko-vits16 --random-init``
for a ViT.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _shared import format_table, machine_line

SPLITS = ("train", "val", "test")
LOWER_PRECISIONS = ("bf16", "fp16")


class _Subset:
    """Evenly spaced samples of a reader's dataset (so a small subset still mixes the classes), labels alongside."""

    def __init__(self, dataset, max_samples: int):
        self.dataset = dataset
        self.indices = np.unique(np.linspace(0, len(dataset) - 1, max_samples).round().astype(int)).tolist()
        self.labels = np.asarray(dataset.labels)[self.indices]
        if hasattr(dataset, "label_shape"):
            self.label_shape = dataset.label_shape

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]


class _SubsetReader:
    """A reader whose datasets hold at most `max_samples` evenly spaced samples (smoke tests)."""

    def __init__(self, reader, max_samples: int | None):
        self.reader, self.max_samples = reader, max_samples

    def dataset(self, split, transform):
        dataset = self.reader.dataset(split, transform)
        if self.max_samples and len(dataset) > self.max_samples:
            return _Subset(dataset, self.max_samples)
        return dataset


def offered_precisions(device) -> list[str]:
    """The lower precisions autocast computes on this device (CPU bf16 included even when emulated)."""
    import torch

    if device.type == "cuda":
        return (["bf16"] if torch.cuda.is_bf16_supported(including_emulation=False) else []) + ["fp16"]
    return [p for p in LOWER_PRECISIONS if _cpu_autocast_works(p)]


def _cpu_autocast_works(precision: str) -> bool:
    import torch

    from evalsuite.runtime.precision import autocast_context

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    try:
        with torch.inference_mode(), autocast_context(torch.device("cpu"), precision):
            return torch.nn.Linear(4, 4)(torch.ones(2, 4)).dtype == dtype
    except (RuntimeError, AssertionError):  # a torch whose CPU autocast lacks this dtype
        return False


def extract(precision: str, backbone, card, reader, device, args, out_dir: Path) -> tuple[dict, dict, float]:
    """({split: (float16 cache, labels)}, {split: float32 forward output}, wall seconds) in one precision."""
    from evalsuite.features.prepare import prepare_features
    from evalsuite.runner import RunConfig

    config = RunConfig(task=card.name, model=backbone.name, random_init=args.random_init, out_dir=out_dir,
                       device=str(device), batch_size=args.batch_size, num_workers=args.num_workers,
                       precision=precision, threads=args.threads)
    recorded = []
    forward = type(backbone).pooled_features

    def recording_forward(images):
        output = forward(backbone, images)
        recorded.append(output.float().cpu().numpy())
        return output

    # The instance attribute shadows the method, so the run's own extraction goes through it.
    _warm_up(backbone, device, precision)
    backbone.pooled_features = recording_forward
    try:
        started = time.perf_counter()
        prepared = prepare_features(config, card, reader, backbone, device)
        cached, shape_probe_forwards = prepared.splits, prepared.shape_probe_forwards
        seconds = time.perf_counter() - started
    finally:
        del backbone.pooled_features
    rows = np.concatenate(recorded[shape_probe_forwards:])
    bounds = np.cumsum([0] + [len(cached[split][1]) for split in SPLITS])
    assert len(rows) == bounds[-1], (len(rows), bounds)  # one recorded row per cached row, in order
    forward32 = {split: rows[bounds[i]:bounds[i + 1]] for i, split in enumerate(SPLITS)}
    return {split: (np.asarray(x), np.asarray(y)) for split, (x, y) in cached.items()}, forward32, seconds


def _warm_up(backbone, device, precision: str) -> None:
    # One-off costs (kernel selection, allocator) land in no precision's timing, not in the first one's.
    import torch

    from evalsuite.runtime.precision import autocast_context

    with torch.inference_mode(), autocast_context(device, precision):
        backbone.pooled_features(torch.randn(2, *backbone.data_config["input_size"], device=device))


def vector_errors(values: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(median, 95th percentile) over rows of ||values - reference|| / ||reference||."""
    values, reference = values.astype(np.float32), reference.astype(np.float32)
    values, reference = values.reshape(len(values), -1), reference.reshape(len(reference), -1)
    norms = np.maximum(np.linalg.norm(reference, axis=1), np.finfo(np.float32).tiny)
    relative = np.linalg.norm(values - reference, axis=1) / norms
    return float(np.median(relative)), float(np.quantile(relative, 0.95))


def value_cast_errors(features32: np.ndarray) -> dict:
    """The float16 cast per value: relative error over non-zero values, and how many are float16-subnormal."""
    features16 = features32.astype(np.float16).astype(np.float32)
    nonzero = features32 != 0
    relative = np.abs(features16[nonzero] - features32[nonzero]) / np.abs(features32[nonzero])
    return {"median_rel": float(np.median(relative)), "max_rel": float(relative.max()),
            "max_abs": float(np.abs(features16 - features32).max()), "nonzero": int(nonzero.sum()),
            "subnormal": int((nonzero & (np.abs(features32) < np.finfo(np.float16).tiny)).sum())}


def fit_and_score(recipe, card, data: dict, device, seed: int) -> tuple[dict, dict]:
    """(selected params, test metrics) of one probe recipe fitted on train, selected on val."""
    from evalsuite.metrics.classification import compute_metrics
    from evalsuite.probes import PROBES

    probe = PROBES[recipe.probe](num_classes=card.num_classes, device=device, seed=seed, **recipe.params)
    (train_x, train_y), (val_x, val_y) = data["train"], data["val"]
    probe.fit(train_x, train_y, val_x, val_y, selection_metric=card.selection_metric)
    return probe.selected_params_, compute_metrics(data["test"][1], probe.predict_proba(data["test"][0]))


def _format_params(params: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def feature_rows(precisions, forward32, cached, seconds) -> list:
    reference = np.concatenate([forward32["fp32"][s] for s in SPLITS])
    rows = []
    for precision in precisions:
        output = np.concatenate([forward32[precision][s] for s in SPLITS])
        stored = np.concatenate([cached[precision][s][0] for s in SPLITS])
        errors = [vector_errors(output, reference), vector_errors(stored, reference), vector_errors(stored, output)]
        rows.append([precision, *[f"{e:.2e}" for pair in errors for e in pair], f"{seconds[precision]:.0f}",
                     f"{seconds[precision] / seconds['fp32']:.2f}"])
    return rows


def run(args) -> None:
    from evalsuite.models.backbones import build_backbone
    from evalsuite.probes.recipes import load_recipe
    from evalsuite.readers import build_reader
    from evalsuite.runtime.cpus import use_threads
    from evalsuite.runtime.devices import resolve_device
    from evalsuite.tasks.cards import load_card

    device = resolve_device(args.device)
    use_threads(args.threads)
    lower = args.precisions if args.precisions is not None else offered_precisions(device)
    precisions = ["fp32", *[p for p in lower if p != "fp32"]]
    card = load_card(args.task)
    if card.kind != "classification":
        raise SystemExit(f"precision_neutrality: task '{card.name}' is {card.kind}; this benchmark scores "
                         "classification tasks")
    recipes = [load_recipe(name) for name in args.probes]
    reader = _SubsetReader(build_reader(card), args.max_samples)
    backbone = build_backbone(args.model, random_init=args.random_init)
    print(machine_line(device))
    print(f"{backbone.label} on {card.name}, device {device}, precisions {', '.join(precisions)}")

    cached, forward32, seconds = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="precision_neutrality.") as tmp:
        for precision in precisions:
            cached[precision], forward32[precision], seconds[precision] = extract(
                precision, backbone, card, reader, device, args, Path(tmp))
            print(f"  {precision}: " + ", ".join(f"{s} {cached[precision][s][0].shape}" for s in SPLITS)
                  + f" in {seconds[precision]:.0f} s", file=sys.stderr, flush=True)

    print()
    print(format_table(["precision", "forward med", "p95", "cached med", "p95", "cast med", "p95", "extract s",
                        "extract / fp32"], feature_rows(precisions, forward32, cached, seconds), left=1))
    cast = value_cast_errors(np.concatenate([forward32["fp32"][s] for s in SPLITS]))
    print(f"float16 cast of the fp32 output, per value: median relative error {cast['median_rel']:.2e}, max "
          f"{cast['max_rel']:.2e} over {cast['nonzero']} non-zero values, {cast['subnormal']} of them below "
          f"float16's smallest normal; max absolute error {cast['max_abs']:.2e}")

    reference32 = {s: (forward32["fp32"][s], cached["fp32"][s][1]) for s in SPLITS}
    copies = {"fp32 float32": reference32, **{p: cached[p] for p in precisions}}
    rows, selected, rerun, worst = [], [], {}, {p: 0.0 for p in copies if p != "fp32"}
    for recipe in recipes:
        results = {name: fit_and_score(recipe, card, data, device, args.seed) for name, data in copies.items()}
        selected.append((recipe.name, {name: params for name, (params, _) in results.items()}))
        base = results["fp32"][1]
        for metric, value32 in base.items():
            row = [recipe.name, metric, f"{results['fp32 float32'][1][metric]:.4f}", f"{value32:.4f}",
                   f"{value32 - results['fp32 float32'][1][metric]:+.4f}"]
            worst["fp32 float32"] = max(worst["fp32 float32"], abs(value32 - results["fp32 float32"][1][metric]))
            for precision in precisions[1:]:
                value = results[precision][1][metric]
                row += [f"{value:.4f}", f"{value - value32:+.4f}"]
                worst[precision] = max(worst[precision], abs(value - value32))
            rows.append(row)
        if recipe.probe == "linear" and not args.no_rerun:
            _, again = fit_and_score(recipe, card, cached["fp32"], device, args.seed)
            rerun[recipe.name] = max(abs(again[m] - base[m]) for m in base)

    print()
    print(f"test metrics ({len(cached['fp32']['test'][1])} tiles):")
    header = ["probe", "metric", "fp32 float32", "fp32", "cast d"]
    for precision in precisions[1:]:
        header += [precision, "d"]
    print(format_table(header, rows, left=2))
    print("max |d|: " + ", ".join(f"{'cast' if name == 'fp32 float32' else name} {value:.4f}"
                                  for name, value in worst.items()))
    for name, params in selected:
        print(f"selected on val, {name}: " + " | ".join(f"{copy} {_format_params(p)}" for copy, p in params.items()))
    for name, value in rerun.items():
        print(f"fp32 rerun, {name}: max |d| {value:.4f} (run-to-run noise floor)")
    if args.json:
        print(json.dumps({"precisions": precisions, "seconds": seconds, "metrics_rows": rows, "max_abs_delta": worst,
                          "rerun": rerun, "cast": cast, "selected": selected,
                          "features_rows": feature_rows(precisions, forward32, cached, seconds)}, default=str))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Features and probe metrics of the same backbone extracted in float32 and in each lower precision "
                    "(bf16/fp16 autocast) through the run's extraction and float16 cache: per-vector feature error, "
                    "cache error, metric deltas and the extraction time ratio.",
        epilog="Run with no option for the demo task and efficientnet_lite0_imagenet.")
    parser.add_argument("--model", default="efficientnet_lite0_imagenet", help="backbone (default: %(default)s)")
    parser.add_argument("--random-init", action="store_true", help="untrained weights (nothing is downloaded)")
    parser.add_argument("--task", default="demo", help="classification task card with its data (default: %(default)s)")
    parser.add_argument("--precisions", nargs="+", choices=LOWER_PRECISIONS, default=None,
                        help="lower precisions to compare with fp32 (default: those the device offers; on a CPU "
                             "bf16, emulated without native support, and fp16 if torch's CPU autocast has it)")
    parser.add_argument("--probes", nargs="+", default=["linear", "knn"], help="probe recipes (default: linear knn)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    parser.add_argument("--max-samples", type=int, default=None,
                        help="at most this many evenly spaced samples per split (smoke tests)")
    parser.add_argument("--seed", type=int, default=0, help="probe seed (default: 0)")
    parser.add_argument("--batch-size", type=int, default=64, help="extraction batch (default: %(default)s)")
    parser.add_argument("--num-workers", type=int, default=None,
                        help="DataLoader workers (default: a run's, min(4, CPUs - 1))")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default 0: a run's)")
    parser.add_argument("--no-rerun", action="store_true", help="skip the fp32 rerun of the linear probe")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = parser.parse_args(argv)
    if args.max_samples is not None and args.max_samples < 2:
        parser.error("--max-samples must be at least 2")
    if args.batch_size < 1 or (args.num_workers is not None and args.num_workers < 0) or args.threads < 0:
        parser.error("--batch-size must be >= 1, --num-workers and --threads >= 0")
    if args.num_workers is None:
        from evalsuite.runtime.cpus import default_num_workers

        args.num_workers = default_num_workers()
    return args


if __name__ == "__main__":
    run(parse_args())
