"""Which way each metric is better: the one table that every ranking, probe choice on val, best set, rank
interval, floor, Pareto front and `leaderboard --compare` verdict reads (through `higher_is_better`).

A name is resolved in this order:
1. exact names (`DIRECTIONS`): the scores of every task kind, the calibration errors, the run columns;
2. names made from another metric take that metric's direction: `<metric>_ci`, `<metric>_draws` and
   `<metric>_interval_note` (a split scorer's interval, bootstrap draws and interval note), `<metric>_<k>shot` (the
   few-shot probe's mean over support sets), `<metric>_delta_<transform>` (robustness: transformed minus clean, so
   better the same way as <metric>);
3. families whose names carry a class, a k, a transform or a target: `FAMILIES`, by prefix or suffix.
A name none of these covers has no direction and `higher_is_better` refuses it with a one-line error, so a metric
added without a direction fails tests/reporting/test_metric_directions.py instead of being ranked upside down.
The names are written out here (not imported from the modules that emit them) so that this module imports nothing
and every reader can use it; the test collects the emitted names from those modules and checks them against it.
"""

import re

from evalsuite.errors import EvalsuiteError

HIGHER, LOWER = "higher", "lower"

DIRECTIONS = {
    # classification and slide tasks (metrics/classification.py, ordinal.py)
    "balanced_accuracy": HIGHER, "f1_macro": HIGHER, "accuracy": HIGHER, "auroc_macro_ovr": HIGHER,
    "quadratic_kappa": HIGHER,
    # calibration errors of the same probabilities (metrics/calibration.py)
    "ece": LOWER, "mce": LOWER, "brier": LOWER, "nll": LOWER,
    # regression (metrics/regression.py): mse is an error
    "pearson": HIGHER, "spearman": HIGHER, "r2": HIGHER, "mse": LOWER,
    # survival (metrics/survival.py), segmentation means (metrics/segmentation.py), group robustness
    "c_index": HIGHER, "dice_fg_mean": HIGHER, "iou_fg_mean": HIGHER, "dice_mean": HIGHER, "iou_mean": HIGHER,
    "robustness_index": HIGHER,
    # leaderboard columns `--metric` may name (reporting/table/wide.py RUN_COLUMN_METRICS): images per second
    "throughput_img_s": HIGHER, "forward_img_s": HIGHER,
}

# (prefix or None, suffix or None, direction) of the names that carry a class, k, transform or target, in the order
# they are tried: suffixes first, because `dice_mean_fold_std` is a spread, not a Dice score.
FAMILIES = (
    (None, "_undefined_targets", LOWER),  # regression: how many targets the mean left out as undefined
    (None, "_fold_std", LOWER),  # cross-validated tasks: the spread over folds (results/folds.py), steadier is better
    ("dice_", None, HIGHER), ("iou_", None, HIGHER),  # segmentation: per class, named after the card's classes
    ("retrieval_", None, HIGHER),  # retrieval_acc@k, retrieval_mvacc@k, retrieval_map@k (metrics/retrieval.py)
    ("plism_", None, HIGHER),  # PLISM consistency (metrics/plism.py): cosines and top-k accuracies, means and medians
    ("cosine_", None, HIGHER),  # robustness: clean-to-transformed cosine similarity (mean, median) per transform
    # text-image retrieval (metrics/text_retrieval.py): text_to_image_recall@k, image_to_text_recall@k
    ("text_to_image_recall@", None, HIGHER), ("image_to_text_recall@", None, HIGHER),
)

# A name made from another metric: group 1 is that metric.
_DERIVED = (re.compile(r"(.+)_(?:ci|draws|interval_note)"), re.compile(r"(.+)_\d+shot"),
            re.compile(r"(.+)_delta_[^_].*"))


def direction(metric: str) -> str | None:
    """HIGHER or LOWER is better for `metric`, or None when it has no declared direction."""
    if metric in DIRECTIONS:
        return DIRECTIONS[metric]
    for pattern in _DERIVED:
        match = pattern.fullmatch(metric)
        if match and direction(match.group(1)) is not None:
            return direction(match.group(1))
    for prefix, suffix, way in FAMILIES:
        if (prefix is None or metric.startswith(prefix)) and (suffix is None or metric.endswith(suffix)):
            return way
    return None


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of `metric` is better; a metric without a declared direction is refused rather than
    ranked as if higher were better (which put the largest MSE first)."""
    way = direction(metric)
    if way is None:
        raise EvalsuiteError(f"metric '{metric}' has no declared direction (higher or lower is better), so it cannot "
                             "be ranked; its rows come from another evalsuite version or an edited leaderboard: pass "
                             "--metric with a metric this version knows, or declare it in evalsuite/metrics/"
                             "directions.py")
    return way == HIGHER
