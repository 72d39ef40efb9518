"""The `evalsuite` console script and `python -m evalsuite` exit through cli.entry_point: main()'s exit code, with
every file of the command complete (objects are frozen before the exit, so no final garbage collection runs)."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import assert_one_line_error, leaderboard_rows, run_cli


def _console_script() -> Path:
    return Path(sys.executable).parent / "evalsuite"


def test_the_console_script_gives_mains_exit_code_and_one_line_errors(tmp_path):
    script = _console_script()
    assert script.exists(), f"no console script beside {sys.executable}: install the package (pip install -e .)"
    listed = subprocess.run([str(script), "list"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "demo" in listed.stdout, listed.stderr
    bad = subprocess.run([str(script), "run", "--task", "nope", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert_one_line_error(bad, "unknown task 'nope'")
    assert bad.returncode == 2


def test_a_run_leaves_its_results_and_leaderboard_complete_after_the_exit(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                     "--num-workers", "0", "--out", out, timeout=300)
    assert result.returncode == 0, result.stderr
    run = json.loads(next((out / "runs").glob("*.json")).read_text())
    rows = leaderboard_rows(out)
    assert rows and {row["run_id"] for row in rows} == {run["run_id"]}
    assert result.stdout.rstrip().endswith(str(out / "leaderboard.csv"))
