"""One evaluation run: card -> reader -> frozen backbone -> float16 cache -> probes -> results.

Nothing is written to the leaderboard until every probe has produced its metrics, so a
failed run leaves the leaderboard as it was.
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalsuite.config import RunConfig
from evalsuite.features.prepare import SPLITS, prepare_features, split_aliases, used_precision
from evalsuite.metrics.bootstrap import DRAW_SEED, DRAWS_SUFFIX, independence_note, interval_clusters
from evalsuite.metrics.group_robustness import DEFAULT_K as GROUP_K
from evalsuite.metrics.group_robustness import METRIC as GROUP_METRIC
from evalsuite.metrics.group_robustness import group_robustness, usable_k
from evalsuite.metrics.seed_mean import TEST_DRAWS, seed_mean_intervals
from evalsuite.metrics.regression import ITEM_PREDICTIONS
from evalsuite.metrics.segmentation import IMAGE_CONFUSIONS
from evalsuite.models.backbones import build_backbone
from evalsuite.probes import PROBES
from evalsuite.probes._validate import (check_regression_splits, check_two_classes_per_split,
                                        regression_target_names)
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.probes.recipes import checked_recipes
from evalsuite.probes.retrieval_texts import with_retrieval_texts
from evalsuite.readers import build_reader
from evalsuite.reporting.commit import commit_run
from evalsuite.reporting.folds import fold_split, merge_folds, merged_sizes
from evalsuite.reporting.leaderboard import LEADERBOARD_FILE, check_appendable, rows_from_record
from evalsuite.reporting.beside_run import written_beside_run
from evalsuite.reporting.results import run_record
from evalsuite.runtime import distributed, progress, stages
from evalsuite.runtime.cpus import use_threads
from evalsuite.storage.fsio import check_out_folder
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.kinds import KINDS


def build_task_and_backbone(config: RunConfig, builds=None):
    """(card, reader, backbone) for a config: the setup `run` and `budget` share. `builds` (a sweep's
    `models.backbones.ReusedBuilds`) hands back the model it built for the previous cell."""
    card = load_card(config.task)
    reader = build_reader(card, config.data_root, config.check_counts)
    backbone = build_backbone(config.model, config.weights, config.random_init, config.pooling, card.pooling,
                              builds=builds)
    return card, reader, backbone


def run(config: RunConfig, builds=None) -> dict | None:
    """Run one evaluation; under torchrun every rank calls this and rank 0 returns the record."""
    dist, device = distributed.start(config.device)
    try:
        return _run(config, dist, device, builds)
    finally:
        distributed.stop(dist)


def _run(config: RunConfig, dist, device, builds=None) -> dict | None:
    started = time.perf_counter()
    config = config.for_device(device.type)
    # A read-only, full-of-files or foreign --out fails now, not after hours of extraction.
    check_out_folder(config.out_dir)
    check_appendable(Path(config.out_dir) / LEADERBOARD_FILE)
    use_threads(config.threads)
    card, reader, backbone = build_task_and_backbone(config, builds)
    recipes = checked_recipes(config, card, split_aliases(reader), backbone, device)
    recipes = with_retrieval_texts(recipes, card, reader, backbone, config.out_dir, device)  # captions: the reader's
    test_sites = _test_sites(card, reader)  # a card's `group` column must exist before hours of extraction
    folds = getattr(reader, "cv_folds", None)  # cross-validated tasks (HEST) run fold by fold, each checked first
    for fold in range(folds or 1):
        _use_fold(reader, fold if folds else None)
        _check_labels_before_extraction(card, reader)
    timings = {"setup_s": time.perf_counter() - started}
    scored = []
    for fold in range(folds or 1):
        _use_fold(reader, fold if folds else None)
        scored.append(_score(config, card, reader, backbone, device, dist, recipes, test_sites))
    if not dist.is_main:
        return None
    timings["features_s"] = sum(s.features_s for s in scored)
    timings["probes_s"] = sum(s.probes_s for s in scored)
    last = scored[-1]
    # A mean over folds has no draws of its own (reporting/folds.py): only an unfolded run's seeds are averaged.
    mean_intervals = seed_mean_intervals(last.probe_results) if not folds else {}
    for result in (r for s in scored for r in s.probe_results):
        result.pop(TEST_DRAWS, None)
    probe_results = merge_folds([s.probe_results for s in scored]) if folds else last.probe_results
    split_sizes = merged_sizes([s.split_sizes for s in scored]) if folds else last.split_sizes
    extracted = {split: sum(sum(s.features.extracted_per_rank[split]) for s in scored) for split in SPLITS}
    record = run_record(config, card, backbone, probe_results, extracted, timings, device,
                        used_precision(config, backbone, device))
    if mean_intervals:  # the interval of each several-seed mean the summary shows (metrics/seed_mean.py)
        record["intervals_95_seed_mean"] = {"test": mean_intervals}
    features = last.features
    keys = {fold_split(split, n): key for n, s in enumerate(scored) for split, key in s.features.keys.items()} \
        if folds else features.keys
    record["cache"] = {"mode": features.plan.decision, "plan": features.plan.to_dict(), "keys": keys,
                       "shape_probe_forwards": sum(s.features.shape_probe_forwards for s in scored)}
    record["distributed"] = {"world_size": dist.world_size, "samples_extracted_per_rank": features.extracted_per_rank}
    record["throughput"] = _fold_throughput([s.features.throughput for s in scored]) if folds else features.throughput
    if folds:
        record["folds"] = [{"fold": n, **reader.fold_samples(n), "scored": s.split_sizes} for n, s in enumerate(scored)]
    note = independence_note(*last.test_clusters, last.split_sizes["test"], reader.clusters_fix) \
        or getattr(reader, "intervals_note", None)  # e.g. HEST: a fold whose test is one patient has no interval
    if note and any(result.get("intervals_95") for result in probe_results):  # no clusters: say what that assumes
        record["intervals_note"] = note
    if features.slides:  # slide tasks: slides and tiles per split, and any slide left out with its reason
        record["slides"] = features.slides
    # What a metric's items and n_samples are: images/tiles, slides, or patients (survival scores patients).
    record["scored"] = {"unit": reader.scored_unit, **split_sizes}
    aliases = split_aliases(reader)  # HEST's val is train: no rows, or tables would choose probes on train scores
    rows = [r for r in rows_from_record(record, split_sizes) if r["split"].split("_fold")[0] not in aliases]
    # The predictions and plots the run JSON names are written first and removed again if the append fails.
    with written_beside_run(config, record, last.test_labels, last.test_clusters, probe_results) as written:
        record["results_path"] = str(append_run(config.out_dir, record, rows))
        written.keep = True
    return record


@dataclass
class _Scored:
    """One extraction and its probes: the whole run, or one fold of a cross-validated task."""
    features: object  # features.prepare.PreparedFeatures
    probe_results: list
    test_clusters: tuple
    split_sizes: dict
    test_labels: object
    features_s: float
    probes_s: float


def _score(config, card, reader, backbone, device, dist, recipes, test_sites) -> _Scored | None:
    started = time.perf_counter()
    features = prepare_features(config, card, reader, backbone, device, dist)
    split_data = features.splits
    if not dist.is_main:
        return None
    features_s = time.perf_counter() - started
    if KINDS[card.kind].target == "class":  # a one-class split gives a degenerate probe that scores 1.000
        check_two_classes_per_split({split: labels for split, (_, labels) in split_data.items()}, card.classes,
                                    {split: info.get("skipped", []) for split, info in (features.slides or {}).items()})
    test_clusters = interval_clusters(reader, "test", len(split_data["test"][1]))
    fits = [(recipe, seed) for seed in config.seeds for recipe in recipes]
    stages.say(stages.probes_line(fits))
    probe_results = []
    for number, (recipe, seed) in enumerate(fits, 1):  # progress lines say which fit of the run's grid they are
        with progress.labelled(f"{recipe.name} seed {seed}, fit {number}/{len(fits)}{_fold_label(reader)}"):
            probe_results.append(_run_probe(recipe, card, split_data, device, seed, test_clusters))
    if test_sites is not None:
        probe_results.append(_group_robustness_result(card, split_data["test"], test_sites, test_clusters, device,
                                                      config.seeds[0]))
    return _Scored(features, probe_results, test_clusters, {split: len(labels) for split, (_, labels) in
                                                             split_data.items()}, split_data["test"][1], features_s,
                   time.perf_counter() - started - features_s)


def _fold_throughput(per_fold: list) -> dict:
    """The last fold's rates; device-hours of every fold's extraction (each fold embeds its own train and test)."""
    hours = [t.get("device_hours_est") for t in per_fold]
    return {**per_fold[-1], "device_hours_est": sum(hours) if all(h is not None for h in hours) else None}


def _use_fold(reader, fold: int | None) -> None:
    if fold is not None:
        reader.use_fold(fold)


def _fold_label(reader) -> str:
    return f", fold {reader.fold + 1}/{reader.cv_folds}" if getattr(reader, "cv_folds", None) else ""


def _check_labels_before_extraction(card, reader) -> None:
    """Targets known before extraction (tile labels, slide manifests', regression's): refuse an unscorable split."""
    kind = KINDS[card.kind]
    slides = {split: reader.targets(split) for split in card.splits} if kind.bags else None  # reads, checks manifest
    if kind.target == "class":
        check_two_classes_per_split(slides or {split: reader.dataset(split, None).labels for split in card.splits},
                                    card.classes)
    if KINDS[card.kind].target == "vector":  # a constant target has no Pearson r
        check_regression_splits({split: reader.dataset(split, None).labels for split in card.splits},
                                regression_target_names(card, reader), f"task card {card.path}" + _fold_label(reader))


def append_run(out_dir, record: dict, rows: list) -> Path:
    """Append a run's leaderboard rows and move its run JSON into place, or neither; returns the JSON's path.

    The run JSON moves into place only once its rows are appended: every run JSON is named by a row. An earlier
    commit cut short under the same --out is finished or undone first (reporting/commit.py), said on stderr."""
    path, notes = commit_run(out_dir, record, rows)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return path


def _test_sites(card, reader):
    """The test items' values of the card's `group` column (site, scanner, stain), or None without one."""
    if card.group is None:
        return None
    sites = reader.groups_of("test", card.group)
    usable_k(GROUP_K, len(sites), reader.groups("test"))
    return sites


def _group_robustness_result(card, test_data, sites, test_clusters, device, seed: int) -> dict:
    """The PathoROB robustness index of the test embeddings over the card's `group` column, as one probe row: it
    depends on the embedding alone, so it is not repeated per probe."""
    started = time.perf_counter()
    (features, labels), (unit, clusters) = test_data, test_clusters
    k = usable_k(GROUP_K, len(labels), clusters)
    scored = group_robustness(features, labels, sites, k, exclude=clusters, clusters=clusters, seed=seed,
                              device=device)
    return {"probe": "knn_groups", "recipe": {"k": GROUP_K}, "recipe_path": "", "recipe_sha256": "", "seed": seed,
            "selected_params": {"k": k, "group": card.group, "similarity": "cosine",
                                "excluded": unit if clusters is not None else "self"},
            "metrics": {"test": {GROUP_METRIC: scored[GROUP_METRIC]}},
            "intervals_95": {"test": {GROUP_METRIC: list(scored[f"{GROUP_METRIC}_ci"])}},
            "intervals_95_unit": unit if clusters is not None else "tile", "fit_s": time.perf_counter() - started}


def build_probe(recipe, card, device, seed: int):
    return PROBES[recipe.probe](num_classes=card.num_classes, device=device, seed=seed, **recipe.params,
                                **recipe.context)


def fit_probe(recipe, card, split_data: dict, device, seed: int):
    """The recipe's probe trained on train, its hyper-parameters chosen on val by the card's selection metric."""
    return _fit(build_probe(recipe, card, device, seed), card, split_data)


def _fit(probe, card, split_data: dict):
    (train_x, train_y), (val_x, val_y) = split_data["train"], split_data["val"]
    probe.fit(train_x, train_y, val_x, val_y, selection_metric=card.selection_metric)
    return probe


def _recipe_fields(recipe) -> dict:
    return {"probe": recipe.name, "recipe": recipe.params, "recipe_path": str(recipe.path),
            "recipe_sha256": recipe.sha256}


def _run_probe(recipe, card, split_data, device, seed: int, test_clusters=("tile", None)) -> dict:
    """One probe fitted and scored; `test_clusters` = (unit, cluster id per test item or None) for the bootstrap."""
    started = time.perf_counter()
    probe = build_probe(recipe, card, device, seed)
    if isinstance(probe, SplitScoringProbe):
        # A probe whose intervals are over test items resamples the reader's clusters (patients) when it knows them.
        clustered = getattr(probe, "accepts_clusters", False) and test_clusters[1] is not None
        means, intervals = probe.evaluate(split_data, "test", **({"groups": test_clusters[1]} if clustered else {}))
        return {**_recipe_fields(recipe), "seed": seed, "selected_params": probe.selected_params_,
                "metrics": {"test": means}, "intervals_95": {"test": intervals},
                "intervals_95_unit": test_clusters[0] if clustered else probe.interval_unit,
                "fit_s": time.perf_counter() - started}
    _fit(probe, card, split_data)
    probe = _TestPredictions(probe, split_data["test"][0]) if hasattr(probe, "predict_proba") else probe
    kind = KINDS[card.kind]
    metrics = {split: kind.score(card, probe, features, labels) for split, (features, labels) in split_data.items()
               if not (split == "test" and kind.intervals)}
    # Class probabilities of every test item, stored beside the run JSON: paired comparisons of two models need
    # the items, not only the metric.
    test_proba = {"test_proba": np.asarray(probe.predict_proba(split_data["test"][0]), dtype=np.float32)} \
        if kind.target == "class" and hasattr(probe, "predict_proba") else {}
    intervals, unit, per_item, draws = {}, {}, {}, {}
    if kind.intervals:
        # Every seed on the same draws: the mean over seeds then has draws of its own (metrics/seed_mean.py).
        scored = kind.score(card, probe, *split_data["test"], with_intervals=True, groups=test_clusters[1],
                            seed=DRAW_SEED)
        draws = {TEST_DRAWS: {k[:-len(DRAWS_SUFFIX)]: scored.pop(k) for k in list(scored) if k.endswith(DRAWS_SUFFIX)}}
        if IMAGE_CONFUSIONS in scored:  # segmentation: per-image pixel counts, what a paired comparison resamples
            per_item = {"test_confusions": scored.pop(IMAGE_CONFUSIONS)}
        if ITEM_PREDICTIONS in scored:  # regression: each test item's predicted targets, resampled the same way
            per_item = {"test_predictions": scored.pop(ITEM_PREDICTIONS)}
        intervals = {"test": {k[:-3]: list(v) for k, v in scored.items() if k.endswith("_ci")}}
        unit = {"intervals_95_unit": test_clusters[0]}  # what the bootstrap resampled: patient, slide, image, tile
        metrics["test"] = {k: v for k, v in scored.items() if not k.endswith("_ci")}
    return {**_recipe_fields(recipe), "seed": seed, "selected_params": probe.selected_params_,
            "metrics": metrics, "intervals_95": intervals, **unit, "fit_s": time.perf_counter() - started, **test_proba,
            **per_item, **draws}


class _TestPredictions:
    """A fitted probe whose test-split class probabilities are computed once: the run stores them and the scorer
    reads them (they were predicted twice, the larger half of a kNN probe's test cost)."""

    def __init__(self, probe, test_features):
        self._probe, self._test, self._proba = probe, test_features, None

    def __getattr__(self, name: str):
        return getattr(self._probe, name)

    def predict_proba(self, features):
        if features is not self._test:
            return self._probe.predict_proba(features)
        if self._proba is None:
            self._proba = self._probe.predict_proba(features)
        return self._proba
