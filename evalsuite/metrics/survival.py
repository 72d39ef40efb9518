"""Survival metrics: Harrell's concordance index of a predicted risk, with a cluster-bootstrap interval.

Targets are float [slides, 2]: (time, event), event 1 = observed, 0 = censored. A higher risk means
a shorter expected survival. A pair (i, j) is comparable when i has an event and i's time is
shorter than j's, or the times tie and only i has an event (j, censored at i's event time, is
known to have outlived it); this is lifelines.utils.concordance_index's rule (lifelines takes
predicted survival times, so it gets -risk). A comparable pair is concordant when risk_i > risk_j
and counts 0.5 when the risks tie. No comparable pair: nan.

One sweep computes the weighted counts for many weight vectors at once (the bootstrap's draws as
columns): items in descending time, a Fenwick tree over risk ranks holds the weights of the items
already swept, so each event asks it for the weight of later items with a lower risk. That is
O(items * log items) numpy row operations per sweep, whatever the number of draws, instead of one
pass over every comparable pair per draw (12.5 million pairs for 5,000 slides).
"""

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, cluster_index, percentile_interval
from evalsuite.metrics.shown_intervals import with_draws

DRAW_BLOCK_BYTES = 64 * 1024**2  # the Fenwick tree of one block of bootstrap draws takes at most this


def check_survival_targets(targets, what: str, training: bool = False) -> np.ndarray:
    """`targets` as float64 [slides, 2] (time, event); a one-line EvalsuiteError saying what to fix otherwise.

    `training`: the split trains a model, which needs at least one observed event."""
    targets = np.asarray(targets)
    if targets.ndim != 2 or targets.shape[1] != 2 or not np.issubdtype(targets.dtype, np.number):
        raise EvalsuiteError(f"{what}: survival targets must be numbers [slides, 2] with columns (time, event), got "
                             f"shape {targets.shape} of {targets.dtype}; check the reader's time and event columns")
    targets = targets.astype(np.float64, copy=False)
    if len(targets) == 0:
        raise EvalsuiteError(f"{what}: no slides; check the task card's splits and data")
    bad = np.flatnonzero(np.isnan(targets).any(axis=1))
    if len(bad):
        raise EvalsuiteError(f"{what}: survival target of slide {bad[0]} is NaN ({len(bad)} slides in all); "
                             "give every slide a time and an event (0 censored, 1 observed)")
    bad = np.flatnonzero(targets[:, 0] < 0)
    if len(bad):
        raise EvalsuiteError(f"{what}: survival time {targets[bad[0], 0]} of slide {bad[0]} is negative; times "
                             "count from the study's start (e.g. diagnosis) and must be >= 0")
    bad = np.flatnonzero((targets[:, 1] != 0) & (targets[:, 1] != 1))
    if len(bad):
        raise EvalsuiteError(f"{what}: event {targets[bad[0], 1]} of slide {bad[0]} is neither 0 (censored) nor 1 "
                             "(event observed); check the reader's event column")
    if training and not targets[:, 1].any():
        raise EvalsuiteError(f"{what}: all {len(targets)} slides are censored (no event); a survival model cannot "
                             "learn without events: check the event column or use a split with events")
    return targets


class _Concordance:
    """The sweep order of one split's (time, event, risk); `counts(weights)` -> (concordant, comparable) per column."""

    def __init__(self, time, event, risk):
        time, event, risk = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (time, event, risk))
        if not len(time) == len(event) == len(risk):
            raise ValueError(f"{len(time)} times, {len(event)} events and {len(risk)} risks")
        if np.isnan(risk).any():
            raise EvalsuiteError("c-index: the probe predicted a NaN risk; its training diverged (try a lower lr)")
        _, rank = np.unique(risk, return_inverse=True)
        self.rank = rank.reshape(-1) + 1  # Fenwick positions are 1-based
        self.tree_rows = int(self.rank.max()) + 1 if len(risk) else 1
        # Descending time; in a tie the censored first, which are then in the tree before the tied events ask.
        order = np.lexsort((event != 0, -time))
        self.order, self.event = order, event[order] != 0
        _, starts = np.unique(-time[order], return_index=True)
        self.groups = list(zip(starts, [*starts[1:], len(order)]))
        self.paths = {}

    def _path(self, position: int, upward: bool) -> np.ndarray:
        """Fenwick rows an update at `position` touches (upward) or a prefix sum up to `position` reads."""
        key = (position, upward)
        if key not in self.paths:
            rows = []
            while 0 < position < self.tree_rows:
                rows.append(position)
                position = position + (position & -position) if upward else position - (position & -position)
            self.paths[key] = np.array(rows, dtype=np.int64)
        return self.paths[key]

    def counts(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Weighted (concordant, comparable) pair sums; `weights` [items, columns], each pair weighs w_i * w_j."""
        tree = np.zeros((self.tree_rows, weights.shape[1]))
        swept = np.zeros(weights.shape[1])  # total weight in the tree
        concordant, comparable = np.zeros(weights.shape[1]), np.zeros(weights.shape[1])
        for start, stop in self.groups:
            items = self.order[start:stop]
            is_event = self.event[start:stop]
            for item in items[~is_event]:
                self._add(tree, swept, item, weights[item])
            for item in items[is_event]:
                # Later items with a lower risk count 1, with the same risk 0.5: the mean of the prefix
                # sums below and up to this rank.
                rank = self.rank[item]
                lower = tree[np.concatenate([self._path(rank - 1, False), self._path(rank, False)])].sum(axis=0)
                concordant += weights[item] * 0.5 * lower
                comparable += weights[item] * swept
            for item in items[is_event]:
                self._add(tree, swept, item, weights[item])
        return concordant, comparable

    def _add(self, tree, swept, item, weight) -> None:
        tree[self._path(self.rank[item], True)] += weight  # distinct rows, so fancy-index += adds to each
        swept += weight


def concordance_index(time, event, risk) -> float:
    """Harrell's C of `risk` (higher = shorter survival) for right-censored (time, event); nan without a comparable
    pair. Equals lifelines.utils.concordance_index(time, -risk, event)."""
    concordant, comparable = _Concordance(time, event, risk).counts(np.ones((len(np.asarray(risk)), 1)))
    return float(concordant[0] / comparable[0]) if comparable[0] > 0 else float("nan")


def c_index_interval(time, event, risk, draws: int = BOOTSTRAP_DRAWS, seed: int = 0, confidence: float = CONFIDENCE,
                     groups=None) -> tuple[float, float]:
    """Percentile bootstrap interval of the c-index over resampled clusters (`groups`: one id per slide, e.g. its
    patient; None: slides), drawn as bootstrap.py draws; (nan, nan) with fewer than two clusters."""
    return percentile_interval(c_index_draw_scores(time, event, risk, draws, seed, groups), confidence)


def c_index_draw_scores(time, event, risk, draws: int = BOOTSTRAP_DRAWS, seed: int = 0, groups=None) -> np.ndarray:
    """float64 [draws]: the c-index in each draw (nan: no comparable pair drawn; none with fewer than two clusters)."""
    sweep = _Concordance(time, event, risk)
    cluster_of_item, clusters = cluster_index(groups, len(sweep.order))
    if clusters < 2:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    drawn = np.stack([np.bincount(rng.integers(0, clusters, size=clusters), minlength=clusters)
                      for _ in range(draws)], axis=1)  # [clusters, draws]
    block = max(1, DRAW_BLOCK_BYTES // (8 * sweep.tree_rows))
    values = []
    for first in range(0, draws, block):
        concordant, comparable = sweep.counts(drawn[cluster_of_item, first : first + block].astype(np.float64))
        values.append(np.divide(concordant, comparable, out=np.full(len(comparable), np.nan), where=comparable > 0))
    return np.concatenate(values)


def _c_index(targets: np.ndarray, risk: np.ndarray) -> float:
    return concordance_index(targets[:, 0], targets[:, 1], risk)


SURVIVAL_METRICS = {"c_index": _c_index}  # name -> fn(targets [S, 2], risk [S]); the selection metric too


def survival_split_metrics(_card, probe, bags, targets, with_intervals: bool = False, groups=None,
                           seed: int = 0, unit: str = "cluster") -> dict:
    """The scorer of kind `survival`: {"c_index": v} of a fitted probe's risks on one split; with intervals also
    {"c_index_ci": (low, high)} from the cluster bootstrap over `groups` (one id per slide; None: slides)."""
    targets = check_survival_targets(targets, "survival scoring")
    risk = np.asarray(probe.predict_risk(bags), dtype=np.float64)
    metrics = {name: float(fn(targets, risk)) for name, fn in SURVIVAL_METRICS.items()}
    if with_intervals:
        drawn = {"c_index": c_index_draw_scores(targets[:, 0], targets[:, 1], risk, seed=seed, groups=groups)}
        metrics.update(with_draws(drawn, metrics, cluster_index(groups, len(risk))[1], unit))
    return metrics
