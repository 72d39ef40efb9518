"""`evalsuite robustness`: how far each transformation moves a test tile's embedding, and what it costs the probe.

For a classification (tile) task and one backbone:
1. the clean train/val/test features come from the feature cache (extracted first if missing), as in `run`;
2. the `linear` probe recipe is fitted on train and selected on val, exactly as `run --probes linear` does;
3. per transformation t, every test tile is transformed (evalsuite.robustness.perturbations, before the
   backbone's resize and normalisation, seeded per tile) and embedded again, in memory as float16 like
   the cache, never cached;
4. per t: cosine similarity between each tile's clean and transformed embedding (mean, median, std, min),
   and the probe's headline test metric on the transformed features minus the one on the clean features.

THUNDER measures the cosine part the same way (MICS-Lab/thunder src/thunder/tasks/transformation_invariance.py
at 6fe47e0975411bb692263217a816b62a0c809a39) on 1000 train+val images; here it is the whole test split, so
the same tiles also give the probe's metric drop. docs/robustness.md has every formula and difference.
"""

import time
from pathlib import Path

import numpy as np
import torch

from evalsuite.config import RunConfig
from evalsuite.errors import EvalsuiteError
from evalsuite.features.extract import extract_to_cache
from evalsuite.features.prepare import chunk_rows_for, feature_fn, prepare_features, used_precision
from evalsuite.metrics.invariance import cosine_similarities, cosine_summary
from evalsuite.models.transforms import build_transform
from evalsuite.probes.fit_and_score import fit_probe
from evalsuite.probes.recipes import check_recipe_fits, load_recipe
from evalsuite.readers.batch_decoding import BatchDecoding
from evalsuite.results.leaderboard import LEADERBOARD_FILE, check_appendable, rows_from_record
from evalsuite.robustness import check_task_kind
from evalsuite.robustness.perturbations import PERTURBATIONS, perturb
from evalsuite.run_record import run_record
from evalsuite.runner import append_run, build_task_and_backbone
from evalsuite.runtime import distributed
from evalsuite.runtime.cpus import use_threads
from evalsuite.storage.fsio import check_out_folder
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.kinds import KINDS

PROBE_RECIPE = "linear"
INVARIANCE_PROBE = "invariance"  # the leaderboard's probe column for these rows


class PerturbedImages(BatchDecoding, torch.utils.data.Dataset):
    """A classification dataset's items with transformation `name` applied to the PIL image before its transform;
    batches are decoded as readers/batch_decoding.py says (uint8 images, converted on the batch's device)."""

    def __init__(self, images, name: str, seed: int):
        self.images, self.name, self.seed = images, name, seed
        self.labels, self.transform = images.labels, images.transform
        self.init_batch_decoding(self.transform)

    def __len__(self) -> int:
        return len(self.images)

    def image(self, index: int):
        return perturb(self.images.image(index), self.name, self.seed, index)

    def label(self, index: int) -> int:
        return int(self.labels[index])


class _RowsInMemory:
    """The writer side of extract_to_cache, kept in RAM: transformed embeddings are scored, then dropped."""

    def __init__(self, chunks: list, row_shape: tuple):
        self.starts = {index: start for index, start, _ in chunks}
        self.row_shape = tuple(row_shape)
        self.rows = np.empty((max(stop for *_, stop in chunks), *self.row_shape), dtype=np.float16)
        self.manifest = {"chunks": chunks}  # named in extract_to_cache's preemption message

    def write_chunk(self, index: int, rows: np.ndarray) -> None:
        start = self.starts[index]
        self.rows[start : start + len(rows)] = rows

    def finish(self) -> None:
        pass


def evaluate(config: RunConfig, transforms: list, seed: int = 0) -> dict | None:
    """Run the evaluation; under torchrun every rank extracts its share of the clean caches, rank 0 the rest."""
    check_task_kind(load_card(config.task))
    dist, device = distributed.start(config.device)
    try:
        return _evaluate(config, transforms, seed, dist, device)
    finally:
        distributed.stop(dist)


def _evaluate(config: RunConfig, transforms: list, seed: int, dist, device) -> dict | None:
    config = config.for_device(device.type)
    started = time.perf_counter()
    check_out_folder(config.out_dir)
    check_appendable(Path(config.out_dir) / LEADERBOARD_FILE)
    use_threads(config.threads)
    card, reader, backbone = build_task_and_backbone(config)
    recipe = check_recipe_fits(load_recipe(PROBE_RECIPE), card)
    features = prepare_features(config, card, reader, backbone, device, dist)
    if not dist.is_main:
        return None
    timings = {"features_s": time.perf_counter() - started}
    probe = fit_probe(recipe, card, features.splits, device, seed)
    test_features, test_labels = features.splits["test"]
    headline = card.selection_metric
    clean = KINDS[card.kind].score(card, probe, test_features, test_labels)[headline]
    images = reader.dataset("test", build_transform(backbone.data_config))
    if not hasattr(images, "image"):
        raise EvalsuiteError(f"task '{card.name}': its reader gives no PIL image per sample, which robustness "
                             "needs to transform tiles")
    precision = used_precision(config, backbone, device)
    scores = {}
    for name in transforms:
        embedded = embed_transformed(backbone, card, images, name, seed, device, config, precision,
                                     tuple(test_features.shape[1:]))
        transformed = KINDS[card.kind].score(card, probe, embedded, test_labels)[headline]
        scores[name] = {"cosine": cosine_summary(cosine_similarities(test_features, embedded)),
                        "metric_clean": clean, "metric_transformed": transformed, "delta": transformed - clean,
                        "params": PERTURBATIONS[name].params}
    timings["robustness_s"] = time.perf_counter() - started - timings["features_s"]
    extracted = {split: sum(per_rank) for split, per_rank in features.extracted_per_rank.items()}
    record = run_record(config, card, backbone, [invariance_result(recipe, probe, seed, headline, scores)],
                        extracted, timings, device, precision)
    record["robustness"] = {"probe": PROBE_RECIPE, "headline_metric": headline, "seed": seed,
                            "samples": len(test_labels), "embedding_dtype": "float16", "transforms": scores}
    record["cache"] = {"mode": features.plan.decision}
    rows = rows_from_record(record, {"test": len(test_labels)})
    record["results_path"] = str(append_run(config.out_dir, record, rows))
    return record


def embed_transformed(backbone, card, images, name: str, seed: int, device, config, precision: str,
                      row_shape: tuple) -> np.ndarray:
    """float16 [N, D] embeddings of the transformed test tiles, batched exactly as the clean cache was
    (same chunk rows and batch size), so the `identity` transformation reproduces the cached rows."""
    chunk_rows = chunk_rows_for(row_shape, config.batch_size, config.chunk_rows)
    chunks = [(index, start, min(start + chunk_rows, len(images)))
              for index, start in enumerate(range(0, len(images), chunk_rows))]
    writer = _RowsInMemory(chunks, row_shape)
    extract_to_cache(backbone, PerturbedImages(images, name, seed), writer, device, batch_size=config.batch_size,
                     num_workers=config.num_workers, precision=precision, description=f"{card.name}/test {name}",
                     features_of=feature_fn(backbone, card), chunks=chunks, finish=False)
    return writer.rows


def invariance_result(recipe, probe, seed: int, headline: str, scores: dict) -> dict:
    """The run JSON's probe entry whose test metrics become the leaderboard rows of probe `invariance`."""
    metrics = {}
    for name, score in scores.items():
        metrics[f"cosine_{name}"] = score["cosine"]["mean"]
        metrics[f"cosine_median_{name}"] = score["cosine"]["median"]
        metrics[f"{headline}_delta_{name}"] = score["delta"]
    return {"probe": INVARIANCE_PROBE, "recipe": recipe.params, "recipe_path": str(recipe.path),
            "recipe_sha256": recipe.sha256, "seed": seed, "selected_params": probe.selected_params_,
            "metrics": {"test": metrics}, "intervals_95": {}}


def table_rows(record: dict) -> tuple[list, list]:
    """(header, body) of the printed table: one line per transformation."""
    robustness = record["robustness"]
    headline = robustness["headline_metric"]
    header = ["transformation", "cosine mean", "cosine median", f"{headline} clean", f"{headline} transformed",
              "delta"]
    body = [[name, f"{s['cosine']['mean']:.4f}", f"{s['cosine']['median']:.4f}", f"{s['metric_clean']:.4f}",
             f"{s['metric_transformed']:.4f}", f"{s['delta']:+.4f}"] for name, s in robustness["transforms"].items()]
    return header, body
