"""Task kinds: one table entry per kind, the one place that says what a kind of task is.

An entry says what the feature cache holds per sample, which metrics may select a probe's
hyper-parameters on val, how a fitted probe is scored on one split, whether the test split gets
bootstrap intervals, and which card fields only this kind accepts. Cards, feature preparation,
the budget and the runner read this table; a new kind is one entry here plus its reader and its
probe (docs/architecture.md walks through the steps).
"""

from dataclasses import dataclass
from typing import Callable

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.classification import METRICS, classification_split_metrics
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.plism import HEADLINE as PLISM_HEADLINE
from evalsuite.metrics.plism import consistency_metrics
from evalsuite.metrics.regression import REGRESSION_METRICS, regression_split_metrics
from evalsuite.metrics.segmentation import BACKGROUND, SEGMENTATION_METRICS, segmentation_split_metrics
from evalsuite.metrics.survival import SURVIVAL_METRICS, survival_split_metrics
from evalsuite.models.pooling import check_token_rule

DEFAULT_LAYERS = (-1,)  # a segmentation card without `layers` caches the last block's patch tokens


@dataclass(frozen=True)
class TaskKind:
    name: str
    feature: str  # "pooled": one embedding [D] per sample; "dense": the patch-token grid [h, w, D]
    selection_metrics: tuple  # metric names a card may give as `selection_metric`
    score: Callable  # (card, probe, features, labels[, with_intervals, groups]) -> {metric: value}
    intervals: bool  # the test split is scored once more with bootstrap intervals over the reader's clusters
    card_fields: tuple  # card fields only this kind accepts
    check_card: Callable  # (raw card mapping, path, classes) -> None; raises EvalsuiteError on a bad kind field
    samples: str = "images"  # "images": one cached row per sample; "slides": a bag of tile rows per sample
    # "class": a class id; "mask": a label mask; "survival": (time, event); "vector": named float targets
    target: str = "class"
    # Slide kinds: True scores patients (one bag of all a patient's tiles, one target, one bootstrap cluster each).
    per_patient: bool = False
    # False: no probe; the test split's embeddings are scored against each other by `score(card, reader, features,
    # labels) -> (metrics, details)` (consistency: PLISM's slides of the same tiles, metrics/plism.py).
    fits_probe: bool = True

    @property
    def dense(self) -> bool:
        return self.feature == "dense"

    @property
    def required_splits(self) -> tuple:
        """The splits its cards must list: a probe trains on train and is chosen on val; a kind without one reads
        test only."""
        return ("train", "val", "test") if self.fits_probe else ("test",)

    @property
    def bags(self) -> bool:
        return self.samples == "slides"

    @property
    def has_classes(self) -> bool:
        """Whether its cards list `classes` (the others predict a risk or named float targets)."""
        return self.target in ("class", "mask")


def _check_classification_card(raw: dict, path, _classes: list) -> None:
    if isinstance(raw.get("pooling"), str):
        check_token_rule(raw["pooling"], f"task card {path}: field 'pooling'")


def _check_segmentation_card(raw: dict, path, classes: list) -> None:
    if classes[0] != BACKGROUND:
        raise EvalsuiteError(f"task card {path}: a segmentation card lists '{BACKGROUND}' as its first class "
                             f"(label 0), got '{classes[0]}'")
    layers = raw.get("layers", list(DEFAULT_LAYERS))
    if not isinstance(layers, list) or not layers or not all(isinstance(v, int) and not isinstance(v, bool)
                                                             for v in layers) or len(set(layers)) != len(layers):
        raise EvalsuiteError(f"task card {path}: field 'layers' must be a non-empty list of distinct block indices "
                             f"(negative from the last block), e.g. [-1] or [-4, -3, -2, -1]")


TILING_FIELDS = {"target_mpp": float, "tile_size_px": int, "min_tissue_fraction": float, "mpp": float, "max_tiles": int}


def _check_slide_card(raw: dict, path, classes: list) -> None:
    _check_classification_card(raw, path, classes)
    tiling = raw.get("tiling", {})
    if not isinstance(tiling, dict) or set(tiling) - set(TILING_FIELDS):
        raise EvalsuiteError(f"task card {path}: field 'tiling' must be a mapping of {', '.join(TILING_FIELDS)}")
    for name, value in tiling.items():
        if value is None and name in ("mpp", "max_tiles"):
            continue
        # min_tissue_fraction 0 keeps every tile touching tissue (TRIDENT's rule; a slide-encoder run's)
        low_ok = value >= 0 if name == "min_tissue_fraction" else value > 0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low_ok \
                or (TILING_FIELDS[name] is int and not isinstance(value, int)):
            raise EvalsuiteError(f"task card {path}: tiling.{name} must be a "
                                 f"{'non-negative' if name == 'min_tissue_fraction' else 'positive'} "
                                 f"{TILING_FIELDS[name].__name__}, got {value!r}")
    if tiling.get("min_tissue_fraction", 0) > 1:
        raise EvalsuiteError(f"task card {path}: tiling.min_tissue_fraction is a fraction in (0, 1]")


def _check_regression_card(raw: dict, path, classes: list) -> None:
    _check_classification_card(raw, path, classes)
    targets = raw.get("targets")
    if not (isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets)) \
            and not (isinstance(targets, str) and targets.endswith(".json")):
        raise EvalsuiteError(f"task card {path}: a regression card names its targets: 'targets' is a list of names "
                             f"(e.g. [tumour, stroma]) or a .json file under the data root holding them (e.g. "
                             f"var_50genes.json), got {targets!r}")
    if isinstance(targets, list) and len(set(targets)) != len(targets):
        raise EvalsuiteError(f"task card {path}: field 'targets' has duplicate names")


# Probes keep the highest val score (np.argmax, `score > best`), so a card may select only on a higher-is-better
# metric: mse is reported, not selected on.
REGRESSION_SELECTION = tuple(m for m in REGRESSION_METRICS if higher_is_better(m))

KINDS = {
    "classification": TaskKind("classification", feature="pooled", selection_metrics=tuple(METRICS),
                               score=classification_split_metrics, intervals=True,
                               card_fields=("pooling", "ordinal", "zeroshot"), check_card=_check_classification_card),
    "segmentation": TaskKind("segmentation", feature="dense", selection_metrics=tuple(SEGMENTATION_METRICS),
                             score=segmentation_split_metrics, intervals=True, card_fields=("layers",),
                             check_card=_check_segmentation_card, target="mask"),
    # Slide kinds cache every tissue tile's pooled embedding, grouped by slide; their probes score slides.
    "slide": TaskKind("slide", feature="pooled", selection_metrics=tuple(METRICS), score=classification_split_metrics,
                      intervals=True, card_fields=("pooling", "tiling", "ordinal", "zeroshot"),
                      check_card=_check_slide_card, samples="slides"),
    "survival": TaskKind("survival", feature="pooled", selection_metrics=tuple(SURVIVAL_METRICS),
                         score=survival_split_metrics, intervals=True, card_fields=("pooling", "tiling", "fusion"),
                         check_card=_check_slide_card, samples="slides", target="survival",
                         per_patient=True),
    # A float vector per tile (HEST's gene expression of a spot, demo_counts' nuclei per type), scored per target.
    "regression": TaskKind("regression", feature="pooled", selection_metrics=REGRESSION_SELECTION,
                           score=regression_split_metrics, intervals=True, card_fields=("pooling", "targets"),
                           check_card=_check_regression_card, target="vector"),
    # No probe: how far a frozen embedding agrees with itself across scanners and stainings of the same tiles
    # (PLISM with plismbench's metrics); a tile's label is its slide's index.
    "consistency": TaskKind("consistency", feature="pooled", selection_metrics=(PLISM_HEADLINE,),
                            score=consistency_metrics, intervals=False, card_fields=("pooling",),
                            check_card=_check_classification_card, target="slide", fits_probe=False),
}


def task_kind(name: str) -> TaskKind:
    if name not in KINDS:
        raise EvalsuiteError(f"unknown task kind '{name}'; known kinds: {', '.join(KINDS)}")
    return KINDS[name]
