"""Task cards: declarative YAML metadata for one evaluation task (the MTEB idea).

A card names its reader and the reader's arguments, the classes, the splits, the metric
used to select probe hyper-parameters on val, and the probes run by default.
"""

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.names import check_identifier
from evalsuite.tasks.kinds import DEFAULT_LAYERS, KINDS
from evalsuite.tasks.resources import cards_dir, find_yaml, read_yaml_mapping

PROMPTS_FIELD = "zeroshot"  # the card's zero-shot prompts (evalsuite.probes.texts.class_texts)
PROMPT_KEYS = ("source", "class_names", "templates")  # what a `zeroshot:` block may hold


@dataclass(frozen=True)
class TaskCard:
    name: str
    kind: str
    reader: str
    reader_args: dict
    classes: list
    splits: list
    selection_metric: str
    probes: list
    path: Path
    sha256: str
    # What cached image features depend on: the card without its zero-shot prompts, so a card that gains or edits
    # prompts keeps its image caches (the text cache keys the prompts themselves).
    features_sha256: str = ""
    description: str = ""
    data_root: str | None = None
    classes_closed: bool = False  # a class folder on disk that is not in `classes` is an error, not a note
    pooling: str | None = None  # token models' classification embedding for this task (None: each model's own)
    group: str | None = None  # metadata column naming each tile's site/scanner/stain (docs/group_robustness.md)
    ordinal: bool = False  # classes are ordered grades (label i = classes[i]): the quadratic weighted kappa is added
    extra: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def targets(self) -> list | str | None:
        """A regression card's target names, or the .json file under the data root that holds them."""
        return self.extra.get("targets")


def find_card(task: str) -> Path:
    """Resolve `--task` given as a card name (shipped) or as a path to a .yaml file."""
    return find_yaml(task, cards_dir(), "task card", "task")


def load_card(task: str) -> TaskCard:
    path = find_card(task)
    raw, sha256 = read_yaml_mapping(path, "task card")
    return _card_from_mapping(raw, path, sha256)


def _features_sha256(raw: dict) -> str:
    fields = {k: v for k, v in raw.items() if k != PROMPTS_FIELD}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def _field(raw: dict, path: Path, name: str, kind: type, required: bool = True):
    if name not in raw:
        if required:
            raise EvalsuiteError(f"task card {path}: missing required field '{name}'")
        return None
    value = raw[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise EvalsuiteError(
            f"task card {path}: field '{name}' must be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _string_list(raw: dict, path: Path, name: str) -> list:
    values = _field(raw, path, name, list)
    if not values or not all(isinstance(v, str) and v for v in values):
        raise EvalsuiteError(f"task card {path}: field '{name}' must be a non-empty list of strings")
    if len(set(values)) != len(values):
        raise EvalsuiteError(f"task card {path}: field '{name}' has duplicate entries")
    return values


def _check_prompt_keys(raw: dict, path: Path) -> None:
    """A typo in the `zeroshot:` block (`classnames_typo`) would drop the user's prompts without a word: refused on
    every run of the card, as a sweep file's unknown keys are, not only where a text probe reads the block."""
    block = raw.get(PROMPTS_FIELD)
    unknown = [key for key in block if key not in PROMPT_KEYS] if isinstance(block, dict) else []
    if unknown:
        raise EvalsuiteError(f"task card {path}: unknown key '{PROMPTS_FIELD}.{unknown[0]}'; known: "
                             f"{', '.join(sorted(PROMPT_KEYS))}")


def _card_from_mapping(raw: dict, path: Path, sha256: str) -> TaskCard:
    name = _field(raw, path, "name", str)
    # The name is a cell of every table and CSV (leaderboard, wide table, heatmap): a line break or comma breaks them.
    check_identifier(name, f"task card {path}: field 'name'", "my_task")
    kind = _field(raw, path, "kind", str)
    if kind not in KINDS:
        raise EvalsuiteError(f"task card {path}: field 'kind' must be one of {', '.join(KINDS)}, got '{kind}'")
    reader = _field(raw, path, "reader", dict)
    reader_name = _field(reader, path, "name", str) if "name" in reader else None
    if reader_name is None:
        raise EvalsuiteError(f"task card {path}: missing required field 'reader.name'")
    reader_args = reader.get("args") or {}
    if not isinstance(reader_args, dict):
        raise EvalsuiteError(f"task card {path}: field 'reader.args' must be a mapping")
    # A survival card predicts a risk and a regression card named float targets, not a class: no classes.
    classes = _string_list(raw, path, "classes") if KINDS[kind].has_classes else []
    if not KINDS[kind].has_classes and "classes" in raw:
        raise EvalsuiteError(f"task card {path}: a {kind} card has no 'classes' (it predicts "
                             f"{'time and event' if KINDS[kind].target == 'survival' else 'its targets'})")
    splits = _string_list(raw, path, "splits")
    missing_splits = [s for s in KINDS[kind].required_splits if s not in splits]
    if missing_splits:
        raise EvalsuiteError(f"task card {path}: field 'splits' must include {', '.join(missing_splits)}")
    selection_metric = _field(raw, path, "selection_metric", str)
    allowed_metrics = KINDS[kind].selection_metrics
    if selection_metric not in allowed_metrics:
        raise EvalsuiteError(f"task card {path}: field 'selection_metric' must be one of {', '.join(allowed_metrics)} "
                             f"for a {kind} card, got '{selection_metric}'")
    _check_fields_of_other_kinds(raw, path, kind)
    _check_prompt_keys(raw, path)
    pooling = _field(raw, path, "pooling", str, required=False)
    KINDS[kind].check_card(raw, path, classes)
    probes = _string_list(raw, path, "probes")
    known = {"name", "kind", "reader", "classes", "splits", "selection_metric", "probes", "description", "data_root",
             "classes_closed", "pooling", "group", "ordinal"}  # `layers` stays in `extra`: dense_layers() reads it
    return TaskCard(
        name=name,
        kind=kind,
        reader=reader_name,
        reader_args=reader_args,
        classes=classes,
        splits=splits,
        selection_metric=selection_metric,
        probes=probes,
        path=path.resolve(),
        sha256=sha256,
        features_sha256=_features_sha256(raw),
        description=_field(raw, path, "description", str, required=False) or "",
        data_root=_field(raw, path, "data_root", str, required=False),
        classes_closed=bool(_field(raw, path, "classes_closed", bool, required=False)),
        pooling=pooling,
        group=_group_column(raw, path, kind),
        ordinal=bool(_field(raw, path, "ordinal", bool, required=False)),
        extra={k: v for k, v in raw.items() if k not in known},
    )


def _group_column(raw: dict, path: Path, kind: str) -> str | None:
    """`group`: the reader's metadata column whose value (site, scanner, stain) the robustness index asks the
    embedding to ignore (docs/group_robustness.md)."""
    column = _field(raw, path, "group", str, required=False)
    if column is None:
        return None
    if not column.strip():
        raise EvalsuiteError(f"task card {path}: field 'group' must name a manifest column, e.g. group: site")
    facts = KINDS[kind]  # the index compares one pooled embedding and one class per image
    if facts.dense or facts.bags or facts.target != "class":
        raise EvalsuiteError(f"task card {path}: field 'group' applies to tile classification cards only")
    return column.strip()


def _check_fields_of_other_kinds(raw: dict, path: Path, kind: str) -> None:
    for name in sorted({name for other in KINDS.values() for name in other.card_fields}):
        if name in raw and name not in KINDS[kind].card_fields:
            kinds = [other.name for other in KINDS.values() if name in other.card_fields]
            kinds = " and ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)
            raise EvalsuiteError(f"task card {path}: field '{name}' applies to {kinds} cards only")


def dense_layers(card: TaskCard) -> tuple:
    """Blocks whose patch tokens a segmentation card caches (concatenated along the width); default (-1,)."""
    return tuple(card.extra.get("layers", DEFAULT_LAYERS))
