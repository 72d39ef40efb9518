"""The two probe contracts the runner knows (scikit-learn style: hyper-parameters in __init__, state after fit).

`FittedProbe`: fit on train, with val choosing the hyper-parameters by the card's selection
metric; the task kind's scorer then reads the fitted probe on each split (`predict_proba` for
classification, `confusion_matrix` for segmentation). `SplitScoringProbe`: scores whole splits
itself (few-shot draws many support sets) and reports intervals of its own unit.
Both take (num_classes, device, seed, **recipe params) and set `selected_params_`.
"""

import abc


ALL_BUT_VECTORS = ("class", "mask", "survival")


class FittedProbe(abc.ABC):
    inputs = "vectors"  # what it reads: "vectors" [N, D], "tokens" [N, h, w, D] or "bags" (features.bags.SlideBags)
    targets = ALL_BUT_VECTORS  # the task kinds' `target`s it learns (tasks/kinds.py); regression probes: ("vector",)
    chooses_on_val = True  # whether val picks its hyper-parameters (refused where val is another split's items)
    seed: int
    selected_params_: dict

    @abc.abstractmethod
    def fit(self, features, labels, val_features, val_labels, selection_metric: str):
        """Train on (features, labels); choose hyper-parameters on val; return self."""


class SplitScoringProbe(abc.ABC):
    inputs = "vectors"
    targets = ALL_BUT_VECTORS
    chooses_on_val = True
    seed: int
    selected_params_: dict
    interval_unit: str  # what its intervals are, recorded as the run JSON's `intervals_95_unit`

    @abc.abstractmethod
    def evaluate(self, split_data: dict, split: str = "test") -> tuple[dict, dict]:
        """({metric: value}, {metric: [low, high]}) on `split` of {split: (features, labels)}."""
