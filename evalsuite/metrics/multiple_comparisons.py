"""Many models or many tasks at once, from scores on shared bootstrap draws: the model confidence set and a step-down
max-t test.

Both procedures studentise each difference by its bootstrap standard error and compare the largest statistic of
the hypotheses still in play with the bootstrap distribution of that maximum, centred on the observed differences.
The multiplicity is in that maximum, not in a multiplier of p, so a p-value is compared with alpha itself and the
smallest attainable one, 1 / (B' + 1), does not grow with the number of models or tasks.

- `model_confidence_set`: which models of one task cannot be told apart from the best (Hansen, Lunde & Nason 2011,
  Econometrica 79(2), the T_R statistic and its elimination rule). The best is never chosen from the observed scores
  and then tested: each step tests "every model left is equally good" with the largest studentised pairwise
  difference, and removes the model that statistic names as worse. A model's MCS p-value is the largest step p-value
  up to its removal; the set at level alpha keeps the models whose p-value is at least alpha. With equal models the
  chance that any is left out is at most alpha (asymptotically; tests/metrics/test_best_set_error.py measures it).
  Checked against `arch.bootstrap.MCS(method="R")` fed the same draws (tests/metrics/test_multiple_comparisons.py).
- `stepdown_max_t`: two-sided tests of "difference = 0" on several tasks at once (Romano & Wolf 2005, Econometrica
  73(4), the step-down max-t with studentised statistics): the adjusted p-value of the task with the s-th largest
  |t| is the running maximum of the share of draws whose largest |t*| over the tasks not yet rejected reaches it.
  Draws of different tasks are independent resamples of independent test sets, so draw b of every task together is
  one draw of the whole family.
p-values carry the +1 of Davison & Hinkley (1997, eq. 4.11): p = (1 + #{T* >= T}) / (B' + 1), never 0.
With `clusters` (the test split's cluster count) the studentised draws are read through few_clusters.stretch, the
t(K - 1) reference of a statistic estimated from K clusters; the model confidence set given each model's
leave-one-cluster-out scores (`left_out`) uses the wild cluster bootstrap-t instead (few_clusters.wild_t_draws: the
pairs' own heavy tails with few clusters, which the map of each pair alone misses for the maximum over pairs).
A draw's statistic within few_clusters.TIE_RTOL of the observed one counts as reaching it, and so does a pair's
statistic for the choice of the pair that attains the maximum: a tie T* = T is common for accuracy-type metrics
(both are multiples of 1 / n), and float rounding would otherwise decide it (two mathematically equal inputs gave
p-values 0.058 apart, issue 47). docs/significance.md gives the formulas and the simulated error rates.
"""

from dataclasses import dataclass

import numpy as np

from evalsuite.metrics.few_clusters import TIE_RTOL, stretch, tie_tolerance, wild_t_draws

ALPHA = 0.05


@dataclass(frozen=True)
class BestSet:
    """The model confidence set of one task's column."""
    members: tuple  # models in the set at level `alpha`, in the order given
    p_values: dict  # model -> MCS p-value (the set at level a keeps p >= a)
    draws: int  # bootstrap draws in which every model's score is defined
    alpha: float = ALPHA

    def contains(self, model: str) -> bool:
        return model in self.members


def step_p_value(statistic: float, draw_maxima: np.ndarray) -> float:
    """(1 + #{draws whose maximum reaches the statistic, within TIE_RTOL}) / (draws + 1)."""
    reached = draw_maxima >= statistic - TIE_RTOL * max(1.0, abs(statistic))
    return float((1 + np.count_nonzero(reached)) / (len(draw_maxima) + 1))


def studentised(observed: np.ndarray, centred_draws: np.ndarray, clusters: int | None = None,
                scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(observed / se, centred_draws / se) with se the root mean square of the centred draws along axis 0 (the
    bootstrap standard error, as arch's MCS computes it), the draws read through few_clusters.stretch when
    `clusters` is given; a difference that never varies (two identical predictions; a spread within TIE_RTOL of
    the scores' `scale`) gets statistic 0 in both."""
    se = np.sqrt(np.nanmean(centred_draws ** 2, axis=0))
    varies = se > TIE_RTOL * scale
    divisor = np.where(varies, se, 1.0)
    t_draws = np.where(varies, centred_draws / divisor, 0.0)
    if clusters is not None:
        t_draws = stretch(t_draws, clusters)
    return np.where(varies, observed / divisor, 0.0), t_draws


def model_confidence_set(observed: dict, draws: dict, higher_better: bool = True, alpha: float = ALPHA,
                         until_alpha: bool = False, clusters: int | None = None, left_out: dict | None = None,
                         seed: int = 0) -> BestSet | None:
    """The MCS of `observed` ({model: score}) from `draws` ({model: float [B]}, the same draws for every model).

    Draws where any model's score is undefined (nan) are left out; None when fewer than two draws or two models
    remain. `until_alpha`: stop at the first step whose p reaches alpha (the set is then final; the p-values of the
    models left are only known to be at least that step's). `clusters`: the test split's cluster count, for the
    few-cluster reference (few_clusters.py); None reads the draws as they are (as arch does). `left_out`: {model:
    float [K]} its score with each cluster left out; with it (and no nan in it) the statistics and their draws are
    the wild cluster bootstrap-t's (`seed` its weights), and `draws` only decide which models are scored."""
    models = list(observed)
    stacked = np.stack([np.asarray(draws[m], dtype=np.float64) for m in models], axis=1)
    stacked = stacked[~np.isnan(stacked).any(axis=1)]
    if len(models) < 2 or len(stacked) < 2:
        return None
    sign = -1.0 if higher_better else 1.0  # losses: lower is better
    losses, drawn = sign * np.array([observed[m] for m in models], dtype=np.float64), sign * stacked
    differences = losses[:, None] - losses[None, :]  # [i, j] > 0: i worse than j
    scale = tie_tolerance(losses, drawn) / TIE_RTOL
    jackknife = None if left_out is None else sign * np.stack([np.asarray(left_out[m], dtype=np.float64)
                                                               for m in models], axis=1)
    if jackknife is not None and len(jackknife) >= 2 and not np.isnan(jackknife).any():
        t, t_draws = wild_t_draws(losses, jackknife, len(drawn), seed)
    else:
        t, t_draws = studentised(differences, drawn[:, :, None] - drawn[:, None, :] - differences, clusters, scale)
    p_values = _eliminate(t, t_draws, _tie_rounded(losses, scale), alpha if until_alpha else None)
    named = {models[i]: p for i, p in p_values.items()}
    return BestSet(members=tuple(m for m in models if named[m] >= alpha), p_values=named, draws=len(stacked),
                   alpha=alpha)


def _eliminate(t: np.ndarray, t_draws: np.ndarray, losses: np.ndarray, stop_at: float | None) -> dict:
    """{model index: MCS p-value}: remove, step by step, the model named worse by the largest statistic."""
    included, p_values, running = list(range(len(losses))), {}, 0.0
    while len(included) > 1:
        index = np.array(included)
        within = t[np.ix_(index, index)]
        statistic = within.max()
        maxima = t_draws[:, index[:, None], index[None, :]].max(axis=(1, 2))
        running = max(running, step_p_value(statistic, maxima))
        if stop_at is not None and running >= stop_at:
            break
        attained = within >= statistic - TIE_RTOL * max(1.0, abs(statistic))
        rows = np.flatnonzero(attained.any(axis=1))
        worst = max(rows, key=lambda r: (losses[index[r]], -index[r]))  # a tie goes to the worse observed score
        p_values[int(index[worst])] = running
        included.remove(int(index[worst]))
    p_values.update({i: 1.0 if stop_at is None else running for i in included})
    return p_values


def stepdown_max_t(differences: np.ndarray, draws: np.ndarray, clusters=None) -> np.ndarray:
    """Adjusted two-sided p-values of "difference = 0" for H hypotheses: `differences` [H] observed, `draws` [B, H]
    the differences on the same bootstrap draws (nan: undefined in that draw, left out of that draw's maximum);
    `clusters` [H]: each hypothesis' test-split cluster count, for the few-cluster reference (None: draws as they
    are)."""
    differences, draws = np.asarray(differences, dtype=np.float64), np.asarray(draws, dtype=np.float64)
    adjusted = np.full(differences.shape, np.nan)
    testable = np.flatnonzero((~np.isnan(draws)).sum(axis=0) >= 2)
    if len(testable) == 0:
        return adjusted
    scale = tie_tolerance(differences, draws) / TIE_RTOL
    t, t_draws = studentised(differences[testable], draws[:, testable] - differences[testable], scale=scale)
    if clusters is not None:
        t_draws = np.stack([stretch(t_draws[:, column], int(clusters[h])) for column, h in enumerate(testable)],
                           axis=1) if len(testable) else t_draws
    t, t_draws = np.abs(t), np.abs(t_draws)
    running, remaining = 0.0, list(np.argsort(-t, kind="stable"))
    while remaining:
        largest = remaining[0]
        maxima = np.nanmax(np.where(np.isnan(t_draws[:, remaining]), -np.inf, t_draws[:, remaining]), axis=1)
        running = max(running, step_p_value(t[largest], maxima))
        adjusted[testable[largest]] = running
        remaining.pop(0)
    return adjusted


def _tie_rounded(losses: np.ndarray, scale: float) -> np.ndarray:
    """Losses rounded to TIE_RTOL of their scale: the elimination's tie-break (the worse observed score) must not
    be decided by float rounding either."""
    return np.round(losses / scale / TIE_RTOL) * TIE_RTOL * scale
