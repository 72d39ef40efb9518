"""One probe of a run fitted on train (chosen on val) and scored on every split, with the test split's bootstrap
intervals, their notes and draws, and the per-item test outputs a run stores beside its JSON; and the task's group
robustness index as one more probe row. The runner calls `run_probe` once per recipe and seed."""

import time

import numpy as np

from evalsuite.metrics.bootstrap import DRAWS_SUFFIX, NOTE_SUFFIX, task_draw_seed
from evalsuite.metrics.group_robustness import DEFAULT_K as GROUP_K
from evalsuite.metrics.group_robustness import METRIC as GROUP_METRIC
from evalsuite.metrics.group_robustness import group_robustness, usable_k
from evalsuite.metrics.regression import ITEM_PREDICTIONS
from evalsuite.metrics.seed_mean import TEST_DRAWS
from evalsuite.metrics.segmentation import IMAGE_CONFUSIONS
from evalsuite.probes import PROBES
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.tasks.kinds import KINDS


def group_robustness_result(card, test_data, sites, test_clusters, device, seed: int) -> dict:
    """The PathoROB robustness index of the test embeddings over the card's `group` column, as one probe row: it
    depends on the embedding alone, so it is not repeated per probe."""
    started = time.perf_counter()
    (features, labels), (unit, clusters) = test_data, test_clusters
    k = usable_k(GROUP_K, len(labels), clusters)
    scored = group_robustness(features, labels, sites, k, exclude=clusters, clusters=clusters,
                              seed=task_draw_seed(card.name), unit=unit if clusters is not None else "tile",
                              device=device)
    note = scored.get(f"{GROUP_METRIC}{NOTE_SUFFIX}")
    return {"probe": "knn_groups", "recipe": {"k": GROUP_K}, "recipe_path": "", "recipe_sha256": "", "seed": seed,
            "selected_params": {"k": k, "group": card.group, "similarity": "cosine",
                                "excluded": unit if clusters is not None else "self"},
            "metrics": {"test": {GROUP_METRIC: scored[GROUP_METRIC]}},
            "intervals_95": {"test": {GROUP_METRIC: list(scored[f"{GROUP_METRIC}_ci"])}},
            **({"intervals_95_notes": {"test": {GROUP_METRIC: note}}} if note else {}),
            "intervals_95_unit": unit if clusters is not None else "tile", "fit_s": time.perf_counter() - started}


def build_probe(recipe, card, device, seed: int):
    return PROBES[recipe.probe](num_classes=card.num_classes, device=device, seed=seed, **recipe.params,
                                **recipe.context)


def fit_probe(recipe, card, split_data: dict, device, seed: int):
    """The recipe's probe trained on train, its hyper-parameters chosen on val by the card's selection metric."""
    return _fit(build_probe(recipe, card, device, seed), card, split_data)


def _fit(probe, card, split_data: dict):
    # A split the probe does not read was not extracted for it (probes.base.splits_read): (None, None) in its place.
    (train_x, train_y), (val_x, val_y) = split_data.get("train", (None, None)), split_data.get("val", (None, None))
    probe.fit(train_x, train_y, val_x, val_y, selection_metric=card.selection_metric)
    return probe


def _recipe_fields(recipe) -> dict:
    return {"probe": recipe.name, "recipe": recipe.params, "recipe_path": str(recipe.path),
            "recipe_sha256": recipe.sha256}


def run_probe(recipe, card, split_data, device, seed: int, test_clusters=("tile", None)) -> dict:
    """One probe fitted and scored; `test_clusters` = (unit, cluster id per test item or None) for the bootstrap."""
    started = time.perf_counter()
    probe = build_probe(recipe, card, device, seed)
    if isinstance(probe, SplitScoringProbe):
        # A probe whose intervals are over test items resamples the reader's clusters (patients) when it knows them.
        clustered = getattr(probe, "accepts_clusters", False) and test_clusters[1] is not None
        drawn = {"draw_seed": task_draw_seed(card.name)} if getattr(probe, "accepts_clusters", False) else {}
        means, intervals = probe.evaluate(split_data, "test", **({"groups": test_clusters[1]} if clustered else {}),
                                          **drawn)
        notes = getattr(probe, "interval_notes_", {})
        return {**_recipe_fields(recipe), "seed": seed, "selected_params": probe.selected_params_,
                "metrics": {"test": means}, "intervals_95": {"test": intervals},
                **({"intervals_95_notes": {"test": notes}} if notes else {}),
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
    intervals, unit, per_item, draws, notes = {}, {}, {}, {}, {}
    if kind.intervals:
        # Every seed on the task's draws: the mean over seeds then has draws of its own (metrics/seed_mean.py).
        scored = kind.score(card, probe, *split_data["test"], with_intervals=True, groups=test_clusters[1],
                            seed=task_draw_seed(card.name), unit=test_clusters[0])
        draws = {TEST_DRAWS: {k[:-len(DRAWS_SUFFIX)]: scored.pop(k) for k in list(scored) if k.endswith(DRAWS_SUFFIX)}}
        found = {k[:-len(NOTE_SUFFIX)]: scored.pop(k) for k in list(scored) if k.endswith(NOTE_SUFFIX)}
        notes = {"intervals_95_notes": {"test": found}} if found else {}
        if IMAGE_CONFUSIONS in scored:  # segmentation: per-image pixel counts, what a paired comparison resamples
            per_item = {"test_confusions": scored.pop(IMAGE_CONFUSIONS)}
        if ITEM_PREDICTIONS in scored:  # regression: each test item's predicted targets, resampled the same way
            per_item = {"test_predictions": scored.pop(ITEM_PREDICTIONS)}
        intervals = {"test": {k[:-3]: list(v) for k, v in scored.items() if k.endswith("_ci")}}
        unit = {"intervals_95_unit": test_clusters[0]}  # what the bootstrap resampled: patient, slide, image, tile
        metrics["test"] = {k: v for k, v in scored.items() if not k.endswith("_ci")}
    return {**_recipe_fields(recipe), "seed": seed, "selected_params": probe.selected_params_,
            "metrics": metrics, "intervals_95": intervals, **notes, **unit, "fit_s": time.perf_counter() - started,
            **test_proba, **per_item, **draws}


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
