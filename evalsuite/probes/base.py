"""The two probe contracts the runner knows (scikit-learn style: hyper-parameters in __init__, state after fit).

`FittedProbe`: fit on train, with val choosing the hyper-parameters by the card's selection
metric; the task kind's scorer then reads the fitted probe on each split (`predict_proba` for
classification, `confusion_matrix` for segmentation). `SplitScoringProbe`: scores whole splits
itself (few-shot draws many support sets) and reports intervals of its own unit.
Both take (num_classes, device, seed, **recipe params) and set `selected_params_`.

A recipe's params are checked against the probe's `__init__` signature before any extraction
(probes/_validate.py, `check_recipe_params`): the annotation is the type, and `PARAM_RULES` names the range of a
parameter where the type alone does not say it (an integer is a count, >= 1, and a list a grid of distinct values,
unless a rule says otherwise).

Which splits a probe reads (`splits_read`, from its class attributes) decides which splits a run extracts
(runner.py): a probe that learns from train is fitted there and scored on every split; one that learns nothing
(zero-shot) reads test, and val only where val has a choice to make.
"""

import abc
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """The values a numeric parameter (or each value of its list) takes; `layers`: a list of layer widths, whose
    values may repeat and which may be empty (no layer), not a grid; `multiple_of`: another parameter this one must
    be a multiple of."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    layers: bool = False
    multiple_of: str | None = None

    def excludes(self, value) -> bool:
        return (self.low is not None and (value <= self.low if self.low_open else value < self.low)) or \
            (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def words(self) -> str:
        low = f"{'>' if self.low_open else '>='} {self.low:g}" if self.low is not None else ""
        high = f"{'<' if self.high_open else '<='} {self.high:g}" if self.high is not None else ""
        return " and ".join(part for part in (low, high) if part)


COUNT = Bound(1)  # every integer parameter's rule unless PARAM_RULES names another: epochs, batch sizes, ks, dims
NON_NEGATIVE = Bound(0)
POSITIVE = Bound(0, low_open=True)
DROPOUT = Bound(0, 1, high_open=True)


ALL_BUT_VECTORS = ("class", "mask", "survival")
SPLITS = ("train", "val", "test")
PROMPT_SETS = "prompt_sets"  # in `val_chooses_among`: the card's zeroshot: template sets (the class texts' keys)


class FittedProbe(abc.ABC):
    inputs = "vectors"  # what it reads: "vectors" [N, D], "tokens" [N, h, w, D] or "bags" (features.bags.SlideBags)
    targets = ALL_BUT_VECTORS  # the task kinds' `target`s it learns (tasks/kinds.py); regression probes: ("vector",)
    chooses_on_val = True  # whether val picks its hyper-parameters (refused where val is another split's items)
    # Whether the probe reads train (fits on it, or searches it). False (zero-shot): train is neither extracted nor
    # scored for it, and val only where `val_chooses_among` leaves more than one choice (`splits_read`).
    learns_from_train = True
    val_chooses_among: tuple = ()  # recipe parameters (lists) and/or PROMPT_SETS whose combinations val chooses from
    PARAM_RULES: dict = {}  # {recipe parameter: Bound} where the type alone does not say the range
    seed: int
    selected_params_: dict

    @abc.abstractmethod
    def fit(self, features, labels, val_features, val_labels, selection_metric: str):
        """Train on (features, labels); choose hyper-parameters on val; return self."""


class SplitScoringProbe(abc.ABC):
    inputs = "vectors"
    targets = ALL_BUT_VECTORS
    chooses_on_val = True
    learns_from_train = True  # as FittedProbe's
    val_chooses_among: tuple = ()
    PARAM_RULES: dict = {}
    seed: int
    selected_params_: dict
    interval_unit: str  # what its intervals are, recorded as the run JSON's `intervals_95_unit`

    @abc.abstractmethod
    def evaluate(self, split_data: dict, split: str = "test") -> tuple[dict, dict]:
        """({metric: value}, {metric: [low, high]}) on `split` of {split: (features, labels)}."""


def splits_read(probe_class, params: dict, context: dict) -> tuple:
    """The splits a probe of `probe_class` with recipe `params` and run `context` reads, in SPLITS order.

    A probe that learns from train reads all three (fitted on train, chosen on val, scored on each). One that does
    not (zeroshot, mizero, text_retrieval) reads test, and val when val chooses among more than one combination of
    `val_chooses_among`: the card's prompt sets (PROMPT_SETS, counted in the class texts of `context`) and the
    recipe's list parameters (mizero's `topj`; a parameter the recipe leaves out counts its default)."""
    if probe_class.learns_from_train:
        return SPLITS
    choices = 1
    for name in probe_class.val_chooses_among:
        choices *= _choice_count(probe_class, name, params, context)
    return ("val", "test") if choices > 1 else ("test",)


def _choice_count(probe_class, name: str, params: dict, context: dict) -> int:
    if name == PROMPT_SETS:
        texts = context.get("class_texts")
        return len(texts.embeddings) if texts is not None else 1
    if name in params:
        value = params[name]
    else:
        default = inspect.signature(probe_class.__init__).parameters.get(name)
        value = default.default if default is not None else None
    return len(value) if isinstance(value, (list, tuple)) else 1
