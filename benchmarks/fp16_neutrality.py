"""Does caching features in float16 change probe results? The same probes on float32 and float16 features.

What is measured
----------------
The built-in backbone (``efficientnet_lite0_imagenet``, or ``--model``) embeds the demo task's
train, val and test tiles once in float32 (``torch.inference_mode()``, autocast off, the
backbone's own transform), exactly as a run would but without the cache, which stores float16
only. A float16 copy is made with ``.astype(np.float16)`` - the cast the cache applies. Each
probe recipe (``probes/linear.yaml``, ``probes/knn.yaml`` via ``evalsuite.recipes.load_recipe``)
is then fitted on train and selected on val, once on the float32 and once on the float16
features (same seed), and scored with ``evalsuite.metrics.compute_metrics`` on val and test.

How to read the result
----------------------
- ``delta = fp16 - fp32`` per probe, split and metric; ``max |delta|`` is the headline. On the
  demo's 106 val / 112 test tiles one tile is 0.009 of accuracy, so a delta below that means
  at most a single prediction changed; anything many tiles wide would mean the float16 cache
  is not neutral.
- ``selected`` shows the hyper-parameters each copy chose on val; a delta usually comes from a
  different choice (a flipped k or lr), not from the rounding itself.
- ``fp32 rerun`` fits the linear probe a second time on the float32 features: the size of the
  deltas that come from run-to-run noise alone (0 when training is deterministic).
- The cast's own error: median and maximum relative error |x16 - x32| / |x32| over non-zero
  values (float16 keeps 11 significant bits, so at most 2**-11 = 4.9e-4 for normal values and
  about half that at the median); values below 6.1e-5 are subnormal in float16 and lose
  relative precision, which is where the maximum comes from, while their absolute error stays
  below 3e-8.

Run: ``python benchmarks/fp16_neutrality.py`` (a minute or two on 2 CPU cores).
"""

import argparse
import json
import sys
import time

import numpy as np

SPLITS = ("train", "val", "test")
HEADER = ("probe", "split", "metric", "fp32", "fp16", "delta")


def extract_float32(model_name: str, task: str, batch_size: int, num_workers: int, max_samples: int | None):
    """{split: (float32 features [N, D], int64 labels [N])} from the backbone, autocast off."""
    import torch

    from evalsuite.backbones import build_backbone
    from evalsuite.cards import load_card
    from evalsuite.readers import build_reader
    from evalsuite.transforms import build_transform

    card = load_card(task)
    reader = build_reader(card)
    backbone = build_backbone(model_name)
    transform = build_transform(backbone.data_config)
    out = {}
    for split in SPLITS:
        dataset = reader.dataset(split, transform)
        labels = np.asarray(dataset.labels, dtype=np.int64)
        if max_samples and len(dataset) > max_samples:
            # Evenly spaced tiles, so a small subset still mixes the classes.
            chosen = np.unique(np.linspace(0, len(dataset) - 1, max_samples).round().astype(int))
            dataset, labels = torch.utils.data.Subset(dataset, chosen.tolist()), labels[chosen]
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
        chunks = []
        with torch.inference_mode():
            for images, _ in loader:
                chunks.append(backbone.pooled_features(images).float().numpy())
        out[split] = (np.concatenate(chunks).astype(np.float32, copy=False), labels)
    return card, backbone, out


def fit_and_score(recipe, card, data: dict, seed: int) -> tuple[dict, dict]:
    """(selected params, {split: metrics}) for one probe recipe on one copy of the features."""
    import torch

    from evalsuite.metrics import compute_metrics
    from evalsuite.probes import PROBES

    probe = PROBES[recipe.probe](num_classes=card.num_classes, device=torch.device("cpu"), seed=seed, **recipe.params)
    (train_x, train_y), (val_x, val_y) = data["train"], data["val"]
    probe.fit(train_x, train_y, val_x, val_y, selection_metric=card.selection_metric)
    metrics = {split: compute_metrics(data[split][1], probe.predict_proba(data[split][0])) for split in ("val", "test")}
    return probe.selected_params_, metrics


def cast_errors(features32: np.ndarray) -> dict:
    features16 = features32.astype(np.float16)
    nonzero = features32 != 0
    relative = np.abs(features16[nonzero].astype(np.float32) - features32[nonzero]) / np.abs(features32[nonzero])
    return {"values": int(features32.size), "nonzero": int(nonzero.sum()), "median_rel": float(np.median(relative)),
            "p99_rel": float(np.quantile(relative, 0.99)), "max_rel": float(relative.max()),
            "max_abs": float(np.abs(features16.astype(np.float32) - features32).max()),
            "min_abs_nonzero": float(np.abs(features32[nonzero]).min()),
            "subnormal": int((nonzero & (np.abs(features32) < np.finfo(np.float16).tiny)).sum()),
            "max_abs_value": float(np.abs(features32).max())}


def _format_params(params: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def format_table(rows: list) -> str:
    widths = [max(len(str(row[i])) for row in [HEADER, *rows]) for i in range(len(HEADER))]
    lines = ["  ".join(str(c).ljust(w) if i < 3 else str(c).rjust(w) for i, (c, w) in enumerate(zip(HEADER, widths))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) if i < 3 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in rows]
    return "\n".join(lines)


def run(args) -> None:
    from evalsuite.recipes import load_recipe

    recipes = [load_recipe(name) for name in args.probes]
    started = time.perf_counter()
    card, backbone, data32 = extract_float32(args.model, args.task, args.batch_size, args.num_workers,
                                             args.max_samples)
    print(f"fp16_neutrality: {backbone.name} on {card.name}: "
          + ", ".join(f"{s} {data32[s][0].shape}" for s in SPLITS)
          + f" float32 features in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    data16 = {split: (x.astype(np.float16), y) for split, (x, y) in data32.items()}

    rows, deltas, selected, rerun = [], [], [], {}
    for recipe in recipes:
        params32, metrics32 = fit_and_score(recipe, card, data32, args.seed)
        params16, metrics16 = fit_and_score(recipe, card, data16, args.seed)
        selected.append((recipe.name, params32, params16))
        for split in ("val", "test"):
            for metric, value32 in metrics32[split].items():
                delta = metrics16[split][metric] - value32
                deltas.append(abs(delta))
                rows.append([recipe.name, split, metric, f"{value32:.4f}", f"{metrics16[split][metric]:.4f}",
                             f"{delta:+.4f}"])
        if recipe.probe == "linear" and not args.no_rerun:
            _, again = fit_and_score(recipe, card, data32, args.seed)
            rerun[recipe.name] = max(abs(again[s][m] - metrics32[s][m]) for s in again for m in again[s])

    errors = cast_errors(np.concatenate([data32[s][0] for s in SPLITS]))
    print(format_table(rows))
    print()
    print(f"max |delta| over probes, splits and metrics: {max(deltas):.4f}")
    for name, params32, params16 in selected:
        print(f"selected on val, {name}: fp32 {_format_params(params32)} | fp16 {_format_params(params16)}")
    for name, value in rerun.items():
        print(f"fp32 rerun, {name}: max |delta| {value:.4f} (run-to-run noise floor)")
    print(f"float16 cast: median relative error {errors['median_rel']:.2e}, 99th percentile {errors['p99_rel']:.2e}, "
          f"max {errors['max_rel']:.2e} over {errors['nonzero']} non-zero of {errors['values']} values; "
          f"max abs error {errors['max_abs']:.2e}; |x| from {errors['min_abs_nonzero']:.2e} to "
          f"{errors['max_abs_value']:.2e}; {errors['subnormal']} non-zero values are below float16's smallest normal "
          f"({float(np.finfo(np.float16).tiny):.1e}), where the relative error grows")
    if args.json:
        print(json.dumps({"rows": rows, "max_abs_delta": max(deltas), "rerun": rerun, "cast": errors,
                          "selected": selected}, default=str))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Probe metrics on float32 vs float16 copies of the same real features (demo task, built-in "
                    "backbone): is the float16 feature cache neutral?")
    parser.add_argument("--model", default="efficientnet_lite0_imagenet", help="backbone (default: %(default)s)")
    parser.add_argument("--task", default="demo", help="task card with shipped data (default: %(default)s)")
    parser.add_argument("--probes", nargs="+", default=["linear", "knn"], help="probe recipes (default: linear knn)")
    parser.add_argument("--max-samples", type=int, default=None,
                        help="use at most this many evenly spaced samples per split (smoke tests)")
    parser.add_argument("--seed", type=int, default=0, help="probe seed (default: 0)")
    parser.add_argument("--batch-size", type=int, default=64, help="extraction batch (default: 64)")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers (default: 0)")
    parser.add_argument("--no-rerun", action="store_true", help="skip the float32 rerun of the linear probe")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = parser.parse_args(argv)
    if args.max_samples is not None and args.max_samples < 2:
        parser.error("--max-samples must be at least 2")
    return args


def main(argv=None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
