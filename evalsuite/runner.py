"""One evaluation run: card -> reader -> frozen backbone -> float16 cache -> probes -> results.

Nothing is written to the leaderboard until every probe has produced its metrics, so a
failed run leaves the leaderboard as it was.
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from evalsuite.config import RunConfig
from evalsuite.errors import EvalsuiteError
from evalsuite.features.prepare import SPLITS, prepare_features, split_aliases, used_precision
from evalsuite.features.slide_embeddings import (
    card_for_encoder,
    check_layout_memory,
    embed_slides,
    memory_limit,
)
from evalsuite.metrics.bootstrap import cluster_index, independence_note, interval_clusters, task_draw_seed
from evalsuite.metrics.few_clusters import too_few_clusters
from evalsuite.metrics.group_robustness import DEFAULT_K as GROUP_K
from evalsuite.metrics.group_robustness import usable_k
from evalsuite.metrics.seed_mean import TEST_DRAWS, seed_mean_intervals
from evalsuite.models.backbones import build_backbone
from evalsuite.models.registry import slide_encoder
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_regression_splits, check_two_classes_per_split, regression_target_names
from evalsuite.probes.base import splits_read
from evalsuite.probes.fit_and_score import group_robustness_result, run_probe
from evalsuite.probes.recipes import check_val_choice, run_recipes
from evalsuite.probes.texts.inputs import with_text_inputs
from evalsuite.readers import build_reader
from evalsuite.results.beside_run import written_beside_run
from evalsuite.results.commit import commit_run
from evalsuite.results.folds import fold_split, merge_folds, merged_sizes
from evalsuite.results.leaderboard import LEADERBOARD_FILE, check_appendable, rows_from_record
from evalsuite.run_record import run_record
from evalsuite.runtime import distributed, progress, stages
from evalsuite.runtime.cpus import use_threads
from evalsuite.storage.fsio import check_out_folder
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.kinds import KINDS


def build_task_and_backbone(config: RunConfig, builds=None, card=None):
    """(card, reader, backbone) for a config: the setup `run` and `budget` share. `builds` (a sweep's
    `models.backbones.ReusedBuilds`) hands back the model it built for the previous cell; `card`: already loaded."""
    card = card or load_card(config.task)
    encoder = slide_encoder(config.model)
    card = card_for_encoder(card, encoder) if encoder else card  # a slide encoder's run tiles at its own tiling
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
    card = load_card(config.task)
    if not KINDS[card.kind].fits_probe:  # consistency (PLISM): the test embeddings scored against each other
        return _run_without_probe(config, card, dist, device, started, builds)
    recipes = run_recipes(config, card)  # a wrong recipe param is refused before the data is read, the model built
    card, reader, backbone = build_task_and_backbone(config, builds, card)
    check_val_choice(recipes, card, split_aliases(reader))
    recipes = with_text_inputs(recipes, card, reader, backbone, config.out_dir, device)  # every probe's text inputs
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
    if backbone.slide_encoder is not None:  # the slide encoder's share of features_s (docs/slide_encoders.md)
        timings["slide_encoder_s"] = sum(s.slide_encoder_s for s in scored)
    last = scored[-1]
    # A mean over folds has no draws of its own (results/folds.py): only an unfolded run's seeds are averaged.
    test_unit, test_clusters = last.test_clusters
    clusters = cluster_index(test_clusters, last.split_sizes["test"])[1]
    mean_intervals, mean_notes = seed_mean_intervals(last.probe_results, clusters, test_unit) if not folds else ({}, {})
    for result in (r for s in scored for r in s.probe_results):
        result.pop(TEST_DRAWS, None)
    probe_results = merge_folds([s.probe_results for s in scored]) if folds else last.probe_results
    split_sizes = merged_sizes([s.split_sizes for s in scored]) if folds else last.split_sizes
    extracted = {split: sum(sum(s.features.extracted_per_rank[split]) for s in scored)
                 for split in SPLITS if split in last.features.extracted_per_rank}
    record = run_record(config, card, backbone, probe_results, extracted, timings, device,
                        used_precision(config, backbone, device))
    if mean_intervals:  # the interval of each several-seed mean the summary shows (metrics/seed_mean.py)
        record["intervals_95_seed_mean"] = {"test": mean_intervals}
    if mean_notes:
        record["intervals_95_seed_mean_notes"] = {"test": mean_notes}
    if not folds:  # what the intervals rest on (a cross-validated task's are the folds', results/folds.py)
        record["bootstrap"] = {"unit": test_unit, "clusters": clusters, "draw_seed": task_draw_seed(card.name)}
    features = last.features
    keys = {fold_split(split, n): key for n, s in enumerate(scored) for split, key in s.features.keys.items()} \
        if folds else features.keys
    record["cache"] = {"mode": features.plan.decision, "plan": features.plan.to_dict(), "keys": keys,
                       "shape_probe_forwards": sum(s.features.shape_probe_forwards for s in scored)}
    if backbone.slide_encoder is not None:  # the slide-embedding caches beside the tile caches they were made from
        record["cache"]["slide_embedding_keys"] = {fold_split(split, n) if folds else split: key for n, s in
                                                   enumerate(scored) for split, key in s.embedding_keys.items()}
    record["distributed"] = {"world_size": dist.world_size, "samples_extracted_per_rank": features.extracted_per_rank}
    record["throughput"] = _fold_throughput([s.features.throughput for s in scored]) if folds else features.throughput
    if folds:
        record["folds"] = [{"fold": n, **reader.fold_samples(n), "scored": s.split_sizes} for n, s in enumerate(scored)]
    too_few = "" if folds else too_few_clusters(clusters, test_unit)
    note = independence_note(*last.test_clusters, last.split_sizes["test"], reader.clusters_fix) \
        or getattr(reader, "intervals_note", None) \
        or (f"no intervals: {too_few}" if too_few else None)  # e.g. HEST: a fold whose test is one patient
    if note and any(result.get("intervals_95") for result in probe_results):  # no clusters: say what that assumes
        record["intervals_note"] = note
    if features.slides:  # slide tasks: slides and tiles per split, and any slide left out with its reason
        record["slides"] = features.slides
    # What a metric's items and n_samples are: images/tiles, slides, or patients (survival scores patients).
    record["scored"] = {"unit": reader.scored_unit, **split_sizes}
    aliases = split_aliases(reader)  # HEST's val is train: no rows, or tables would choose probes on train scores
    rows = [r for r in rows_from_record(record, split_sizes) if r["split"].split("_fold")[0] not in aliases]
    # The predictions and plots the run JSON names are written first and removed again if the append fails.
    with written_beside_run(config, record, last.test_labels, last.test_clusters, probe_results, reader) as written:
        record["results_path"] = str(append_run(config.out_dir, record, rows))
        written.keep = True
    return record


def _run_without_probe(config, card, dist, device, started: float, builds=None) -> dict | None:
    """A kind that fits no probe: its test split is embedded (the float16 cache, as any tile split) and scored by the
    kind's `score`; one result, probe `consistency`, becomes the leaderboard rows. The card's `probes` name it."""
    if set(config.probes) - set(card.probes):
        raise EvalsuiteError(f"task '{card.name}' fits no probe (its embeddings are compared with each other); "
                             f"drop --probes {','.join(config.probes)}")
    card, reader, backbone = build_task_and_backbone(config, builds, card)
    features = prepare_features(config, card, reader, backbone, device, dist, ("test",))
    if not dist.is_main:
        return None
    timings = {"features_s": time.perf_counter() - started}
    embeddings, labels = features.splits["test"]
    metrics, details = KINDS[card.kind].score(card, reader, embeddings, labels)
    timings["probes_s"] = time.perf_counter() - started - timings["features_s"]
    result = {"probe": card.probes[0], "recipe": {}, "seed": config.seeds[0], "selected_params": {},
              "metrics": {"test": metrics}, "intervals_95": {}}
    record = run_record(config, card, backbone, [result], {"test": sum(features.extracted_per_rank["test"])},
                        timings, device, used_precision(config, backbone, device))
    record.update({card.kind: details, "scored": {"unit": reader.scored_unit, "test": len(labels)},
                   "cache": {"mode": features.plan.decision, "keys": features.keys}})
    record["results_path"] = str(append_run(config.out_dir, record, rows_from_record(record, {"test": len(labels)})))
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
    embedding_keys: dict  # a slide-encoder run: {split: slide-embedding cache key}; else empty
    slide_encoder_s: float = 0.0  # of features_s, the slide encoder's part (its cache included); 0 for other runs


def probe_splits(recipes: list, folds: int | None = None) -> tuple:
    """The splits a run extracts: those its probes read (probes.base.splits_read; the group index reads test). A
    cross-validated task keeps all three in every fold: its rows are merged over folds split by split."""
    if folds:
        return SPLITS
    read = {split for recipe in recipes for split in splits_read(PROBES[recipe.probe], recipe.params, recipe.context)}
    return tuple(split for split in SPLITS if split in read | {"test"})


def _probe_data(recipe, split_data: dict, folds: int | None) -> dict:
    """The extracted splits one probe reads: only those are handed to it, and only those are scored."""
    if folds:
        return split_data
    reads = splits_read(PROBES[recipe.probe], recipe.params, recipe.context)
    return {split: data for split, data in split_data.items() if split in reads}


def _score(config, card, reader, backbone, device, dist, recipes, test_sites) -> _Scored | None:
    started = time.perf_counter()
    folds = getattr(reader, "cv_folds", None)
    encoder = backbone.slide_encoder
    limit = memory_limit(config, device) if encoder is not None else None
    features = prepare_features(config, card, reader, backbone, device, dist, probe_splits(recipes, folds),
                                (lambda layouts: check_layout_memory(encoder, layouts, limit)) if encoder else None)
    split_data, embedding_keys, slide_encoder_s = features.splits, {}, 0.0
    if not dist.is_main:
        return None
    if encoder is not None:  # each slide (patient) through the slide encoder once: vectors for the probes
        tiles_done = time.perf_counter()
        split_data, embedding_keys = embed_slides(config, card, reader, backbone, features, device,
                                                  used_precision(config, backbone, device), limit)
        slide_encoder_s = time.perf_counter() - tiles_done
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
            probe_results.append(run_probe(recipe, card, _probe_data(recipe, split_data, folds), device, seed,
                                           test_clusters))
    if test_sites is not None:
        probe_results.append(group_robustness_result(card, split_data["test"], test_sites, test_clusters, device,
                                                      config.seeds[0]))
    return _Scored(features, probe_results, test_clusters, {split: len(labels) for split, (_, labels) in
                                                             split_data.items()}, split_data["test"][1], features_s,
                   time.perf_counter() - started - features_s, embedding_keys, slide_encoder_s)


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
    commit cut short under the same --out is finished or undone first (results/commit.py), said on stderr."""
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
