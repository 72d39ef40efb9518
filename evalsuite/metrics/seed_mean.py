"""The interval of a mean over seeds: each seed scored on the same bootstrap draws (bootstrap.DRAW_SEED), the scores
averaged draw by draw, and the percentile interval of those means. It is the interval of the number a run's summary,
the wide leaderboard and the report show for several seeds (the mean), from the same draws as the report's marks;
an envelope or a mean of the seeds' own intervals is not (both are wider than the mean's when seeds disagree)."""

import numpy as np

from evalsuite.metrics.bootstrap import CONFIDENCE, percentile_interval

TEST_DRAWS = "test_draws"  # a probe result's {metric: float [draws]} while the run is scored; never written


def seed_mean_intervals(probe_results: list, confidence: float = CONFIDENCE) -> dict:
    """{probe: {metric: [low, high]}} for each probe with two or more seeds whose results all carry draws of the
    metric (the same number of draws); pops the draws from the results."""
    drawn = {}
    for result in probe_results:
        drawn.setdefault(result.get("probe"), []).append(result.pop(TEST_DRAWS, None) or {})
    found = {}
    for probe, per_seed in drawn.items():
        if len(per_seed) < 2:
            continue
        shared = set.intersection(*(set(d) for d in per_seed))
        intervals = {metric: list(mean_interval([d[metric] for d in per_seed], confidence))
                     for metric in sorted(shared) if len({len(d[metric]) for d in per_seed}) == 1}
        if intervals:
            found[probe] = intervals
    return found


def mean_interval(per_seed_draws: list, confidence: float = CONFIDENCE) -> tuple:
    """(low, high) of the mean over seeds, from each seed's scores in the same draws (nan where any seed's is)."""
    return percentile_interval(np.mean(np.stack([np.asarray(d, dtype=np.float64) for d in per_seed_draws]), axis=0),
                               confidence)
