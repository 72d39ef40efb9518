"""Input checks shared by probes, with errors that say what to fix: a recipe's params against the probe's signature
(before any extraction), and the features, labels and texts a probe is handed."""

import difflib
import inspect
import json
import math
import re
import types
import typing

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.regression import check_regression_targets
from evalsuite.probes.base import COUNT, Bound

# PyYAML reads YAML 1.1, where 1e-3 (no '.') is text, not a number: taken as the number it was meant to be.
_TEXT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_UNBOUNDED = Bound()


def check_recipe_params(probe: str, probe_class, params: dict, where: str, set_by_the_run: dict) -> dict:
    """`params` (a recipe's for `probe`, read from `where`) checked against `probe_class.__init__`: every name one
    of its parameters, every value of its annotated type within the class's PARAM_RULES; returns them as the probe
    gets them (1e-3 read as text becomes the number). `set_by_the_run`: {argument: what sets it}, passed by the run."""
    accepted = recipe_parameters(probe_class, set_by_the_run)
    rules = {name: rule for klass in reversed(probe_class.__mro__)
             for name, rule in vars(klass).get("PARAM_RULES", {}).items()}
    checked = {}
    for name, value in params.items():
        if name in set_by_the_run:
            raise EvalsuiteError(f"{where}: params.{name} is set by {set_by_the_run[name]}, not by a recipe; remove it")
        if name not in accepted:
            close = "".join(f" (did you mean '{m}'?)" for m in difflib.get_close_matches(str(name), accepted, 1))
            raise EvalsuiteError(f"{where}: probe '{probe}' takes no parameter '{name}'{close}; its parameters are "
                                 f"{', '.join(accepted)}")
        checked[name] = _checked_value(name, value, _forms(accepted[name]), rules.get(name), where)
    for name, rule in rules.items():
        if rule.multiple_of:
            value, other = (checked.get(n, accepted[n].default) for n in (name, rule.multiple_of))
            if value % other:
                raise EvalsuiteError(f"{where}: params.{name} ({value}) must be a multiple of params."
                                     f"{rule.multiple_of} ({other}); change one of them")
    return checked


def recipe_parameters(probe_class, set_by_the_run) -> dict:
    """{name: inspect.Parameter} a recipe may set: the `__init__` arguments of the class, and of its bases where an
    `__init__` hands them on as **params, less those the run sets."""
    found = {}
    for klass in probe_class.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(vars(klass)["__init__"], eval_str=True).parameters.values()
        found.update({p.name: p for p in parameters if p.name not in found and p.name != "self"
                      and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)})
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return {name: parameter for name, parameter in found.items() if name not in set_by_the_run}


def _forms(parameter) -> list:
    """What a parameter takes, from its annotation (else its default's type): int, float, bool, str, None,
    ("list", element type) or ("one of", values)."""
    annotation, default = parameter.annotation, parameter.default
    if annotation is inspect.Parameter.empty:
        annotation = list[type(default[0])] if isinstance(default, (list, tuple)) and default else type(default)
    return _flattened(annotation)


def _flattened(annotation) -> list:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [form for arg in args for form in _flattened(arg)]
    if origin in (list, tuple):
        return [("list", args[0])]
    if origin is typing.Literal:
        return [("one of", args)]
    return [None if annotation is type(None) else annotation]


def _checked_value(name: str, value, forms: list, declared: Bound | None, where: str):
    for form in forms:
        matched, as_given = _matched(value, form, declared)
        if matched:
            return as_given
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise EvalsuiteError(f"{where}: params.{name} must be {' or '.join(_words(f, declared) for f in forms)}, got "
                         f"{shown}; fix it in the recipe")


def _rule(element, declared: Bound | None) -> Bound:
    return declared or (COUNT if element is int else _UNBOUNDED)


def _matched(value, form, declared: Bound | None) -> tuple[bool, object]:
    """(whether `value` is of `form` within the rule, the value as the probe gets it). bool is not an int here, nor
    an int a bool: YAML's `true` as a batch size, or 1 as a switch, is a slip."""
    if form is None or isinstance(form, tuple) and form[0] == "one of":
        return (value is None if form is None else isinstance(value, str) and value in form[1]), value
    if isinstance(form, tuple):  # a list: a grid of distinct values to choose from, unless it lists layers
        layers = _rule(form[1], declared).layers
        if not isinstance(value, list) or not (value or layers):
            return False, value
        items = [_matched(item, form[1], declared) for item in value]
        values = [item for _, item in items]
        return all(ok for ok, _ in items) and (layers or len(set(values)) == len(values)), values
    if form not in (int, float):  # bool, str
        return isinstance(value, form), value
    if form is float and isinstance(value, str) and _TEXT_NUMBER.fullmatch(value.strip()):
        value = float(value)
    numeric = isinstance(value, int) if form is int else isinstance(value, (int, float)) and math.isfinite(value)
    return numeric and not isinstance(value, bool) and not _rule(form, declared).excludes(value), value


def _words(form, declared: Bound | None) -> str:
    if form is None:
        return "null"
    if isinstance(form, tuple) and form[0] == "one of":
        return " or ".join(map(repr, form[1]))
    if isinstance(form, tuple):
        rule = _rule(form[1], declared)
        noun = {int: "integers", float: "numbers"}.get(form[1], "values")
        return f"a list of {'layer widths, ' if rule.layers else 'distinct '}{noun} {rule.words()}".rstrip()
    noun = {bool: "true or false", str: "text", int: "an integer", float: "a number"}.get(form, form.__name__)
    return f"{noun} {_rule(form, declared).words()}".rstrip() if form in (int, float) else noun


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
    if getattr(backbone, "text", None) is not None:
        return
    encoder = getattr(backbone, "slide_encoder", None)
    if encoder is not None:
        raise EvalsuiteError(f"probe {probe} needs a text tower: slide encoder '{encoder.spec.name}' has none; use "
                             "--model titan or --model prism (`evalsuite list models`, kind slide, text tower yes)")
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
