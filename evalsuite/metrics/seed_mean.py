"""The interval of a mean over seeds: each seed scored on the same bootstrap draws (the task's
bootstrap.task_draw_seed), the scores averaged draw by draw, and the shown interval (shown_intervals.py) of those
means around the mean of the seeds' scores. It is the interval of the number a run's summary, the wide leaderboard
and the report show for several seeds (the mean), from the same draws as the report's marks; an envelope or a mean of
the seeds' own intervals is not (both are wider than the mean's when seeds disagree)."""

import numpy as np

from evalsuite.metrics.bootstrap import CONFIDENCE
from evalsuite.metrics.shown_intervals import ShownInterval, shown_interval

TEST_DRAWS = "test_draws"  # a probe result's {metric: float [draws]} while the run is scored; never written


def seed_mean_intervals(probe_results: list, clusters: int, unit: str = "cluster",
                        confidence: float = CONFIDENCE) -> tuple[dict, dict]:
    """({probe: {metric: [low, high]}}, {probe: {metric: note}}) for each probe with two or more seeds whose results
    all carry draws of the metric (the same number of draws), over a test split of `clusters` `unit`s; pops the
    draws from the results."""
    drawn = {}
    for result in probe_results:
        drawn.setdefault(result.get("probe"), []).append((result.pop(TEST_DRAWS, None) or {}, _test_scores(result)))
    intervals, notes = {}, {}
    for probe, per_seed in drawn.items():
        if len(per_seed) < 2:
            continue
        shared = set.intersection(*(set(draws) for draws, _ in per_seed))
        for metric in sorted(shared):
            if len({len(draws[metric]) for draws, _ in per_seed}) != 1:
                continue
            shown = mean_interval([draws[metric] for draws, _ in per_seed],
                                  [scores.get(metric, np.nan) for _, scores in per_seed], clusters, metric, unit,
                                  confidence)
            intervals.setdefault(probe, {})[metric] = list(shown.bounds)
            if shown.note:
                notes.setdefault(probe, {})[metric] = shown.note
    return intervals, notes


def _test_scores(result: dict) -> dict:
    return ((result.get("metrics") or {}).get("test") or {})


def mean_interval(per_seed_draws: list, per_seed_scores: list, clusters: int, metric: str, unit: str = "cluster",
                  confidence: float = CONFIDENCE) -> ShownInterval:
    """The shown interval of the mean over seeds, from each seed's scores in the same draws (nan where any seed's
    is) and each seed's observed score."""
    means = np.mean(np.stack([np.asarray(d, dtype=np.float64) for d in per_seed_draws]), axis=0)
    observed = float(np.mean(np.asarray(per_seed_scores, dtype=np.float64)))
    return shown_interval(observed, means, clusters, metric, unit, confidence)
