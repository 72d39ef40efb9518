"""Is one model better than another on the same test items? Paired bootstrap, exact McNemar, rank intervals.

Every statistic works on the two (or more) models' predictions for the *same* test items, so the
item-to-item variation both models share cancels out (a paired design):
- `paired_bootstrap`: resample test clusters (patients, slides, images; items when none are known) with
  replacement, score both models on the same draw, and look at the spread of the difference. The
  two-sided p-value is the percentile bootstrap's: p = min(1, 2 min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (B + 1)),
  the smallest level at which the percentile interval of the difference excludes 0 (Efron & Tibshirani 1993,
  ch. 16 duality of intervals and tests), with the +1 (Davison & Hinkley 1997, eq. 4.11) so no p is 0.
- `mcnemar_exact`: for accuracy on independent items, the exact binomial test on the discordant pairs
  (McNemar 1947; exact form as in statsmodels' `mcnemar(exact=True)`), checked against scipy.stats.binomtest.
- many models or many tasks at once: metrics/multiple_comparisons.py (the model confidence set, step-down max-t).
- `rank_intervals`: per draw, every model's rank on a task (1 = best, ties share the average rank); the
  interval is the 2.5th and 97.5th percentile of those ranks, taken as observed ranks (numpy "lower" and
  "higher"), so the model's rank lies inside it in at least 95 % of draws.
Scores per draw come from `weighted_metrics` (item weights = how often each item was drawn), the same code
as the confidence intervals in bootstrap.py; metrics without a weighted form are computed on the resampled
items. With several seeds a model's score in a draw is the mean over its seeds, so the observed score is
exactly the wide table's cell (mean over seeds). docs/significance.md has the formulas.
"""

from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np

from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, CONFIDENCE, _ClassRanks, cluster_index, weighted_metrics
from evalsuite.metrics.calibration import CALIBRATION_METRICS, CalibrationItems
from evalsuite.metrics.classification import METRICS
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.draw_scores import AurocScores, CategorySums, confusion_scores, macro_mean, per_draw_scores
from evalsuite.metrics.few_clusters import tie_tolerance
from evalsuite.metrics.ordinal import ORDINAL_METRIC

# Metrics scored by weighted_metrics from item weights (the others re-score the resampled items).
_WEIGHTED = {"balanced_accuracy", "f1_macro", "accuracy", "auroc_macro_ovr", ORDINAL_METRIC, *CALIBRATION_METRICS}
ALPHA = 0.05
CONFUSION_SCORES = ("balanced_accuracy", "f1_macro", "accuracy")  # scored per block of draws (draw_scores.py)


def has_item_form(metric: str, extra_metrics: dict | None = None) -> bool:
    """Whether `metric` can be scored from per-item class probabilities (and so be tested here)."""
    return metric in _WEIGHTED or metric in METRICS or metric in (extra_metrics or {})


@dataclass(frozen=True)
class PairedResult:
    a: float  # observed score of A (mean over its seeds)
    b: float
    difference: float  # a - b, in the metric's units
    low: float  # percentile interval of the difference (CONFIDENCE)
    high: float
    p_value: float
    method: str  # "bootstrap" or "mcnemar"
    draws: int  # bootstrap draws with a defined difference


class ItemScorer:
    """One model's score for any item-weight vector: the metric averaged over its seeds' probability matrices."""

    def __init__(self, y_true: np.ndarray, probas: list, metric: str, extra_metrics: dict | None = None):
        self.y_true, self.metric = y_true, metric
        self.probas = [np.asarray(p, dtype=np.float64) for p in probas]
        self.classes = self.probas[0].shape[1]
        self.predicted = [p.argmax(axis=1) for p in self.probas]
        auroc = metric == "auroc_macro_ovr"
        self.ranks = [[_ClassRanks(y_true, p[:, c], c) for c in range(self.classes)] if auroc else []
                      for p in self.probas]
        if not has_item_form(metric, extra_metrics):
            raise ValueError(f"no per-item form of metric '{metric}'")
        self.function = None if metric in _WEIGHTED else {**METRICS, **(extra_metrics or {})}[metric]
        self.calibration = [CalibrationItems(y_true, p) if metric in CALIBRATION_METRICS else None
                            for p in self.probas]
        self.pairs = (CategorySums([y_true * self.classes + p for p in self.predicted], self.classes ** 2)
                      if metric in CONFUSION_SCORES else None)
        self.aurocs = [[AurocScores(y_true, p[:, c], c) for c in range(self.classes)] if auroc else []
                       for p in self.probas]

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """float64 [draws]: the score for each row of item weights [draws, items], the mean over seeds."""
        if self.metric in CONFUSION_SCORES:
            confusions = self.pairs.sums(weights).reshape(-1, self.classes, self.classes)  # [draws x seeds, C, C]
            return confusion_scores(confusions)[self.metric].reshape(len(weights), -1).mean(axis=1)
        elif self.metric == "auroc_macro_ovr":
            per_seed = [macro_mean(np.stack([a.scores(weights) for a in aurocs], axis=1)) for aurocs in self.aurocs]
        else:
            return np.array([self.score(w) for w in weights])
        return np.mean(per_seed, axis=0)

    def score(self, weights: np.ndarray) -> float:
        if self.function is None:
            values = [weighted_metrics(self.y_true, predicted, ranks, weights, self.classes, calibration,
                                       self.metric == ORDINAL_METRIC)[self.metric]
                      for predicted, ranks, calibration in zip(self.predicted, self.ranks, self.calibration)]
        else:  # no weighted form: score the resampled items themselves (item i repeated weights[i] times)
            index = np.repeat(np.arange(len(weights)), weights.astype(np.int64))
            values = [float(self.function(self.y_true[index], p[index])) for p in self.probas]
        return float(np.mean(values))


def bootstrap_p_value(differences: np.ndarray) -> float:
    """Two-sided p of "difference = 0" from bootstrap differences: the percentile interval's duality, +1 corrected;
    a difference within few_clusters.TIE_RTOL of 0 counts on both sides (float rounding must not decide a tie)."""
    differences = differences[~np.isnan(differences)]
    draws = len(differences)
    if draws == 0:
        return float("nan")
    tolerance = tie_tolerance(differences)
    below, above = int((differences <= tolerance).sum()), int((differences >= -tolerance).sum())
    return min(1.0, 2 * (1 + min(below, above)) / (draws + 1))


def paired_bootstrap(y_true, probas_a: list, probas_b: list, metric: str, groups=None, draws: int = BOOTSTRAP_DRAWS,
                     seed: int = 0, confidence: float = CONFIDENCE, extra_metrics: dict | None = None) -> PairedResult:
    """A - B on `metric` over resampled test clusters; `probas_*`: one [N, C] matrix per seed of each model."""
    y_true = np.asarray(y_true, dtype=np.int64)
    scorer_a, scorer_b = (ItemScorer(y_true, p, metric, extra_metrics) for p in (probas_a, probas_b))
    return paired_scores(scorer_a, scorer_b, len(y_true), groups, draws, seed, confidence)


def paired_scores(scorer_a, scorer_b, items: int, groups=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                  confidence: float = CONFIDENCE) -> PairedResult:
    """The paired bootstrap of two scorers of the same `items` test items: anything with `score(item weights)`,
    e.g. ItemScorer here or segmentation.ConfusionScorer (per-image confusion counts)."""
    ones = np.ones(items)
    a, b = scorer_a.score(ones), scorer_b.score(ones)
    if cluster_index(groups, items)[1] < 2:  # nothing to resample
        return PairedResult(a, b, a - b, float("nan"), float("nan"), float("nan"), "bootstrap", 0)
    scores = per_draw_scores({"a": scorer_a, "b": scorer_b}, groups, items, draws, seed)
    return paired_result(a, b, scores["a"] - scores["b"], confidence)


def paired_result(a: float, b: float, differences: np.ndarray, confidence: float = CONFIDENCE) -> PairedResult:
    """The test of observed scores `a`, `b` from their differences in each bootstrap draw (nan: undefined)."""
    tail = (1 - confidence) / 2 * 100
    defined = differences[~np.isnan(differences)]
    low, high = (np.percentile(defined, [tail, 100 - tail]) if len(defined) else (np.nan, np.nan))
    return PairedResult(a, b, a - b, float(low), float(high), bootstrap_p_value(differences), "bootstrap", len(defined))


def mcnemar_exact(correct_a, correct_b) -> tuple[int, int, float]:
    """(b, c, p): b items only A got right, c items only B got right, p the exact two-sided binomial test of b
    against Binomial(b + c, 1/2): min(1, 2 P(X <= min(b, c))), computed with integers (no rounding)."""
    correct_a, correct_b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    only_a, only_b = int((correct_a & ~correct_b).sum()), int((~correct_a & correct_b).sum())
    discordant = only_a + only_b
    if discordant == 0:
        return only_a, only_b, 1.0
    tail = sum(comb(discordant, k) for k in range(min(only_a, only_b) + 1))
    return only_a, only_b, float(min(Fraction(1), Fraction(2 * tail, 2 ** discordant)))


def average_ranks(values: np.ndarray, higher_better: bool = True) -> np.ndarray:
    """Rank 1 for the best value, ties (within few_clusters.TIE_RTOL of the values' scale) share the average of
    their positions, NaN ranks after every number; on a matrix, ranks along the last axis (each row on its own)."""
    values = np.asarray(values, dtype=np.float64)
    keys = np.where(np.isnan(values), np.inf, -values if higher_better else values)
    tolerance = tie_tolerance(values)
    with np.errstate(invalid="ignore"):  # inf - inf: two undefined values, tied last
        gap = keys[..., None, :] - keys[..., :, None]  # [.., i, j]: key j - key i
        tied_pair = (np.abs(gap) <= tolerance) | (np.isinf(keys[..., None, :]) & np.isinf(keys[..., :, None]))
        before = ((gap < 0) & ~tied_pair).sum(axis=-1)
    # A value's average position = 1 + (values strictly before it) + (the others tied with it) / 2.
    return 1 + before + (tied_pair.sum(axis=-1) - 1) / 2


def rank_intervals(y_true, probas: dict, metric: str, groups=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                   confidence: float = CONFIDENCE, extra_metrics: dict | None = None) -> dict:
    """{model: (low, high)}: the models' ranks on one task over resampled test clusters; `probas`: {model: [one
    [N, C] matrix per seed]}. With fewer than two clusters, every interval is (nan, nan)."""
    y_true = np.asarray(y_true, dtype=np.int64)
    if cluster_index(groups, len(y_true))[1] < 2:
        return {model: (float("nan"), float("nan")) for model in sorted(probas)}
    scorers = {m: ItemScorer(y_true, probas[m], metric, extra_metrics) for m in probas}
    return rank_scores(scorers, len(y_true), metric, groups, draws, seed, confidence)


def rank_scores(scorers: dict, items: int, metric: str, groups=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0,
                confidence: float = CONFIDENCE) -> dict:
    """`rank_intervals` of any scorers of the same `items` test items ({model: object with `score(weights)`})."""
    models = sorted(scorers)
    if cluster_index(groups, items)[1] < 2:
        return {model: (float("nan"), float("nan")) for model in models}
    scores = per_draw_scores({m: scorers[m] for m in models}, groups, items, draws, seed)
    return ranks_from_scores(scores, metric, confidence)


def ranks_from_scores(scores: dict, metric: str, confidence: float = CONFIDENCE) -> dict:
    """{model: (low, high)} rank interval from every model's scores in the same draws ({model: float [draws]})."""
    models = sorted(scores)
    ranks = average_ranks(np.stack([scores[m] for m in models], axis=1), higher_is_better(metric))
    tail = (1 - confidence) / 2 * 100
    low = np.percentile(ranks, tail, axis=0, method="lower")
    high = np.percentile(ranks, 100 - tail, axis=0, method="higher")
    return {model: (float(low[i]), float(high[i])) for i, model in enumerate(models)}
