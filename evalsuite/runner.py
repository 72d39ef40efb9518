"""One evaluation run: card -> reader -> frozen backbone -> float16 cache -> probes -> results.

Nothing is written to the leaderboard until every probe has produced its metrics, so a
failed run leaves the leaderboard as it was.
"""

import contextlib
import sys
import time
from pathlib import Path

import numpy as np

from evalsuite.config import RunConfig
from evalsuite.features.prepare import prepare_features, used_precision
from evalsuite.metrics.bootstrap import independence_note, interval_clusters
from evalsuite.metrics.group_robustness import DEFAULT_K as GROUP_K
from evalsuite.metrics.group_robustness import METRIC as GROUP_METRIC
from evalsuite.metrics.group_robustness import group_robustness, usable_k
from evalsuite.metrics.segmentation import IMAGE_CONFUSIONS
from evalsuite.models.backbones import build_backbone
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_two_classes_per_split
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.probes.recipes import check_recipe_fits, load_recipe
from evalsuite.readers import build_reader
from evalsuite.reporting.commit import RowsWrittenError, commit_run
from evalsuite.reporting.leaderboard import LEADERBOARD_FILE, check_appendable, rows_from_record
from evalsuite.reporting.predictions import prediction_key, save_predictions
from evalsuite.reporting.results import RUNS_FOLDER, run_record
from evalsuite.runtime import distributed, progress
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
    recipes = [check_recipe_fits(load_recipe(name), card) for name in (config.probes or card.probes)]
    test_sites = _test_sites(card, reader)  # a card's `group` column must exist before hours of extraction
    if KINDS[card.kind].target == "class" and not KINDS[card.kind].bags:  # tile labels are known before extraction
        check_two_classes_per_split({split: reader.dataset(split, None).labels for split in card.splits},
                                    card.classes)
    timings = {"setup_s": time.perf_counter() - started}

    features = prepare_features(config, card, reader, backbone, device, dist)
    plan, split_data, extracted_per_rank = features.plan, features.splits, features.extracted_per_rank
    if not dist.is_main:
        return None
    timings["features_s"] = time.perf_counter() - started - timings["setup_s"]
    if KINDS[card.kind].target == "class":  # a one-class split gives a degenerate probe that scores 1.000
        check_two_classes_per_split({split: labels for split, (_, labels) in split_data.items()}, card.classes,
                                    {split: info.get("skipped", []) for split, info in (features.slides or {}).items()})

    test_clusters = interval_clusters(reader, "test", len(split_data["test"][1]))
    fits = [(recipe, seed) for seed in config.seeds for recipe in recipes]
    probe_results = []
    for number, (recipe, seed) in enumerate(fits, 1):  # progress lines say which fit of the run's grid they are
        with progress.labelled(f"{recipe.name} seed {seed}, fit {number}/{len(fits)}"):
            probe_results.append(_run_probe(recipe, card, split_data, device, seed, test_clusters))
    if test_sites is not None:
        probe_results.append(_group_robustness_result(card, split_data["test"], test_sites, test_clusters, device,
                                                      config.seeds[0]))
    timings["probes_s"] = time.perf_counter() - started - timings["setup_s"] - timings["features_s"]
    extracted = {split: sum(per_rank) for split, per_rank in extracted_per_rank.items()}
    record = run_record(config, card, backbone, probe_results, extracted, timings, device,
                        used_precision(config, backbone, device))
    record["cache"] = {"mode": plan.decision, "plan": plan.to_dict(), "keys": features.keys,
                       "shape_probe_forwards": features.shape_probe_forwards}
    record["distributed"] = {"world_size": dist.world_size, "samples_extracted_per_rank": extracted_per_rank}
    record["throughput"] = features.throughput
    note = independence_note(*test_clusters, len(split_data["test"][1]), reader.clusters_fix)
    if note and any(result.get("intervals_95") for result in probe_results):  # no clusters: say what that assumes
        record["intervals_note"] = note
    if features.slides:  # slide tasks: slides and tiles per split, and any slide left out with its reason
        record["slides"] = features.slides
    split_sizes = {split: len(labels) for split, (_, labels) in split_data.items()}
    # What a metric's items and n_samples are: images/tiles, slides, or patients (survival scores patients).
    record["scored"] = {"unit": reader.scored_unit, **split_sizes}
    rows = rows_from_record(record, split_sizes)
    test_probas = {prediction_key(r["probe"], r["seed"]): r.pop("test_proba") for r in probe_results
                   if "test_proba" in r}
    test_confusions = {prediction_key(r["probe"], r["seed"]): r.pop("test_confusions") for r in probe_results
                       if "test_confusions" in r}
    # The predictions and plots the run JSON names are written first and removed again if the append fails.
    with _written_beside_run(config, record, split_data["test"][1], test_clusters, test_probas,
                             test_confusions) as written:
        record["results_path"] = str(append_run(config.out_dir, record, rows))
        written.keep = True
    return record


def append_run(out_dir, record: dict, rows: list) -> Path:
    """Append a run's leaderboard rows and move its run JSON into place, or neither; returns the JSON's path.

    The run JSON moves into place only once its rows are appended: every run JSON is named by a row. An earlier
    commit cut short under the same --out is finished or undone first (reporting/commit.py), said on stderr."""
    path, notes = commit_run(out_dir, record, rows)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return path


class _Written(list):
    keep = False


@contextlib.contextmanager
def _written_beside_run(config, record: dict, test_labels, test_clusters, test_probas: dict,
                        test_confusions: dict | None = None):
    """Per-item test probabilities or per-image confusion counts (for `leaderboard --compare`) and, with --plots,
    reliability diagrams; the run record names them. Files are removed when the block fails."""
    written, test_confusions = _Written(), test_confusions or {}
    try:
        if test_probas or test_confusions:
            unit, clusters = test_clusters
            labels = np.asarray(test_labels) if test_probas else None  # masks: the counts stand for them
            path = save_predictions(config.out_dir, record["run_id"], labels, clusters, test_probas, unit,
                                    confusions=test_confusions, class_names=record["task"]["classes"])
            written.append(path)
            record["predictions"] = {"file": path.name, "keys": sorted({**test_probas, **test_confusions})}
        if config.plots and test_probas:
            record["plots"] = [str(p) for p in _reliability_plots(config, record, test_labels, test_probas)]
            written.extend(Path(p) for p in record["plots"])
        yield written
    except RowsWrittenError:
        written.keep = True  # the rows count, and the run JSON the next process moves into place names these files
        raise
    finally:
        if not written.keep:
            for path in written:
                with contextlib.suppress(OSError):  # a read-only --out: EROFS must not hide the one-line error
                    Path(path).unlink(missing_ok=True)


def _reliability_plots(config, record: dict, test_labels, test_probas: dict) -> list:
    from evalsuite.reporting.reliability import save_reliability_diagram  # matplotlib: only when asked

    folder = Path(config.out_dir) / RUNS_FOLDER
    return [save_reliability_diagram(np.asarray(test_labels), proba,
                                     folder / f"{record['run_id']}.{key.replace('/', '.')}.reliability.png",
                                     f"{record['task']['name']} / {record['model']['name']} / {key} (test)")
            for key, proba in test_probas.items()]


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
    return PROBES[recipe.probe](num_classes=card.num_classes, device=device, seed=seed, **recipe.params)


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
    kind = KINDS[card.kind]
    metrics = {split: kind.score(card, probe, features, labels) for split, (features, labels) in split_data.items()
               if not (split == "test" and kind.intervals)}
    # Class probabilities of every test item, stored beside the run JSON: paired comparisons of two models need
    # the items, not only the metric.
    test_proba = {"test_proba": np.asarray(probe.predict_proba(split_data["test"][0]), dtype=np.float32)} \
        if kind.target == "class" and hasattr(probe, "predict_proba") else {}
    intervals, unit, confusions = {}, {}, {}
    if kind.intervals:
        scored = kind.score(card, probe, *split_data["test"], with_intervals=True, groups=test_clusters[1], seed=seed)
        if IMAGE_CONFUSIONS in scored:  # segmentation: per-image pixel counts, what a paired comparison resamples
            confusions = {"test_confusions": scored.pop(IMAGE_CONFUSIONS)}
        intervals = {"test": {k[:-3]: list(v) for k, v in scored.items() if k.endswith("_ci")}}
        unit = {"intervals_95_unit": test_clusters[0]}  # what the bootstrap resampled: patient, slide, image, tile
        metrics["test"] = {k: v for k, v in scored.items() if not k.endswith("_ci")}
    return {**_recipe_fields(recipe), "seed": seed, "selected_params": probe.selected_params_,
            "metrics": metrics, "intervals_95": intervals, **unit, "fit_s": time.perf_counter() - started, **test_proba,
            **confusions}
