"""`evalsuite show RUN_ID`: a run's provenance from its results JSON, and the JSON's reproducibility fields."""

import hashlib
import json

import pytest
from conftest import assert_one_line_error, leaderboard_rows, run_cli

from evalsuite.results.leaderboard import SCHEMA_VERSION
from evalsuite.results.run_json import RESULTS_SCHEMA_VERSION, write_run_json


def fake_record(run_id: str, card_path, card_sha256: str) -> dict:
    return {
        "run_id": run_id, "timestamp_utc": "2026-01-01T00:00:00+00:00",
        "command": ["/venv/lib/python3.11/site-packages/evalsuite/__main__.py", "run", "--task", "my card.yaml"],
        "config": {"task": "my card.yaml", "seed": 3},
        "task": {"name": "mine", "path": str(card_path), "sha256": card_sha256, "selection_metric": "f1_macro",
                 "classes": ["a", "b"]},
        "model": {"name": "vit_small+ckpt", "architecture_name": "vit_small", "weights_id": "sha256:feed",
                  "embed_dim": 384, "data_config": {"resize": [224, 224]}},
        "device": "cpu", "seed": 3, "samples_extracted": {"train": 0, "val": 0, "test": 0},
        "probes": [{"probe": "knn", "recipe": {"k": [1, 3]}, "selected_params": {"k": 3},
                    "metrics": {"test": {"f1_macro": 0.5}, "train": {"f1_macro": 0.9}, "val": {"f1_macro": 0.6}}}],
        "versions": {"evalsuite": "0.1.0", "torch": "2.1"},
    }


@pytest.fixture
def runs(tmp_path):
    card = tmp_path / "my card.yaml"
    card.write_text("name: mine\n")
    sha = hashlib.sha256(card.read_bytes()).hexdigest()
    for run_id in ["20260101T000000Z-aaaa1111", "20260101T000000Z-aaaa2222", "20260102T000000Z-bbbb3333"]:
        write_run_json(tmp_path, fake_record(run_id, card, sha))
    return tmp_path, card


def test_show_prints_what_reproduces_the_run(runs):
    out, card = runs
    result = run_cli("show", "20260102", "--out", out)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("run       20260102T000000Z-bbbb3333")
    assert lines[1].startswith("command   python -m evalsuite run --task 'my card.yaml'   (in ")
    assert f"sha256 {hashlib.sha256(card.read_bytes()).hexdigest()}  (card unchanged since the run)" in result.stdout
    assert "weights   sha256:feed" in lines and "seeds     3   device cpu" in lines
    assert [line.split()[0] for line in lines if line.startswith("          ") and "f1_macro 0." in line] \
        == ["train", "val", "test"]

    assert "speed     not recorded (caches made before evalsuite recorded throughput)" in lines

    card.write_text("name: mine\nclasses: [a, b, c]\n")
    assert "CARD CHANGED since the run" in run_cli("show", "20260102", "--out", out).stdout


def test_show_prints_throughput_and_a_survival_task_without_classes(tmp_path):
    record = fake_record("20260103T000000Z-cccc4444", tmp_path / "gone.yaml", "0" * 64)
    record["task"]["classes"] = []
    record["throughput"] = {"throughput_img_s": 41.25, "forward_img_s": 52.5, "device_name": "NVIDIA A100",
                            "gpu_hours_est": 0.0123}
    write_run_json(tmp_path, record)
    lines = run_cli("show", "20260103", "--out", tmp_path).stdout.splitlines()
    assert "          selection metric f1_macro; no classes (a survival, regression or consistency task)" in lines
    assert ("speed     extraction 41.2 img/s, forward alone 52.5 img/s on NVIDIA A100; the task's extraction "
            "0.0123 device-hours") in lines


def test_show_json_prints_the_stored_document_with_its_schema_and_cwd(runs):
    out, _ = runs
    document = json.loads(run_cli("show", "20260101T000000Z-aaaa1111", "--out", out, "--json").stdout)
    assert document["results_schema"] == RESULTS_SCHEMA_VERSION and document["cwd"]
    assert document["model"]["weights_id"] == "sha256:feed"


@pytest.mark.parametrize("run_id, fragments", [
    # The matches are listed (issue 25 item 8): reference, the two ids the fixture wrote on 2026-01-01.
    ("20260101", ["matches 2 runs", ": 20260101T000000Z-aaaa1111, 20260101T000000Z-aaaa2222; give more of it"]),
    ("zzz", ["no run 'zzz'", "run_id column"]),
])
def test_an_ambiguous_or_unknown_run_id_is_a_one_line_error(runs, run_id, fragments):
    assert_one_line_error(run_cli("show", run_id, "--out", runs[0]), *fragments)


def test_a_damaged_results_json_or_missing_runs_folder_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("show", "x", "--out", tmp_path), "no runs folder")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "broken.json").write_text('{"run_id": ')
    assert_one_line_error(run_cli("show", "broken", "--out", tmp_path), "cannot read results", "damaged")


@pytest.mark.slow
def test_a_real_run_is_shown_and_summarised(tmp_path):
    result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn",
                     "--num-workers", "0", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    rows = leaderboard_rows(tmp_path)
    assert {r["headline_metric"] for r in rows} == {"balanced_accuracy"} and {r["schema"] for r in rows} == {str(SCHEMA_VERSION)}
    run_id = rows[0]["run_id"]

    shown = run_cli("show", run_id[:20], "--out", tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"run       {run_id}" in shown.stdout and "(card unchanged since the run)" in shown.stdout
    assert ("command   python -m evalsuite run --task demo --model test_vit --random-init --probes knn "
            "--num-workers 0 --out") in shown.stdout
    document = json.loads((tmp_path / "runs" / f"{run_id}.json").read_text())
    assert document["versions"]["evalsuite_git"] is None or len(document["versions"]["evalsuite_git"]) >= 40

    board = run_cli("leaderboard", "--out", tmp_path)
    assert board.returncode == 0, board.stderr
    test_score = next(float(r["value"]) for r in rows if (r["split"], r["metric"]) == ("test", "balanced_accuracy"))
    low, high = next((float(r["ci_low"]), float(r["ci_high"])) for r in rows
                     if (r["split"], r["metric"]) == ("test", "balanced_accuracy"))
    assert f"{test_score:.4f} [{low:.4f}, {high:.4f}] [knn, 1, #1]" in board.stdout


def _seeded_record(run_id: str, card, sha: str) -> dict:
    """Three seeds of knn; test f1_macro 0.5, 0.6, 0.7 with bootstrap intervals; val 0.6 each; the interval of the
    mean f1_macro as the run stores it (nll has none: a run made before it was stored)."""
    record = fake_record(run_id, card, sha)
    record["seeds"] = [0, 1, 2]
    record["probes"] = [{"probe": "knn", "seed": seed, "recipe": {}, "selected_params": {"k": 3},
                         "metrics": {"val": {"f1_macro": 0.6}, "test": {"f1_macro": test, "nll": 2.13}},
                         "intervals_95": {"test": {"f1_macro": interval, "nll": [1.9, 2.4]}}}
                        for seed, test, interval in ((0, 0.5, [0.4, 0.6]), (1, 0.6, [0.5, 0.7]), (2, 0.7, [0.45, 0.8]))]
    record["intervals_95_seed_mean"] = {"test": {"knn": {"f1_macro": [0.52, 0.67]}}}
    return record


def test_show_summarises_seeds_with_mean_std_and_the_test_interval(tmp_path):
    """Issue 25 item 8. Reference by hand: f1_macro over 0.5, 0.6, 0.7 is 0.6000 ± 0.1000 (sample std); the test
    interval is the interval of that mean the run stored (issue 38), never the seeds' envelope (0.40 to 0.80);
    without one (nll) it is "-"; the headline (f1_macro) comes first."""
    write_run_json(tmp_path, _seeded_record("20260104T000000Z-dddd5555", tmp_path / "c.yaml", "0" * 64))
    lines = run_cli("show", "20260104", "--out", tmp_path).stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("summary   mean ± sample std over seeds 0, 1, 2"))
    assert lines[start + 1].split() == ["probe", "metric", "train", "val", "test", "test", "interval"]
    assert lines[start + 3].split() == ["knn", "f1_macro", "-", "0.6000", "±", "0.0000", "0.6000", "±", "0.1000",
                                        "[0.5200,", "0.6700]"]
    assert lines[start + 4].split() == ["knn", "nll", "-", "-", "2.1300", "±", "0.0000", "-"]


def test_an_ambiguous_run_id_lists_at_most_ten_matches(tmp_path):
    for index in range(12):
        write_run_json(tmp_path, fake_record(f"20260105T0000{index:02d}Z-eeee", tmp_path / "c.yaml", "0" * 64))
    result = run_cli("show", "20260105", "--out", tmp_path)
    assert_one_line_error(result, "matches 12 runs", "20260105T000000Z-eeee, ", "20260105T000009Z-eeee and 2 more")
