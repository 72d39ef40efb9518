"""The 95 % interval printed beside a score, from that score's bootstrap draws, and the note a reader needs with it.

Every interval evalsuite shows (a run's summary, `show`, the leaderboard rows, the wide table, the report) comes
from `shown_interval`, which picks, in this order:
1. fewer clusters than few_clusters.MIN_CLUSTERS: no interval (nan, nan); the caller says why once, for the whole
   split (a run's `intervals_note`, a column's "not tested" reason, a `--compare` verdict);
2. every draw equal to the score at the metric's best possible value (every patient right: 16 of 16 slides correct
   gives 1.0 in every draw): the exact Clopper-Pearson 95 % bound on the share of clusters scored perfectly, K of K
   (16 of 16: [0.794, 1]), where the bootstrap would print [1, 1];
3. a metric biased under resampling (ECE, MCE: a binned calibration error grows when items repeat, so a
   well-calibrated model's draws all lie above its ECE): the basic bootstrap interval [2x - q97.5, 2x - q2.5]
   (Davison & Hinkley 1997, eq. 5.6), the percentile interval of the bias-corrected value 2x - mean(draws), clipped
   at 0; the note says it can lie below x and by how much the draws are biased;
4. otherwise the percentile interval of the draws widened for few clusters (few_clusters.widened), cut to the values
   the metric can take (`metric_range`); a note where it is lopsided (one side more than LOPSIDED times the other: a
   bounded or ratio metric such as R^2 with few clusters), or where it does not hold the score.
docs/significance.md ("What an interval shows", "Few clusters") has the rules and the simulated coverage.
"""

from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalsuite.metrics.bootstrap import CONFIDENCE, DRAWS_SUFFIX, NOTE_SUFFIX
from evalsuite.metrics.directions import HIGHER, LOWER, direction
from evalsuite.metrics.few_clusters import tie_tolerance, too_few_clusters, widened

BIASED_UNDER_RESAMPLING = ("ece", "mce")  # binned calibration errors: repeated items inflate every bin's gap
# The values a metric can take, where they are not [0, 1]: a widened interval is cut to them (balanced accuracy's
# upper bound is 1, not 1.11). Unbounded sides are infinite.
RANGES = {"pearson": (-1.0, 1.0), "spearman": (-1.0, 1.0), "quadratic_kappa": (-1.0, 1.0), "r2": (-np.inf, 1.0),
          "mse": (0.0, np.inf), "nll": (0.0, np.inf)}
RANGE_PREFIXES = {"cosine_": (-1.0, 1.0)}
LOPSIDED = 5.0  # one side of the interval this many times the other gets a note


@dataclass(frozen=True)
class ShownInterval:
    low: float
    high: float
    note: str = ""  # what a reader must know to read it ("" for a plain percentile interval)

    @property
    def bounds(self) -> tuple:
        return (self.low, self.high)


def shown_interval(observed: float, draws, clusters: int, metric: str, unit: str = "cluster",
                   confidence: float = CONFIDENCE) -> ShownInterval:
    """The interval of `observed` (a score of `metric`) from its bootstrap `draws` over `clusters` clusters."""
    if too_few_clusters(clusters, unit):
        return ShownInterval(np.nan, np.nan)
    draws = np.asarray(draws, dtype=np.float64)
    defined = draws[~np.isnan(draws)]
    if len(defined) == 0 or observed is None or np.isnan(observed):
        return ShownInterval(np.nan, np.nan)
    tail = (1 - confidence) / 2 * 100
    if _without_spread(defined, observed):
        return _exact_bound(observed, clusters, metric, unit, confidence) or ShownInterval(observed, observed)
    spread = widened(defined, observed, clusters)
    low, high = np.clip(np.percentile(spread, [tail, 100 - tail]), *metric_range(metric))
    low, high = float(low), float(high)
    if metric in BIASED_UNDER_RESAMPLING:
        return _bias_corrected(observed, defined, low, high, metric)
    return ShownInterval(low, high, _shape_note(observed, low, high, metric))


def metric_range(metric: str) -> tuple:
    """(lowest, highest) value `metric` can take: RANGES, then its prefix family, else [0, 1] (accuracies, AUROC,
    Dice, recall, calibration errors, the c-index, the robustness index)."""
    if metric in RANGES:
        return RANGES[metric]
    return next((bounds for prefix, bounds in RANGE_PREFIXES.items() if metric.startswith(prefix)), (0.0, 1.0))


def _without_spread(defined: np.ndarray, observed: float) -> bool:
    return bool(np.all(np.abs(defined - observed) <= tie_tolerance(defined, observed)))


def _exact_bound(observed: float, clusters: int, metric: str, unit: str, confidence: float) -> ShownInterval | None:
    """Clopper-Pearson on K of K clusters perfect, when every draw is the metric's best value (1, or 0 for an
    error); None for a score without spread elsewhere."""
    alpha = 1 - confidence
    units = f"{clusters} {unit}s"
    if direction(metric) == HIGHER and abs(observed - 1.0) <= 1e-12:
        low = float(stats.beta.ppf(alpha / 2, clusters, 1))
        return ShownInterval(low, 1.0, f"every one of the {units} scored perfectly, so every bootstrap draw is 1: the "
                                       f"interval is the exact (Clopper-Pearson) bound on the share of such {unit}s, "
                                       f"{clusters} of {clusters}")
    if direction(metric) == LOWER and abs(observed) <= 1e-12:
        high = float(stats.beta.ppf(1 - alpha / 2, 1, clusters))
        return ShownInterval(0.0, high, f"every one of the {units} scored a perfect 0, so every bootstrap draw is 0: "
                                        f"the interval is the exact (Clopper-Pearson) bound on the share of {unit}s "
                                        f"with any error, 0 of {clusters}")
    return None


def _bias_corrected(observed: float, defined: np.ndarray, low: float, high: float, metric: str) -> ShownInterval:
    bias = float(defined.mean() - observed)
    corrected_low, corrected_high = max(0.0, 2 * observed - high), max(0.0, 2 * observed - low)
    return ShownInterval(corrected_low, corrected_high,
                         f"{metric} is biased upward under resampling (the draws average {bias:+.4f} from it): the "
                         f"interval is that of the bias-corrected {metric}, {max(0.0, observed - bias):.4f} (basic "
                         "bootstrap), and can lie below the number")


def _shape_note(observed: float, low: float, high: float, metric: str) -> str:
    if not low <= observed <= high:
        return (f"the {metric} lies outside its interval: its bootstrap draws are shifted from it (a biased "
                "estimate under resampling)")
    below, above = observed - low, high - observed
    if min(below, above) * LOPSIDED < max(below, above):
        side = "below" if below > above else "above"
        return (f"lopsided ({below:.4f} below, {above:.4f} above): {metric}'s draws stretch far {side} it, as a "
                "bounded or ratio metric's do with few clusters; it is their 2.5-97.5 % range, not a ± error")
    return ""


def with_draws(drawn: dict, observed: dict, clusters: int, unit: str = "cluster") -> dict:
    """A split scorer's interval entries from {metric: per-draw scores} and the split's {metric: score}: metric +
    "_ci" the shown interval, metric + DRAWS_SUFFIX the draws themselves (the runner averages a probe's seeds draw
    by draw with them), metric + NOTE_SUFFIX the interval's note where it has one."""
    found = {}
    for name, values in drawn.items():
        shown = shown_interval(observed.get(name, np.nan), values, clusters, name, unit)
        found[f"{name}_ci"] = shown.bounds
        found[f"{name}{DRAWS_SUFFIX}"] = np.asarray(values, dtype=np.float64)
        if shown.note:
            found[f"{name}{NOTE_SUFFIX}"] = shown.note
    return found


def shown_intervals_of(scores: dict, drawn: dict, clusters: int, unit: str = "cluster") -> tuple[dict, dict]:
    """({metric: [low, high]}, {metric: note}) of a probe's `scores` from their `drawn` bootstrap draws: what a probe
    that scores the split itself (retrieval, text_retrieval) reports."""
    intervals, notes = {}, {}
    for name, values in drawn.items():
        shown = shown_interval(scores.get(name, np.nan), values, clusters, name, unit)
        intervals[name] = list(shown.bounds)
        if shown.note:
            notes[name] = shown.note
    return intervals, notes
