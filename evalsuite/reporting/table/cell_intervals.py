"""A single-seed cell's interval from the long CSV: the leaderboard row's ci_low and ci_high are the seed's own 95 %
bootstrap interval, so the interval of the number in the cell. Several seeds need their draws (column_statistics.py).
"""

import math
from dataclasses import replace


def with_seed_intervals(cells: dict, rows: list[dict], metrics: dict, split: str) -> dict:
    """Single-seed cells with the leaderboard row's ci_low and ci_high (column_statistics.py replaces them with the
    same draws' bounds where predictions are stored)."""
    bounds = {(r["model"], r["task"], r["probe"], r["seed"], r["run_id"]): (r.get("ci_low"), r.get("ci_high"))
              for r in rows if r["split"] == split and r["metric"] == metrics[r["task"]]}
    found = {}
    for (model, task), cell in cells.items():
        low, high = bounds.get((model, task, cell.probe, cell.seeds[0], cell.run_ids[0]), (None, None)) \
            if len(cell.seeds) == 1 else (None, None)
        interval = _bounds(low, high)
        found[(model, task)] = replace(cell, interval=interval) if interval else cell
    return found


def _bounds(low, high) -> tuple | None:
    try:
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(low) or math.isnan(high) else (low, high)
