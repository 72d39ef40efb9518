"""One table per run for `run` and `show`: per probe and metric, the mean ± sample std over seeds of each split and
the 95 % interval of the test number shown, so `--seeds 0,1,2` reads as one result instead of one table per seed.

The interval is that of the number in the row: with one seed the seed's bootstrap interval, with several the
interval of the mean over seeds scored draw by draw (the run's `intervals_95_seed_mean`, metrics/seed_mean.py), the
same bounds `leaderboard` and `report` give the cell. A run that has no such interval (made before it was stored, a
probe whose intervals are not drawn per seed, too few clusters) shows "-". An interval that needs a note
(metrics/shown_intervals.py: exact, bias-corrected, lopsided) carries a number, and the note follows the table; the
legend says how many clusters the intervals rest on (the run's `bootstrap`)."""

import math
import statistics

from evalsuite.reporting.table.text_table import format_table

SPLIT_ORDER = ("train", "val", "test")


def summary_lines(record: dict) -> list[str]:
    """A legend line and the table, then one line per interval note; [] when the run recorded no probe scores."""
    results = [r for r in record.get("probes") or [] if isinstance(r, dict) and isinstance(r.get("metrics"), dict)]
    if not results:
        return []
    headline = (record.get("task") or {}).get("selection_metric")
    means = ((record.get("intervals_95_seed_mean") or {}).get("test") or {})
    mean_notes = ((record.get("intervals_95_seed_mean_notes") or {}).get("test") or {})
    notes = []
    body = [row for probe in _probes_in_order(results)
            for row in _probe_rows(probe, [r for r in results if r.get("probe") == probe], headline,
                                   means.get(probe) or {}, mean_notes.get(probe) or {}, notes)]
    seeds = sorted({r.get("seed") for r in results}, key=str)
    legend = (f"mean ± sample std over seeds {', '.join(map(str, seeds))} (no ± with one seed); test interval: the "
              "95 % bootstrap interval of the test number shown (with several seeds, of their mean, scored on the "
              f"same draws{_clusters(record)}; docs/significance.md)")
    return [legend, format_table(["probe", "metric", *SPLIT_ORDER, "test interval"], body)] + \
        [f"({number}) {probe} {name}: {note}" for number, (probe, name, note) in enumerate(notes, 1)]


def _clusters(record: dict) -> str:
    """", over 40 patients": what the run's intervals rest on, when it recorded it."""
    drawn = record.get("bootstrap")
    if not isinstance(drawn, dict) or not isinstance(drawn.get("clusters"), int):
        return ""
    count, unit = drawn["clusters"], drawn.get("unit") or "cluster"
    return f", over {count} {unit}{'s' if count != 1 else ''}"


def _probes_in_order(results: list) -> list:
    return list(dict.fromkeys(r.get("probe") for r in results))


def _probe_rows(probe: str, results: list, headline: str | None, mean_intervals: dict, mean_notes: dict,
               notes: list) -> list[list[str]]:
    """The probe's rows; each interval note is appended to `notes` as (probe, metric, note) and numbered there."""
    names = list(dict.fromkeys(name for r in results for split in r["metrics"].values() for name in split))
    names.sort(key=lambda name: name != headline)  # the card's headline first, the rest as the probe wrote them
    rows = []
    for name in names:
        interval = _interval(results, name, mean_intervals.get(name))
        note = mean_notes.get(name) if len(results) > 1 else _seed_note(results[0], name)
        if note and interval != "-":
            notes.append((probe, name, note))
            interval += f" ({len(notes)})"
        rows.append([probe, name, *(_spread(results, split, name) for split in SPLIT_ORDER), interval])
    return rows


def _seed_note(result: dict, name: str):
    notes = ((result.get("intervals_95_notes") or {}).get("test") or {})
    return notes.get(name) if isinstance(notes, dict) else None


def _spread(results: list, split: str, name: str) -> str:
    values = [r["metrics"].get(split, {}).get(name) for r in results]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return "-"
    if len(numbers) == 1:
        return f"{numbers[0]:.4f}"
    # A NaN seed (an undefined metric) makes the mean NaN, as the leaderboard's cell would; statistics.stdev fails
    # on inf as on NaN ('float' object has no attribute 'numerator'), so any non-finite seed has no spread.
    std = statistics.stdev(numbers) if all(map(math.isfinite, numbers)) else math.nan
    return f"{statistics.fmean(numbers):.4f} ± {std:.4f}"


def _interval(results: list, name: str, mean_interval) -> str:
    """The interval of the number shown: one seed's own, or the mean's over several seeds (else "-")."""
    bounds = mean_interval if len(results) > 1 else (results[0].get("intervals_95") or {}).get("test", {}).get(name)
    if not (isinstance(bounds, (list, tuple)) and len(bounds) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in bounds)):
        return "-"
    if math.isnan(bounds[0]) or math.isnan(bounds[1]):
        return "-"
    return f"[{bounds[0]:.4f}, {bounds[1]:.4f}]"
