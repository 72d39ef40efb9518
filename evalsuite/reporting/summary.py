"""One table per run for `run` and `show`: per probe and metric, the mean ± sample std over seeds of each split and
the test's 95 % interval, so `--seeds 0,1,2` reads as one result instead of one table per seed."""

import math
import statistics

from evalsuite.reporting.leaderboard import format_table

SPLIT_ORDER = ("train", "val", "test")


def summary_lines(record: dict) -> list[str]:
    """A legend line and the table; [] when the run recorded no probe scores."""
    results = [r for r in record.get("probes") or [] if isinstance(r, dict) and isinstance(r.get("metrics"), dict)]
    if not results:
        return []
    headline = (record.get("task") or {}).get("selection_metric")
    body = [row for probe in _probes_in_order(results)
            for row in _probe_rows(probe, [r for r in results if r.get("probe") == probe], headline)]
    seeds = sorted({r.get("seed") for r in results}, key=str)
    legend = (f"mean ± sample std over seeds {', '.join(map(str, seeds))} (no ± with one seed); test interval: the "
              "95 % bootstrap interval of one seed; with several, the lowest and highest bound of the seeds' 95 % "
              "intervals (their envelope, not an interval of the mean)")
    return [legend, format_table(["probe", "metric", *SPLIT_ORDER, "test interval"], body)]


def _probes_in_order(results: list) -> list:
    return list(dict.fromkeys(r.get("probe") for r in results))


def _probe_rows(probe: str, results: list, headline: str | None) -> list[list[str]]:
    names = list(dict.fromkeys(name for r in results for split in r["metrics"].values() for name in split))
    names.sort(key=lambda name: name != headline)  # the card's headline first, the rest as the probe wrote them
    return [[probe, name, *(_spread(results, split, name) for split in SPLIT_ORDER), _interval(results, name)]
            for name in names]


def _spread(results: list, split: str, name: str) -> str:
    values = [r["metrics"].get(split, {}).get(name) for r in results]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return "-"
    if len(numbers) == 1:
        return f"{numbers[0]:.4f}"
    # A NaN seed (an undefined metric) makes the mean NaN, as the leaderboard's cell would.
    std = statistics.stdev(numbers) if not any(math.isnan(n) for n in numbers) else math.nan
    return f"{statistics.fmean(numbers):.4f} ± {std:.4f}"


def _interval(results: list, name: str) -> str:
    bounds = [(r.get("intervals_95") or {}).get("test", {}).get(name) for r in results]
    pairs = [(float(b[0]), float(b[1])) for b in bounds
             if isinstance(b, (list, tuple)) and len(b) == 2 and all(isinstance(x, (int, float)) for x in b)]
    pairs = [p for p in pairs if not (math.isnan(p[0]) or math.isnan(p[1]))]
    if not pairs:
        return "-"
    return f"[{min(p[0] for p in pairs):.4f}, {max(p[1] for p in pairs):.4f}]"
