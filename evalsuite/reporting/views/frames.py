"""The results as pandas DataFrames: `evalsuite.load_leaderboard` (the long CSV, typed) and `evalsuite.load_wide`
(the table `evalsuite leaderboard --format csv` prints, typed).

Both read through the command's own code (leaderboard.read_rows, wide.build_wide_table, the column statistics and
views.wide_csv_text), so a DataFrame holds what the command shows and the same one-line errors name a bad file.
pandas is imported inside the functions: `import evalsuite` and every command stay free of it. Nothing is written:
not leaderboard_wide.csv, and a half-committed run is left for the next `evalsuite run` or `leaderboard` to settle.
"""

import io
import math
import warnings
from pathlib import Path

from evalsuite.config import DEFAULT_OUT
from evalsuite.errors import EvalsuiteError
from evalsuite.results.leaderboard import COLUMNS, LEADERBOARD_FILE, check_leaderboard_file
from evalsuite.results.leaderboard_read import NUMBER_FORM, read_rows_noted, strict_float

# The long CSV's dtypes by column; any other column (one a newer schema added) is float64 when each cell is a
# number, else string, so a file from a newer evalsuite still loads.
LONG_STRINGS = ("run_id", "task", "model", "weights_id", "probe", "selected_params", "split", "metric",
                "headline_metric", "precision", "device_name")
LONG_INTEGERS = {"schema": "int64", "seed": "int64", "n_samples": "Int64", "params": "Int64"}  # Int64: may be empty
LONG_FLOATS = ("value", "ci_low", "ci_high", "throughput_img_s", "forward_img_s", "gpu_hours_est", "device_hours_est",
               "gflops_per_image", "host_load_1m")
LONG_TIMES = ("timestamp_utc",)
# The wide CSV's: per task `<task>` and `<task>_<field>` (views.TASK_FIELDS) and the model's fixed columns.
WIDE_STRINGS = ("model", "split", "ranked_tasks", "weights_id")
WIDE_INTEGERS = ("n_tasks",)
TASK_STRINGS = ("probe", "metric", "precision")
TASK_INTEGERS = ("n_seeds", "in_best_set")  # a count and a 0/1 flag; empty where a model lacks the task
_FIX = "pass the folder given to `evalsuite run --out` (it holds leaderboard.csv)"


def load_leaderboard(out=DEFAULT_OUT):
    """Every row of `out`/leaderboard.csv (or of the CSV file `out` names) as a pandas DataFrame, typed.

    One row per model x task x probe x split x metric x seed of each run, in file order; columns as
    docs/outputs.md lists them, every column of the current schema present (empty in older rows: NA/NaN), then
    any column a newer evalsuite added. A torn last line (a writer killed mid-append) is left out with a warning
    naming the file and the line; a last row that only lacks its line break is read."""
    import pandas as pd

    path = _leaderboard_path(out)
    rows = _read_rows(path)
    extra = [name for name in rows[0] if name not in COLUMNS]  # a newer evalsuite's columns, kept
    columns = {name: [row.get(name, "") for row in rows] for name in COLUMNS + extra}
    runs = columns["run_id"]
    frame = {name: _typed(pd, name, values, _long_dtype(name), path, runs) for name, values in columns.items()}
    return pd.DataFrame(frame)


def load_wide(out=DEFAULT_OUT, metric=None, split="test", tasks=(), models=(), probes=()):
    """The wide table of `evalsuite leaderboard` as a DataFrame: one row per model, the columns of
    leaderboard_wide.csv (docs/outputs.md), typed; it equals what `evalsuite leaderboard --format csv` prints
    with the same options. `metric`, `split`, `tasks`, `models`, `probes` are the command's --metric, --split,
    --task, --model and --probe (a name or a list of names). Rank intervals and best sets come from the runs'
    stored test predictions, as in the command (test split only)."""
    import pandas as pd

    from evalsuite.reporting.statistics.column_statistics import add_column_statistics
    from evalsuite.reporting.table.wide import Filters, build_wide_table
    from evalsuite.reporting.views.formats import TASK_FIELDS, wide_csv_text
    from evalsuite.results.published import add_published

    path = _leaderboard_path(out)
    filters = Filters(tasks=_names(tasks), models=_names(models), probes=_names(probes))
    table = build_wide_table(_read_rows(path), split, metric, filters, source=str(path), out_dir=path.parent)
    if split == "test":  # predictions are stored for the test split only
        table = add_column_statistics(table, path.parent)
    add_published(table)  # the peers' figures: <task>_published columns
    text = pd.read_csv(io.StringIO(wide_csv_text(table)), dtype=str, keep_default_na=False)
    dtypes = _wide_dtypes(table.tasks, TASK_FIELDS)
    return pd.DataFrame({name: _typed(pd, name, list(text[name]), dtypes.get(name), path, list(text["model"]))
                         for name in text.columns})


def _leaderboard_path(out) -> Path:
    """`out` is the results folder or the leaderboard CSV itself; anything else is one line naming it and the fix."""
    out = Path(out)
    if out.is_file():
        return out
    if not out.exists():
        raise EvalsuiteError(f"no folder {out}; {_FIX}")
    path = out / LEADERBOARD_FILE
    check_leaderboard_file(path, fix=f"run `evalsuite run --out {out}` first, or pass the --out folder of earlier runs")
    return path


def _read_rows(path: Path) -> list:
    """The command's rows; a line left out (a torn last line) is a warning naming the file and the line, as the
    commands' `note:` line on stderr."""
    rows, notes = read_rows_noted(path)
    for note in notes:
        warnings.warn(note, stacklevel=3)  # at the caller of load_leaderboard or load_wide
    return rows


def _names(value) -> tuple:
    """The command's NAME[,NAME] for one filter, from a string or a list of strings."""
    values = [value] if isinstance(value, str) else list(value or ())
    return tuple(name.strip() for item in values for name in item.split(",") if name.strip())


def _long_dtype(name: str) -> str | None:
    if name in LONG_STRINGS:
        return "string"
    if name in LONG_TIMES:
        return "datetime"
    return "float64" if name in LONG_FLOATS else LONG_INTEGERS.get(name)  # None: float64 or string by content


def _wide_dtypes(tasks: list, task_fields: tuple) -> dict:
    """Column -> dtype for the wide CSV's string and integer columns; the rest (means, ranks, intervals) is float64."""
    dtypes = {**dict.fromkeys(WIDE_STRINGS, "string"), **dict.fromkeys(WIDE_INTEGERS, "Int64")}
    for task in tasks:
        for field in task_fields:
            kind = "string" if field in TASK_STRINGS else "Int64" if field in TASK_INTEGERS else None
            if kind:
                dtypes[f"{task}_{field}"] = kind
    return dtypes


def _typed(pd, name: str, values: list, dtype: str | None, path: Path, owners: list):
    """`values` (CSV text, '' for empty) as a pandas array of `dtype`; a cell that is not one is a one-line error
    naming the file, the column, the value and its run (or model), since a row number means nothing after edits."""
    texts = ["" if v is None else str(v) for v in values]  # read_rows already made `value` and `seed` numbers
    if dtype == "string":
        return pd.array([t if t else None for t in texts], dtype="string")
    if dtype == "datetime":
        times = pd.to_datetime(pd.Series(texts), utc=True, format="ISO8601", errors="coerce")
        _refuse_first(name, [t for t, time in zip(texts, times) if pd.isna(time)], path, texts, owners,
                      "an ISO 8601 time")
        return times.array
    numbers = _numbers(texts)
    bad = [t for t, n in zip(texts, numbers) if n is None]
    if dtype is None:  # no declared type: numbers when every cell is one, else text
        return pd.array([t or None for t in texts], "string") if bad else pd.array(numbers, dtype="float64")
    _refuse_first(name, bad, path, texts, owners, f"a number ({NUMBER_FORM})")
    if dtype == "float64":
        return pd.array(numbers, dtype="float64")
    # Integers: a fraction or inf never, an empty cell only where the dtype holds NA (Int64; schema and seed are
    # required).
    bad = [t for t, n in zip(texts, numbers) if (math.isnan(n) and dtype == "int64") or (n == n and not n.is_integer())]
    _refuse_first(name, bad, path, texts, owners, "a whole number")
    return pd.array([None if math.isnan(n) else int(n) for n in numbers], dtype=dtype)


def _numbers(texts: list) -> list:
    """Each cell as a float (NaN when empty), None where it is no number as evalsuite writes them ('0_5' is none)."""
    numbers = []
    for text in texts:
        try:
            numbers.append(strict_float(text) if text else math.nan)
        except ValueError:
            numbers.append(None)
    return numbers


def _refuse_first(name: str, bad: list, path: Path, texts: list, owners: list, wanted: str) -> None:
    if bad:
        owner = owners[texts.index(bad[0])]
        raise EvalsuiteError(f"{path}: {name} '{bad[0]}' of '{owner}' is not {wanted}; the file was edited: correct "
                             "or delete that row")
