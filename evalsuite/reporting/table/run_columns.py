"""`leaderboard --metric throughput_img_s` (or forward_img_s): a cell shows a run's leaderboard column of that name
(schema 5: what extraction cost, one value per run and the same on each of its rows) instead of a score."""

import math
from collections import defaultdict

from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard_read import NUMBER_FORM, strict_float


def run_column_scores(rows: list[dict], chosen_on: dict, column: str, source: str) -> tuple[dict, list]:
    """Like wide._scores but the value is the run's `column` cell; runs without one (made before schema 5, or from a
    cache that predates throughput) are left out with a note."""
    if not any(column in row for row in rows):
        raise EvalsuiteError(f"{source} has no {column} column (written before leaderboard schema 5); rerun the "
                             "models with this evalsuite to measure it, or pick another --metric")
    shown, missing = defaultdict(dict), set()
    for row in rows:
        if row["metric"] != chosen_on[row["task"]]:
            continue
        try:
            value = strict_float(row.get(column) or "nan")
        except ValueError:
            raise EvalsuiteError(f"{source}: {column} '{row[column]}' of run {row['run_id']} is not a number "
                                 f"({NUMBER_FORM}); the file was edited: correct or delete that row") from None
        if math.isnan(value):
            missing.add(row["run_id"])
        else:
            shown[(row["model"], row["task"], row["probe"], row["split"])][row["seed"]] = value
    if not shown:
        raise EvalsuiteError(f"no run in {source} has a {column} value (runs made before it was measured); "
                             "rerun the models with this evalsuite, or pick another --metric")
    notes = [f"{len(missing)} run(s) have no {column} value (made before it was measured) and are left out"] \
        if missing else []
    return shown, notes
