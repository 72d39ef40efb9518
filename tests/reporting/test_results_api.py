"""The Python API (issue 41): `evalsuite.load_leaderboard(out)` and `evalsuite.load_wide(out, ...)` give typed pandas
DataFrames equal to what the CSV and `evalsuite leaderboard --format csv` hold; bad input is one line naming the file
and the fix; `import evalsuite` loads neither torch nor pandas."""

import io
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, run_cli
from test_compare import build_board
from test_leaderboard_wide import T1, add_run

import evalsuite
from evalsuite.results.leaderboard import COLUMNS

LONG_DTYPES = {"schema": "int64", "run_id": "string", "timestamp_utc": "datetime64[ns, UTC]", "task": "string",
               "model": "string", "weights_id": "string", "probe": "string", "selected_params": "string",
               "split": "string", "metric": "string", "value": "float64", "seed": "int64", "n_samples": "Int64",
               "headline_metric": "string", "ci_low": "float64", "ci_high": "float64", "precision": "string",
               "throughput_img_s": "float64", "forward_img_s": "float64", "device_name": "string",
               "device_hours_est": "float64", "gflops_per_image": "float64", "params": "Int64",
               "host_load_1m": "float64"}


def _board(out):
    for seed, value in enumerate([0.80, 0.84]):
        add_run(out / "leaderboard.csv", "A", "t1", seed, value)
    add_run(out / "leaderboard.csv", "B", "t1", 0, 0.70)
    return out


def test_load_leaderboard_gives_one_typed_row_per_csv_row(tmp_path):
    frame = evalsuite.load_leaderboard(_board(tmp_path))
    assert len(frame) == 12  # 3 runs x (val, test) x (balanced_accuracy, f1_macro)
    assert list(frame.columns) == COLUMNS
    dtypes = {name: str(dtype) for name, dtype in frame.dtypes.items()}
    assert {name: dtypes[name] for name in LONG_DTYPES} == LONG_DTYPES
    assert set(COLUMNS) == set(LONG_DTYPES)
    first = frame.iloc[0]
    assert first["timestamp_utc"] == pd.Timestamp(T1) and first["seed"] == 0 and first["n_samples"] == 10
    assert first["value"] == pytest.approx(0.80) and pd.isna(first["ci_low"]) and pd.isna(first["device_name"])
    test_a = frame[(frame.model == "A") & (frame.split == "test") & (frame.metric == "balanced_accuracy")]
    assert test_a["value"].mean() == pytest.approx(0.82)
    # The CSV file itself may be named instead of its folder.
    pd.testing.assert_frame_equal(evalsuite.load_leaderboard(str(tmp_path / "leaderboard.csv")), frame)


def test_a_parameter_count_stays_an_exact_integer(tmp_path):
    """ViT-g's 1.1e9 parameters fit float64 exactly, but a count read as 1134953984.0 invites float arithmetic: the
    column is pandas' Int64, empty (older rows) as <NA>."""
    from evalsuite.results.leaderboard import append_rows, read_rows

    board = _board(tmp_path) / "leaderboard.csv"
    append_rows(board, [{**read_rows(board)[0], "run_id": "big", "params": 1134953984, "gflops_per_image": 291.5}])
    frame = evalsuite.load_leaderboard(tmp_path)
    assert str(frame["params"].dtype) == "Int64" and frame["params"].iloc[-1] == 1134953984
    assert frame["params"].iloc[:-1].isna().all() and frame["gflops_per_image"].iloc[-1] == 291.5


def test_an_older_file_gets_every_current_column_and_a_newer_ones_columns_are_kept(tmp_path):
    board = tmp_path / "leaderboard.csv"
    board.write_text("schema,run_id,timestamp_utc,task,model,probe,split,metric,value,seed,n_samples,future,note\n"
                     "1,r1,2025-01-01T00:00:00Z,t1,A,linear,test,balanced_accuracy,0.5,3,,2.5,fine\n"
                     "1,r1,2025-01-01T00:00:00Z,t1,A,linear,val,balanced_accuracy,nan,3,7,,\n")
    frame = evalsuite.load_leaderboard(tmp_path)
    assert list(frame.columns) == COLUMNS + ["future", "note"]
    assert str(frame["future"].dtype) == "float64" and str(frame["note"].dtype) == "string"
    assert frame["headline_metric"].tolist() == ["balanced_accuracy"] * 2  # schema 1's default, as the command
    assert frame["n_samples"].isna().tolist() == [True, False] and frame["value"].isna().tolist() == [False, True]
    assert frame["weights_id"].isna().all() and frame["timestamp_utc"].iloc[0] == pd.Timestamp("2025-01-01", tz="UTC")


def _wide_from_cli(out, *options) -> pd.DataFrame:
    result = run_cli("leaderboard", "--out", out, "--format", "csv", *options)
    assert result.returncode == 0, result.stderr
    return pd.read_csv(io.StringIO(result.stdout))


def _assert_same_table(api: pd.DataFrame, cli: pd.DataFrame) -> None:
    """Equal cell by cell; the CLI's CSV read by pandas has untyped columns (object, float64 for counts with gaps)."""
    assert list(api.columns) == list(cli.columns)
    plain = api.astype({n: "float64" if str(t) == "Int64" else object for n, t in api.dtypes.items()
                        if str(t) in ("Int64", "string")})
    plain = plain.astype(object).where(plain.notna(), None)
    pd.testing.assert_frame_equal(plain, cli.astype(object).where(cli.notna(), None), check_dtype=False)


@pytest.mark.parametrize("options", [{}, {"metric": "f1_macro", "models": ["good", "weak"]},
                                     {"split": "val", "tasks": "t1"}], ids=["headline", "metric", "val"])
def test_load_wide_equals_the_commands_wide_csv(tmp_path, options):
    out = build_board(tmp_path)  # stored predictions: rank intervals and best sets are filled in
    cli_options = [f"--{key.rstrip('s')}={value if isinstance(value, str) else ','.join(value)}"
                   for key, value in options.items()]
    wide = evalsuite.load_wide(out, **options)
    _assert_same_table(wide, _wide_from_cli(out, *cli_options))
    dtypes = {name: str(dtype) for name, dtype in wide.dtypes.items()}
    assert dtypes["model"] == dtypes["t1_probe"] == dtypes["weights_id"] == "string"
    assert dtypes["n_tasks"] == dtypes["t1_n_seeds"] == dtypes["t1_in_best_set"] == "Int64"
    assert dtypes["t1"] == dtypes["t1_rank"] == dtypes["rank_sum"] == "float64"


def test_load_wide_writes_nothing(tmp_path):
    out = build_board(tmp_path)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert evalsuite.load_wide(out)["model"].tolist()[0] == "good"
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # no leaderboard_wide.csv either


BOTH = ("load_leaderboard", "load_wide")


@pytest.mark.parametrize("setup, fragments, load", [
    (setup, fragments, load) for setup, fragments, loads in [
        ("missing", ["no folder", "pass the folder given to `evalsuite run --out`"], BOTH),
        ("empty_folder", ["no leaderboard at", "leaderboard.csv", "run `evalsuite run --out"], BOTH),
        ("ragged", ["leaderboard.csv line 3: wrong number of fields"], BOTH),
        ("foreign", ["leaderboard.csv is not an evalsuite leaderboard (missing columns: schema"], BOTH),
        # Typed columns the wide table never reads (as for the command, they do not stop it).
        ("bad_time", ["leaderboard.csv: timestamp_utc 'yesterday' of 'r2' is not an ISO 8601 time",
                      "correct or delete"], BOTH[:1]),
        ("bad_count", ["leaderboard.csv: n_samples 'ten' of 'r2' is not a number", "correct or delete"], BOTH[:1]),
    ] for load in loads])
def test_bad_input_is_one_evalsuite_error_line_naming_the_file_and_the_fix(tmp_path, setup, fragments, load):
    out = tmp_path / "out"
    header = "schema,run_id,timestamp_utc,task,model,probe,split,metric,value,seed,n_samples,headline_metric\n"
    good = "5,r1,2026-01-01T00:00:00+00:00,t1,A,linear,test,accuracy,0.5,0,10,accuracy\n"
    contents = {"ragged": header + good + "5,r2,oops\n", "foreign": "a,b\n1,2\n",
                "bad_time": header + good + good.replace("r1,2026-01-01T00:00:00+00:00", "r2,yesterday"),
                "bad_count": header + good + good.replace("r1", "r2").replace(",10,", ",ten,")}
    if setup != "missing":
        out.mkdir()
    if setup in contents:
        (out / "leaderboard.csv").write_text(contents[setup])
    with pytest.raises(evalsuite.EvalsuiteError) as error:
        getattr(evalsuite, load)(out)
    message = str(error.value)
    assert "\n" not in message and str(out) in message
    for fragment in fragments:
        assert fragment in message, message


def test_import_evalsuite_loads_neither_torch_nor_pandas_and_the_api_never_loads_torch(tmp_path):
    out = build_board(tmp_path)
    code = ("import sys, evalsuite; print(sorted(m for m in ('torch', 'pandas', 'sklearn') if m in sys.modules)); "
            f"evalsuite.load_wide({str(out)!r}); evalsuite.load_leaderboard({str(out)!r}); "
            "print(sorted(m for m in ('torch', 'pandas', 'sklearn') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines() == ["[]", "['pandas']"], result.stdout + result.stderr
    assert {"load_leaderboard", "load_wide", "EvalsuiteError"} <= set(dir(evalsuite))


def test_the_leaderboard_command_still_loads_neither_pandas_nor_torch(tmp_path):
    """pandas is a dependency for the API only: `leaderboard` (timed by benchmarks/startup.py) does not pay for it."""
    out = build_board(tmp_path)
    code = ("import sys; from evalsuite.cli import main; code = main(sys.argv[1:]); "
            "print(code, sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code, "leaderboard", "--out", str(out), "--format", "csv"],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "0 []", result.stdout + result.stderr


@pytest.mark.slow
def test_a_fresh_venv_with_pip_install_e_gets_the_api_and_pandas(tmp_path):
    """`pip install -e .` into a new venv, then the issue's command. The venv sees the project venv's packages through
    a .pth line (installing torch would download gigabytes); the checkout is a copy, so the import comes from the new
    install and its metadata must list pandas, which `pip install -e .` would then install."""
    source, venv = tmp_path / "src", tmp_path / "fresh"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("evalsuite", "datasets", "probes"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # pip and setuptools come from the project venv's packages too; pip installs into the interpreter running it.
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                              "--no-index", "-e", str(source)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    _board(tmp_path / "OUT")
    check = ("import evalsuite, importlib.metadata as m; print(evalsuite.__file__); "
             "print(any(r.startswith('pandas') and 'extra' not in r for r in m.requires('evalsuite'))); "
             "print(evalsuite.load_leaderboard('OUT').dtypes)")
    result = subprocess.run([python, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str(source / "evalsuite" / "__init__.py") and lines[1] == "True", result.stdout
    assert re.search(r"\ntimestamp_utc +datetime64\[ns, UTC\]\n", result.stdout), result.stdout
    assert re.search(r"\nseed +int64\n", result.stdout) and re.search(r"\nvalue +float64\n", result.stdout)
