"""Input checks shared by probes, with errors that say what to fix."""

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.regression import check_regression_targets


def check_features_labels(features, labels, num_classes: int, what: str) -> np.ndarray:
    labels = np.asarray(labels)
    if getattr(features, "ndim", None) != 2:
        shape = getattr(features, "shape", None)
        raise EvalsuiteError(f"{what}: features must be 2-D [samples, dim], got shape {shape}")
    if len(features) != len(labels):
        raise EvalsuiteError(f"{what}: {len(features)} feature rows but {len(labels)} labels")
    if len(labels) == 0:
        raise EvalsuiteError(f"{what}: no samples; check the task card's splits and data")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise EvalsuiteError(f"{what}: label {int(labels.max() if labels.max() >= num_classes else labels.min())} "
                             f"is outside 0..{num_classes - 1}; check the card's classes")
    return labels.astype(np.int64, copy=False)


def check_two_classes_per_split(labels_by_split: dict, classes: list, skipped_by_split: dict | None = None) -> None:
    """Every split holds at least two classes: a probe cannot learn from one, and one scores balanced accuracy
    1.000 for predicting it. `skipped_by_split`: {split: [{"slide": id, ...}]} left out by --skip-bad-slides,
    named in the refusal so the user sees what the skip cost."""
    for split, labels in labels_by_split.items():
        present = np.unique(np.asarray(labels))
        if len(present) >= 2:
            continue
        names = ", ".join(classes[int(c)] if 0 <= int(c) < len(classes) else str(int(c)) for c in present) or "none"
        left = f"only class {names} ({len(labels)} items)"
        skipped = [s.get("slide", "?") for s in (skipped_by_split or {}).get(split, [])]
        if skipped:
            shown = ", ".join(map(str, skipped[:5])) + (" ..." if len(skipped) > 5 else "")
            raise EvalsuiteError(f"refusing to score the {split} split: --skip-bad-slides left out {len(skipped)} "
                                 f"slide(s) ({shown}) and {left} is left; one class cannot be scored (balanced "
                                 "accuracy would be 1.000): fix those slides or add slides of the other classes")
        raise EvalsuiteError(f"the {split} split has {left}; a probe needs at least two classes in every split to "
                             "be trained and scored: check the card's splits and data (or its manifest's split "
                             "column)")


def regression_target_names(card, reader) -> list | None:
    """The names of a regression card's targets: the card's list, or what its reader read from the data."""
    return card.targets if isinstance(card.targets, list) else getattr(reader, "target_names", None)


def check_regression_splits(targets_by_split: dict, names: list | None, what: str) -> None:
    """Every split's targets are finite, with as many as the card names; train's each vary (a constant one has no
    Pearson r, and a probe learns nothing from it); val and test hold two items at least (Pearson r of one item
    is undefined)."""
    for split, targets in targets_by_split.items():
        checked = check_regression_targets(targets, f"{what}: {split} split", training=split == "train", names=names)
        if names is not None and checked.shape[1] != len(names):
            raise EvalsuiteError(f"{what}: the {split} split has {checked.shape[1]} targets per item but the card "
                                 f"names {len(names)}; list one name per target")
        if len(checked) < 2:
            raise EvalsuiteError(f"{what}: the {split} split has one item; Pearson r is undefined on one item: give "
                                 "the split more items")


def require_texts(texts, probe: str, what: str = "class texts"):
    """`texts` the runner hands a vision-language probe; one line saying how to run `probe` when built without."""
    if texts is None:
        raise EvalsuiteError(f"probe {probe} needs the {what} of a vision-language model; run it through "
                             f"`evalsuite run --probes {probe}` with a vision-language --model")
    return texts


def check_text_tower(backbone, probe: str) -> None:
    """A probe that reads texts needs a model with a text tower; refused before any forward."""
    if getattr(backbone, "text", None) is None:
        raise EvalsuiteError(f"probe {probe} needs a vision-language model (a text tower): '{backbone.name}' has "
                             "none; use --model clip-vit-b-16 (`evalsuite list models`, kind vision-language)")


def check_images_map_to_joint_space(probe_class, probe: str, backbone) -> None:
    """A probe comparing cached image rows with text embeddings maps the rows into the joint space first
    (`maps_images_to_joint`, with its texts' `image_to_joint`); without that it would compare the features before a
    model's image projection with texts, so such a model is refused before any forward."""
    if backbone.text.image_to_joint.is_identity or getattr(probe_class, "maps_images_to_joint", False):
        return
    raise EvalsuiteError(f"probe {probe} does not map cached image rows into the joint image-text space, and model "
                         f"'{backbone.name}' caches its image features {backbone.probe_features.replace('_', ' ')} "
                         f"(docs/zeroshot.md, 'Which feature each probe reads'): evalsuite/probes/{probe}.py must "
                         "apply its texts' image_to_joint to each batch and set maps_images_to_joint = True")
