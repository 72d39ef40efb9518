"""`evalsuite sweep run` with the local executor, end to end with timm's tiny test_vit (random init) on the demo.

One sweep folder is shared by the module and grown step by step, each step a module fixture that depends on the
previous one (so any subset of the tests sees the same history):
  first      2 models (test_vit twice, told apart by name: and pooling: mean_patch) x [demo], seeds 0, 1
  again      the same command: nothing runs
  more_seeds seed 2 added to the file: only seed 2 runs
  failed     another sweep file, vit_a x [a copy of the demo card with a wrong data_root, demo with knn]: the
             first cell fails, the second runs; exit 4
  fixed      the data_root removed: only the failed cell runs
The copy of the demo card (`demo_small`, 150 px tiles: ~80 tiles) keeps the fix to seconds.
"""

import collections
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import leaderboard_rows, run_cli

from evalsuite.errors import EXIT_SWEEP_INCOMPLETE
from evalsuite.tasks.resources import cards_dir

VIT_A = {"model": "test_vit", "random_init": True, "name": "vit_a"}
VIT_B = {"model": "test_vit", "random_init": True, "name": "vit_b", "pooling": "mean_patch"}
COMMON = {"probes": ["linear"], "device": "cpu", "num_workers": 0, "out": "results"}
KEY = ("model", "task", "probe", "seed", "split", "metric")
_PROGRESS = re.compile(r"\|\s*\d+/\d+ \[|^progress: ")


def _write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _sweep(path: Path, *args, timeout=900):
    return run_cli("sweep", *args, path, cwd=path.parent, timeout=timeout)


def _errors(stderr: str) -> list:
    """stderr without progress lines."""
    return [line for line in stderr.splitlines() if line.strip() and not _PROGRESS.search(line)]


def _duplicates(rows: list) -> list:
    counts = collections.Counter(tuple(row[k] for k in KEY) for row in rows)
    return [key for key, n in counts.items() if n > 1]


def _run_ids(rows: list) -> set:
    return {row["run_id"] for row in rows}


def _status(path: Path) -> list:
    result = _sweep(path, "status", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# ---- the shared sweep, step by step

@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep").resolve()
    card = yaml.safe_load((cards_dir() / "demo.yaml").read_text())
    card["name"] = "demo_small"
    card["reader"]["args"]["tile_size_px"] = 150  # 300 px blocks of 2x2 tiles
    (folder / "demo_small.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def first(folder):
    path = _write(folder / "grid.yaml", {"models": [VIT_A, VIT_B], "tasks": ["demo"], "seeds": [0, 1], **COMMON})
    result = _sweep(path, "run")
    assert result.returncode == 0, result.stderr
    out = folder / "results"
    return {"path": path, "out": out, "result": result, "rows": leaderboard_rows(out),
            "bytes": (out / "leaderboard.csv").read_bytes()}


@pytest.fixture(scope="module")
def again(first):
    result = _sweep(first["path"], "run")
    assert result.returncode == 0, result.stderr
    return {"result": result, "bytes": (first["out"] / "leaderboard.csv").read_bytes()}


@pytest.fixture(scope="module")
def more_seeds(first, again):
    path = _write(first["path"], {**yaml.safe_load(first["path"].read_text()), "seeds": [0, 1, 2]})
    result = _sweep(path, "run")
    assert result.returncode == 0, result.stderr
    return {"result": result, "rows": leaderboard_rows(first["out"])}


@pytest.fixture(scope="module")
def failed(folder, more_seeds):
    path = _write(folder / "mixed.yaml", {
        "models": [VIT_A],
        "tasks": [{"task": "demo_small.yaml", "data_root": "nowhere", "probes": ["knn"]},
                  {"task": "demo", "probes": ["knn"]}],
        "seeds": [0, 1], **COMMON})
    before = leaderboard_rows(folder / "results")
    result = _sweep(path, "run")
    text = _sweep(path, "status", timeout=120)
    assert text.returncode == 0, text.stderr
    return {"path": path, "result": result, "before": before, "after": leaderboard_rows(folder / "results"),
            "states": _status(path), "text": text.stdout}


@pytest.fixture(scope="module")
def fixed(folder, failed):
    raw = yaml.safe_load(failed["path"].read_text())
    del raw["tasks"][0]["data_root"]
    path = _write(failed["path"], raw)
    result = _sweep(path, "run")
    assert result.returncode == 0, result.stderr
    return {"result": result, "rows": leaderboard_rows(folder / "results"), "states": _status(path)}


# ---- (a) every cell's rows once, under the sweep's labels

@pytest.mark.slow  # the first sweep: two demo extractions and four linear fits, ~1 min on 2 loaded cores
def test_every_cell_written_once_under_its_label(first):
    rows = first["rows"]
    assert {row["model"] for row in rows} == {"vit_a", "vit_b"}
    assert {row["task"] for row in rows} == {"demo"} and {row["probe"] for row in rows} == {"linear"}
    assert not _duplicates(rows)
    test_pairs = {(row["model"], row["seed"]) for row in rows if row["split"] == "test"}
    assert test_pairs == {("vit_a", "0"), ("vit_a", "1"), ("vit_b", "0"), ("vit_b", "1")}
    # One `evalsuite run` per cell (its seeds together), each recording its model's pooling.
    by_model = {row["model"]: set() for row in rows}
    for row in rows:
        by_model[row["model"]].add(row["run_id"])
    assert all(len(ids) == 1 for ids in by_model.values()), by_model
    records = {model: json.loads((first["out"] / "runs" / f"{ids.pop()}.json").read_text())
               for model, ids in by_model.items()}
    assert records["vit_b"]["model"]["pooling"] == "mean_patch"
    assert records["vit_a"]["model"]["pooling"] != "mean_patch"
    assert "sweep grid: 2 done, 0 running, 0 pending, 0 failed of 2 cells" in first["result"].stdout


# ---- (b) the same command again runs nothing

@pytest.mark.slow
def test_rerun_runs_nothing(first, again):
    stdout = again["result"].stdout
    assert "sweep grid: 2 of 2 cells already in" in stdout and "skipped" in stdout
    assert ": run " not in stdout  # no `evalsuite run` started
    assert again["bytes"] == first["bytes"]


# ---- (c) a seed added to the file: only that seed runs

@pytest.mark.slow
def test_added_seed_runs_only_that_seed(first, more_seeds):
    before, after = first["rows"], more_seeds["rows"]
    added = after[len(before):]
    assert after[:len(before)] == before
    assert {row["seed"] for row in added} == {"2"}
    assert len(added) == sum(row["seed"] == "0" for row in before)  # exactly one seed's rows
    assert {row["model"] for row in added if row["split"] == "test"} == {"vit_a", "vit_b"}
    assert not _duplicates(after)
    assert more_seeds["result"].stdout.count("(seeds 2; linear)") == 2


# ---- (d) a cell that fails fails alone; the next `sweep run` runs only it

@pytest.mark.slow
def test_failed_cell_fails_alone(folder, failed):
    result = failed["result"]
    assert result.returncode == EXIT_SWEEP_INCOMPLETE, result.stderr
    lines = _errors(result.stderr)
    assert lines[-1].startswith("evalsuite: error: 1 of 2 cells failed"), lines
    assert "Traceback" not in result.stderr
    missing = str(folder / "nowhere" / "hgsc_nest.jpg")
    assert any(line.startswith("evalsuite: cell vit_a x demo_small failed:") and missing in line for line in lines)
    # The cell after the failed one ran.
    assert "vit_a x demo: run " in result.stdout
    new = failed["after"][len(failed["before"]):]
    assert {(row["task"], row["probe"]) for row in new} == {("demo", "knn")}
    assert {row["seed"] for row in new if row["split"] == "test"} == {"0", "1"}

    states = {s["task"]: s for s in failed["states"]}
    assert states["demo"]["state"] == "done"
    bad = states["demo_small"]
    assert bad["state"] == "failed" and bad["model"] == "vit_a"
    assert missing in bad["error"]
    log = Path(bad["log"])
    assert log.is_file() and missing in log.read_text()


@pytest.mark.slow
def test_status_text_shows_the_grid(folder, failed):
    lines = failed["text"].splitlines()
    assert lines[0].split() == ["demo_small", "demo"]
    assert lines[1].split() == ["vit_a", "failed", "done"]
    assert lines[2] == "sweep mixed: 1 done, 0 running, 0 pending, 1 failed of 2 cells"
    assert lines[3].startswith("failed vit_a x demo_small: missing data file")
    assert f"(log {folder}/results/sweeps/mixed/logs/" in lines[3]


@pytest.mark.slow
def test_fixed_sweep_runs_only_the_failed_cell(failed, fixed):
    before, after = failed["after"], fixed["rows"]
    new = after[len(before):]
    assert after[:len(before)] == before
    assert len(_run_ids(after) - _run_ids(before)) == 1  # one run: the failed cell's two seeds together
    assert {(row["model"], row["task"], row["probe"]) for row in new} == {("vit_a", "demo_small", "knn")}
    assert {row["seed"] for row in new if row["split"] == "test"} == {"0", "1"}
    assert not _duplicates(after)
    stdout = fixed["result"].stdout
    assert "1 of 2 cells already in" in stdout and "vit_a x demo: run " not in stdout
    assert [s["state"] for s in fixed["states"]] == ["done", "done"]
    assert all(s["error"] is None for s in fixed["states"])


# ---- (f) a local dry run

def test_dry_run_writes_nothing(tmp_path):
    path = _write(tmp_path / "grid.yaml", {"models": [VIT_A, VIT_B], "tasks": ["demo"], "seeds": [0, 1], **COMMON})
    result = _sweep(path, "run", "--dry-run", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["vit_a x demo: seeds 0,1 with linear", "vit_b x demo: seeds 0,1 with linear"]
    assert not (tmp_path / "results").exists()


def test_dry_run_with_weights_writes_nothing(tmp_path):
    """Not even the memo of the checkpoint's hash (weights_ids.json) is written under out."""
    (tmp_path / "ckpt.pth").write_bytes(b"hashed, not loaded, by a dry run")
    path = _write(tmp_path / "grid.yaml", {"models": [{"model": "test_vit", "name": "mine", "weights": "ckpt.pth"}],
                                           "tasks": ["demo"], "seeds": [0], **COMMON})
    result = _sweep(path, "run", "--dry-run", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["mine x demo: seeds 0 with linear"]
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_dry_run_of_a_finished_sweep(first, fixed):
    leaderboard = first["out"] / "leaderboard.csv"
    before = leaderboard.read_bytes()
    result = _sweep(first["path"], "run", "--dry-run", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["vit_a x demo: done", "vit_b x demo: done"]
    assert leaderboard.read_bytes() == before


# ---- (g) one backbone build for a model's cells

@pytest.mark.slow
def test_cells_of_one_model_build_it_once(folder, fixed, monkeypatch, one_torch_thread):
    """1 model x 2 tasks in this process (run_local): test_vit is built once. Both caches exist, so only kNN runs."""
    from evalsuite.models import reuse
    from evalsuite.sweeps.cells import cells_of
    from evalsuite.sweeps.local import run_local
    from evalsuite.sweeps.spec import load_sweep

    calls = []
    real = reuse.build_backbone

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(reuse, "build_backbone", counting)
    path = _write(folder / "reuse.yaml", {"models": [VIT_A], "tasks": ["demo", "demo_small.yaml"], "seeds": [3],
                                          **COMMON, "probes": ["knn"]})
    sweep = load_sweep(path)
    cells = cells_of(sweep)
    said = []
    outcome = run_local(sweep, cells, say=said.append)
    assert outcome == {cell.id: "done" for cell in cells}, said
    assert len(calls) == 1, calls
    rows = leaderboard_rows(folder / "results")
    assert {row["task"] for row in rows if row["seed"] == "3"} == {"demo", "demo_small"}
    assert not _duplicates(rows)


# ---- (f) what the sweep says: its plan first, each cell's headline, the time left (issue 41 item 6)

@pytest.mark.slow
def test_the_plan_comes_before_the_first_cell_and_each_run_line_ends_with_its_score(first, fixed):
    lines = first["result"].stdout.splitlines()
    assert lines[0] == ("sweep grid: 2 cells (2 models x 1 tasks, 2 seed(s)): 0 done, 0 queued or running elsewhere, "
                        "2 to run (classification 2)")
    runs = [line for line in lines if ": run " in line]
    assert len(runs) == 2 and all(re.search(r"\): test balanced_accuracy: linear 0\.\d{4}$", line) for line in runs)
    scores = {line.split(" x ")[0].strip(): float(line.rsplit(" ", 1)[1]) for line in runs}
    test_rows = [row for row in first["rows"] if row["split"] == "test" and row["metric"] == "balanced_accuracy"]
    for model, score in scores.items():  # the line's score is the mean over seeds of the leaderboard's test rows
        values = [float(row["value"]) for row in test_rows if row["model"] == model]
        assert score == pytest.approx(sum(values) / len(values), abs=5e-5)
    plan = fixed["result"].stdout.splitlines()[0]
    assert plan.endswith(": 1 done, 0 queued or running elsewhere, 1 to run (classification 1)")
