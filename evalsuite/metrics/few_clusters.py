"""Bootstrap statements that stay honest when the test split has few clusters (patients, slides, tissue types).

The cluster bootstrap resamples K clusters. Its spread is that of the K clusters it saw, with divisor K rather than
K - 1, and its reference distribution is close to normal, where a difference estimated from K clusters behaves like
Student's t with K - 1 degrees of freedom. With K = 3 the percentile interval covered 0.77 and the best set left out
an equal model 27 % of the time (issue 47's simulation). The correction used here is the one the econometrics of
clustered data uses with few clusters (Cameron & Miller 2015, section VI "Few Clusters"; Bell & McCaffrey 2002):
scale by sqrt(K / (K - 1)) and read the t(K - 1) distribution where the normal one would be read. It is applied to
the bootstrap's standardised draws through the quantile map

    g_K(z) = sqrt(K / (K - 1)) * F_t(K-1)^-1( Phi(z) )

so a draw that is z bootstrap standard errors from the observed value moves to where t(K - 1) puts that quantile:
g_K is the identity as K grows (at K = 1000 it moves z = 1.96 by 0.2 %), and monotone, so a maximum over pairs of
models is the map of the maximum. Every interval shown (`widened`), the step-down test of `--compare` and the model
confidence set above WILD_MAX_CLUSTERS (`stretch`, metrics/multiple_comparisons.py) read the mapped draws.

The map corrects each pair of models, not their maximum: with several models and few clusters the best set still
left out an equal model in 12-17 % of simulated columns at K = 4-5, because the pairs' heavy tails (a pair whose K
differences happen to agree has a small standard error) are not the draws' joint ones. Up to WILD_MAX_CLUSTERS the
model confidence set therefore uses the wild cluster bootstrap-t instead (`wild_t_draws`; Cameron, Gelbach & Miller
2008; Webb 2023's six-point weights for few clusters; applied to the clusters' jackknife influence values, the
score-based wild bootstrap of Kline & Santos 2012): each draw multiplies every cluster's contribution by one random
weight, shared by the models, and studentises each pair again in that draw, so a pair's small standard error is
random in the draws as it is in the data.

Where no method holds, nothing is claimed: below MIN_CLUSTERS a column gets no interval and no marks, with the
reason. docs/significance.md gives the simulated coverage and error of the old and this rule
(benchmarks/few_clusters.py) and tests/metrics/test_few_clusters.py asserts them at fewer columns.
"""

import math

import numpy as np
from scipy import stats

# Below this many clusters no interval or mark is shown: at K = 3 the best set still left out an equal model in
# more than 5 % of simulated columns after the correction (docs/significance.md, "Few clusters").
MIN_CLUSTERS = 4
# Two scores closer than this (relative to their scale) count as equal: ties decided by float rounding otherwise.
TIE_RTOL = 1e-9
# Up to this many clusters the best set uses the wild cluster bootstrap-t (K scorings per model for the jackknife);
# above it the pairs bootstrap, whose error the large-sample simulation (benchmarks/best_set_error.py) bounds.
WILD_MAX_CLUSTERS = 50
# Webb's six-point weights: with K clusters, 6^K distinct draws where Rademacher's +-1 give 2^K (32 at K = 5).
WEBB_WEIGHTS = np.array([-math.sqrt(1.5), -1.0, -math.sqrt(0.5), math.sqrt(0.5), 1.0, math.sqrt(1.5)])


def too_few_clusters(clusters: int, unit: str = "cluster") -> str:
    """Why a split of `clusters` clusters supports no interval or mark ("" when it does)."""
    if clusters >= MIN_CLUSTERS:
        return ""
    return (f"its test split has {clusters} {unit}{'s' if clusters != 1 else ''}, fewer than the {MIN_CLUSTERS} "
            "an interval or best-set mark needs (docs/significance.md, \"Few clusters\")")


def stretch(z: np.ndarray, clusters: int) -> np.ndarray:
    """g_K of standardised draws `z` (nan stays nan): the t(K - 1) quantile, scaled by sqrt(K / (K - 1)), of the
    normal quantile each z sits at. Symmetric, so the far tails are read as survival functions (no 1 - tiny)."""
    z = np.asarray(z, dtype=np.float64)
    if clusters < 2:
        return z
    with np.errstate(invalid="ignore"):
        far = stats.t.isf(stats.norm.sf(np.abs(z)), clusters - 1)
    return np.sign(z) * np.sqrt(clusters / (clusters - 1)) * far


def widened(draws: np.ndarray, observed: float, clusters: int) -> np.ndarray:
    """The draws of one score moved away from `observed` as `stretch` moves standardised draws: each is
    observed + se * g_K((draw - observed) / se), se the root mean square of draw - observed. Draws without spread
    (every draw the observed value) stay as they are."""
    draws = np.asarray(draws, dtype=np.float64)
    defined = draws[~np.isnan(draws)]
    if len(defined) == 0 or np.isnan(observed):
        return draws
    se = float(np.sqrt(np.mean((defined - observed) ** 2)))
    if se <= tie_tolerance(defined, observed):
        return draws
    return observed + se * stretch((draws - observed) / se, clusters)


def tie_tolerance(*values) -> float:
    """TIE_RTOL times the largest finite magnitude among `values` (at least 1): the distance below which two of
    them are the same number computed two ways."""
    finite = [np.abs(np.asarray(v, dtype=np.float64)) for v in values]
    finite = [v[np.isfinite(v)] for v in finite]
    scale = max([1.0] + [float(v.max()) for v in finite if v.size])
    return TIE_RTOL * scale


def leave_one_out_weights(groups, items: int) -> np.ndarray:
    """float64 [K, items]: row k weighs every item 1 except those of cluster k (0): the jackknife's K scorings."""
    from evalsuite.metrics.bootstrap import cluster_index  # bootstrap imports this module's users

    of_item, clusters = cluster_index(groups, items)
    return (of_item[None, :] != np.arange(clusters)[:, None]).astype(np.float64)


def wild_t_draws(losses: np.ndarray, left_out: np.ndarray, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(t [m, m], t* [draws, m, m]): every pair's studentised difference of `losses` [m] and its wild cluster
    bootstrap-t draws under "all equal", from `left_out` [K, m], each model's loss with one cluster left out.

    Cluster k's influence on model i is u_ki = (K - 1)(L_i - L_i(-k)); a pair's differences d_kij = u_ki - u_kj,
    centred (the null imposed), give the observed se^2 = sum_k (d_kij - mean)^2 / (K (K - 1)) (the jackknife
    variance) and, in draw b with weights e_bk, the draw's difference mean_k(e_bk d_kij) and its own se from the same
    sum over e_bk d_kij. A pair whose differences never vary gets 0 in both."""
    clusters = len(left_out)
    influence = (clusters - 1) * (losses[None, :] - left_out)  # [K, m]
    residuals = influence[:, :, None] - influence[:, None, :]
    residuals -= residuals.mean(axis=0)
    se = np.sqrt((residuals ** 2).sum(axis=0) / (clusters * (clusters - 1)))
    scale = tie_tolerance(losses, left_out)
    varies = se > scale * TIE_RTOL
    t = np.where(varies, (losses[:, None] - losses[None, :]) / np.where(varies, se, 1.0), 0.0)
    weights = np.random.default_rng(seed).choice(WEBB_WEIGHTS, size=(draws, clusters))
    t_draws = np.empty((draws,) + t.shape)
    for first in range(0, draws, 100):  # [100, K, m, m] at a time: 30 models at K = 50 stay near 36 MiB
        flipped = weights[first:first + 100, :, None, None] * residuals[None]
        mean = flipped.mean(axis=1)
        spread = np.sqrt(((flipped - mean[:, None]) ** 2).sum(axis=1) / (clusters * (clusters - 1)))
        usable = varies & (spread > scale * TIE_RTOL)
        t_draws[first:first + 100] = np.where(usable, mean / np.where(usable, spread, 1.0), 0.0)
    return t, t_draws
