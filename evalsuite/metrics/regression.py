"""Regression metrics: a float target vector per item (e.g. HEST-Benchmark's expression of 50 genes per spot).

Each metric is computed per target and then averaged over the targets, as HEST reports its Pearson r:
- pearson (the headline): Pearson r of the target and its prediction (scipy.stats.pearsonr);
- spearman: Pearson r of their average ranks, ties sharing the mean of their positions (scipy.stats.spearmanr);
- mse: mean squared error (sklearn mean_squared_error, multioutput='uniform_average'); lower is better;
- r2: coefficient of determination 1 - SSE / SST (sklearn r2_score, multioutput='uniform_average').

Undefined values. A target constant on the split makes its Pearson r, Spearman rho and R^2 undefined; a
prediction constant on the split makes its Pearson r and Spearman rho undefined (R^2 stays defined). Such a
target is NaN in `per_target_metrics` and left out of the mean over targets; `regression_split_metrics` then
reports how many were left out (`pearson_undefined_targets`, which count Spearman's too, and
`r2_undefined_targets`) only when there are any. sklearn's r2_score would score a constant target 0 or 1
(force_finite) instead; its force_finite=False gives our per-target values. The REGRESSION_METRICS functions
return NaN when no target is defined, which probes read as the worst score while selecting hyper-parameters
(a collapsed fit predicts a constant); the scorer instead raises a one-line EvalsuiteError naming a target and
why, and so it does for a split of one item. A bootstrap draw gets the same rule: its mean is over the
targets defined in that draw, NaN when none is, and the percentiles skip NaN draws.

Weighted forms (bootstrap.py): a draw is a vector of item weights (how often each item was drawn), and every
metric of the weighted items equals the metric of the rows repeated that often. Pearson, MSE and R^2 are
weighted sums of products, one matrix product per block of draws for all targets; Spearman needs the ranks of
the resampled rows, which depend on the draw: in value order, a tie group holding weight c after weight C of
smaller values takes the positions C + 1 .. C + c, so its average rank is C + (c + 1) / 2 (one cumulative sum
per target and block). Constancy is decided exactly (one tie group holds all the drawn weight), not from a
variance that rounding leaves a hair above zero.
"""

import warnings
from itertools import islice

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, cluster_index, draw_weights, percentile_interval
from evalsuite.metrics.shown_intervals import with_draws

DRAW_BLOCK_BYTES = 32 * 1024**2  # the item-by-draw arrays of one block of bootstrap draws take about this
# The test scorer's float32 [items, targets] predictions, which the run stores for paired tests (never in the JSON).
ITEM_PREDICTIONS = "item_predictions"
_BLOCK_ARRAYS = 8  # [items, draws] float64 arrays alive at once in the Spearman sweep of one target


def check_regression_targets(targets, what: str, training: bool = False, names=None) -> np.ndarray:
    """`targets` as float64 [items, targets] (a 1-D vector: one target); a one-line EvalsuiteError saying what to fix
    otherwise. `training`: the split fits a probe, so every target must vary. `names`: one per target, for messages."""
    targets = np.asarray(targets)
    if targets.ndim == 1:
        targets = targets.reshape(-1, 1)
    if targets.ndim != 2 or not np.issubdtype(targets.dtype, np.number):
        raise EvalsuiteError(f"{what}: regression targets must be numbers [items, targets] (a 1-D vector for one "
                             f"target), got shape {targets.shape} of {targets.dtype}; check the reader's target "
                             "columns")
    targets = targets.astype(np.float64, copy=False)
    if targets.size == 0:
        raise EvalsuiteError(f"{what}: no {'items' if len(targets) == 0 else 'targets'} (shape {targets.shape}); "
                             "check the task card's splits and targets")
    bad_item, bad_target = np.nonzero(~np.isfinite(targets))
    if len(bad_item):
        item, target = bad_item[0], bad_target[0]
        raise EvalsuiteError(f"{what}: {_target(target, names)} of item {item} is {targets[item, target]} "
                             f"({len(bad_item)} values in all); give every item a finite value of every target "
                             "(drop the items or targets with missing values in the reader)")
    if training:
        if len(targets) < 2:
            raise EvalsuiteError(f"{what}: one item; a probe needs at least two to learn a target: check the task "
                                 "card's splits")
        constant = np.flatnonzero((targets == targets[0]).all(axis=0))
        if len(constant):
            raise EvalsuiteError(f"{what}: {_target(constant[0], names)} is constant ({targets[0, constant[0]]}) on "
                                 f"all {len(targets)} items ({len(constant)} targets in all); Pearson r is undefined "
                                 "for it and a probe cannot learn it: drop it from the card's targets or use a split "
                                 "where it varies")
    return targets


def _target(index: int, names) -> str:
    return f"target {index} ({names[index]})" if names is not None and index < len(names) else f"target {index}"


class _Split:
    """One split's targets and predictions [items, targets], sorted once; `per_target(weights)` scores any draws."""

    def __init__(self, targets: np.ndarray, predictions: np.ndarray):
        # Centred columns keep the one-pass sums of squares below far from cancelling; r and R^2 are shift-invariant.
        y, p = targets - targets.mean(axis=0), predictions - predictions.mean(axis=0)
        self.columns = np.concatenate([y, p, y * y, p * p, y * p, (targets - predictions) ** 2], axis=1)
        self.sorted = []
        for j in range(targets.shape[1]):
            by_target, by_prediction = _TieGroups(targets[:, j]), _TieGroups(predictions[:, j])
            # The prediction's tie group of each item, in the target's order: one gather aligns the two rankings.
            aligned = by_prediction.group[np.argsort(by_prediction.order)[by_target.order]]
            self.sorted.append((by_target, by_prediction, aligned))

    def per_target(self, weights: np.ndarray) -> dict:
        """{metric: [targets, draws]} of the items repeated `weights` [items, draws] times; NaN where undefined."""
        block = max(1, DRAW_BLOCK_BYTES // (8 * _BLOCK_ARRAYS * len(weights)))
        parts = [self._block(weights[:, first:first + block]) for first in range(0, weights.shape[1], block)]
        return {name: np.concatenate([part[name] for part in parts], axis=1) for name in parts[0]}

    def _block(self, weights: np.ndarray) -> dict:
        total = weights.sum(axis=0)
        sum_y, sum_p, sum_yy, sum_pp, sum_yp, squared_error = np.split(self.columns.T @ weights, 6)
        # Weighted sums of squares about the weighted means (total times the variance or covariance).
        var_y, var_p = sum_yy - sum_y**2 / total, sum_pp - sum_p**2 / total
        cov = sum_yp - sum_y * sum_p / total
        spearman = np.empty_like(cov)
        constant_y, constant_p = np.empty(cov.shape, bool), np.empty(cov.shape, bool)
        for j, sorted_j in enumerate(self.sorted):
            spearman[j], constant_y[j], constant_p[j] = _weighted_spearman(*sorted_j, weights, total)
        undefined = constant_y | constant_p
        with np.errstate(divide="ignore", invalid="ignore"):
            pearson = np.clip(cov / np.sqrt(var_y * var_p), -1.0, 1.0)
            r2 = 1.0 - squared_error / var_y
        return {"pearson": np.where(undefined, np.nan, pearson), "spearman": np.where(undefined, np.nan, spearman),
                "mse": squared_error / total, "r2": np.where(constant_y, np.nan, r2)}


class _TieGroups:
    """One column in ascending order: its sort order, each sorted item's tie group and each group's last position."""

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        ordered = values[self.order]
        change = ordered[1:] != ordered[:-1]
        self.group = np.concatenate([[0], np.cumsum(change)])
        self.last = np.flatnonzero(np.concatenate([change, [True]]))
        self.tied = len(self.last) < len(values)

    def ranks(self, weights: np.ndarray, total: np.ndarray):
        """(items' weights in this order [items, draws], each group's average rank minus the mean rank and its
        weight [groups, draws], whether the drawn items all tie [draws]) of the rows repeated `weights` times."""
        ordered = np.take(weights, self.order, axis=0)
        through = np.cumsum(ordered, axis=0)
        if self.tied:
            # Adding an exact zero leaves a running sum unchanged, so an undrawn group's weight is exactly 0.
            through = np.take(through, self.last, axis=0)
            weight = np.diff(through, axis=0, prepend=0.0)
        else:
            weight = ordered
        # A group's ranks run through - weight + 1 .. through; their mean minus the mean rank (total + 1) / 2:
        centred = weight + total
        centred *= -0.5
        centred += through
        return ordered, centred, weight, np.count_nonzero(weight, axis=0) < 2


def _weighted_spearman(by_target: _TieGroups, by_prediction: _TieGroups, aligned: np.ndarray, weights: np.ndarray,
                       total: np.ndarray):
    """(Spearman rho [draws], target constant [draws], prediction constant [draws]) of one target's rows repeated
    `weights` times: the weighted Pearson r of the draw's average ranks."""
    ordered, rank_y, weight_y, constant_y = by_target.ranks(weights, total)
    _, rank_p, weight_p, constant_p = by_prediction.ranks(weights, total)
    item_rank_y = np.take(rank_y, by_target.group, axis=0) if by_target.tied else rank_y
    cross = np.einsum("ij,ij,ij->j", ordered, item_rank_y, np.take(rank_p, aligned, axis=0))
    spread = np.einsum("ij,ij,ij->j", weight_y, rank_y, rank_y) * np.einsum("ij,ij,ij->j", weight_p, rank_p, rank_p)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(cross / np.sqrt(spread), -1.0, 1.0), constant_y, constant_p


def _as_pair(targets, predictions) -> tuple[np.ndarray, np.ndarray]:
    targets, predictions = (np.asarray(v, dtype=np.float64) for v in (targets, predictions))
    targets, predictions = (v.reshape(-1, 1) if v.ndim == 1 else v for v in (targets, predictions))
    if targets.shape != predictions.shape:
        raise ValueError(f"targets of shape {targets.shape}, predictions of shape {predictions.shape}")
    return targets, predictions


def per_target_metrics(targets, predictions) -> dict:
    """{metric: float64 [targets]} of predictions [items, targets] (1-D: one target); NaN where undefined."""
    targets, predictions = _as_pair(targets, predictions)
    values = _Split(targets, predictions).per_target(np.ones((len(targets), 1)))
    return {name: value[:, 0] for name, value in values.items()}


def _mean_over_defined(per_target: np.ndarray, axis: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all targets undefined: NaN, said once by the scorer
        return np.nanmean(per_target, axis=axis)


def _metric(name: str):
    def metric(targets, predictions) -> float:
        return float(_mean_over_defined(per_target_metrics(targets, predictions)[name]))

    metric.__name__ = f"mean_{name}"
    return metric


# name -> fn(targets [items, targets], predictions [items, targets]) -> the mean over the defined targets (NaN if none)
REGRESSION_METRICS = {name: _metric(name) for name in ("pearson", "spearman", "mse", "r2")}


def weighted_regression_metrics(targets, predictions, weights) -> dict:
    """{metric: float64 [draws]}: each metric of the rows repeated `weights` [items, draws] times (a 1-D vector: one
    draw), the mean over the targets defined in that draw (NaN if none). All weights 1: REGRESSION_METRICS."""
    targets, predictions = _as_pair(targets, predictions)
    weights = np.asarray(weights, dtype=np.float64)
    weights = weights.reshape(-1, 1) if weights.ndim == 1 else weights
    if len(weights) != len(targets):
        raise ValueError(f"{len(weights)} weights for {len(targets)} items")
    per_target = _Split(targets, predictions).per_target(weights)
    return {name: _mean_over_defined(values, axis=0) for name, values in per_target.items()}


def regression_intervals(targets, predictions, groups=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                         confidence: float = CONFIDENCE) -> dict:
    """{metric: (low, high)}: percentile bootstrap interval over resampled clusters (`groups`: one id per item, e.g.
    its patient or slide; None: items), drawn as bootstrap.py draws; (nan, nan) with fewer than two clusters."""
    drawn = regression_draw_scores(targets, predictions, groups, draws, seed)
    return {name: percentile_interval(values, confidence) for name, values in drawn.items()}


def regression_draw_scores(targets, predictions, groups=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> dict:
    """{metric: float64 [draws]}, the mean over targets in each draw (no draws with fewer than two clusters)."""
    targets, predictions = _as_pair(targets, predictions)
    if cluster_index(groups, len(targets))[1] < 2:
        return {name: np.zeros(0) for name in REGRESSION_METRICS}
    split, drawn = _Split(targets, predictions), draw_weights(groups, len(targets), draws, seed)
    block = max(1, DRAW_BLOCK_BYTES // (8 * _BLOCK_ARRAYS * len(targets)))
    values = {name: [] for name in REGRESSION_METRICS}
    while columns := list(islice(drawn, block)):
        for name, per_target in split.per_target(np.stack(columns, axis=1)).items():
            values[name].append(_mean_over_defined(per_target, axis=0))
    return {name: np.concatenate(parts) for name, parts in values.items()}


def _undefined_reason(targets: np.ndarray, predictions: np.ndarray, index: int, names) -> str:
    if (targets[:, index] == targets[0, index]).all():
        return (f"{_target(index, names)} is constant ({targets[0, index]}) on this split: drop it from the card's "
                "targets or use a larger split")
    return (f"the probe predicted the same value ({predictions[0, index]}) for every item of {_target(index, names)}: "
            "its fit collapsed to a constant (e.g. too strong a weight decay; widen the probe's grid)")


def regression_split_metrics(card, probe, features, targets, with_intervals: bool = False, groups=None,
                             seed: int = 0, unit: str = "cluster") -> dict:
    """The scorer of kind `regression`: {metric: mean over targets} of a fitted probe's `predict(features)` [items,
    targets] on one split, plus `pearson_undefined_targets` / `r2_undefined_targets` when targets were left out;
    with intervals also {metric + "_ci": (low, high)} from the bootstrap (drawn with `seed`) over the clusters
    `groups` (one id per item; None: items). Targets are named after `card.targets` when it lists one per target."""
    what = f"task {getattr(card, 'name', '?')}: regression scoring"
    targets = np.asarray(targets)
    count = targets.shape[1] if targets.ndim == 2 else 1
    names = getattr(card, "targets", None)
    names = names if isinstance(names, (list, tuple)) and len(names) == count else None
    targets = check_regression_targets(targets, what, names=names)
    predictions = np.asarray(probe.predict(features), dtype=np.float64)
    predictions = predictions.reshape(-1, 1) if predictions.ndim == 1 else predictions
    if predictions.shape != targets.shape:
        raise EvalsuiteError(f"{what}: the probe predicted shape {predictions.shape} for targets of shape "
                             f"{targets.shape}; it was fitted on other targets: refit it on this card's targets")
    if not np.isfinite(predictions).all():
        item, index = np.argwhere(~np.isfinite(predictions))[0]
        raise EvalsuiteError(f"{what}: the probe predicted {predictions[item, index]} for {_target(index, names)} of "
                             f"item {item}; its fit diverged (try a lower lr or a stronger weight decay)")
    if len(targets) == 1:
        raise EvalsuiteError(f"{what}: the split has one sample; Pearson r and R^2 are undefined on one item: give "
                             "the split more items")
    per_target = per_target_metrics(targets, predictions)
    undefined = np.isnan(per_target["pearson"])
    if undefined.all():
        raise EvalsuiteError(f"{what}: Pearson r is undefined for all {len(undefined)} targets; "
                             f"{_undefined_reason(targets, predictions, 0, names)}")
    metrics = {name: float(_mean_over_defined(values)) for name, values in per_target.items()}
    for name, values in (("pearson", undefined), ("r2", np.isnan(per_target["r2"]))):
        if values.any():
            metrics[f"{name}_undefined_targets"] = int(values.sum())
    if with_intervals:
        metrics.update(with_draws(regression_draw_scores(targets, predictions, groups, seed=seed), metrics,
                                  cluster_index(groups, len(targets))[1], unit))
        metrics[ITEM_PREDICTIONS] = predictions.astype(np.float32)
    return metrics
