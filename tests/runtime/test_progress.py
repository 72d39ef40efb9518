"""Progress of probe training as a Slurm log receives it: stderr a pipe, not a terminal (issue 25 item 3)."""

import io
import re

import pytest
from conftest import make_pannuke, make_pcam, run_cli

from evalsuite.runtime.progress import Progress, labelled

FAST = ["--model", "test_vit", "--random-init", "--num-workers", "0", "--no-count-check", "--batch-size", "16"]
LINEAR = "name: quick_linear\nprobe: linear\nparams:\n  lr: [0.01, 0.001]\n  weight_decay: [0.0]\n  epochs: 20\n"
MASK = ("name: quick_mask\nprobe: seg_masktransformer\nparams:\n  d_model: 32\n  n_heads: 2\n  d_ff: 64\n"
        "  epochs: 4\n  batch_size: 2\n")
EVERY_LINE = {"EVALSUITE_PROGRESS_AFTER_S": "0"}  # the 5 s grace would hide the lines of a tiny fit


def _cached_rerun(args, tmp_path, env):
    """The run twice: the second reads the cache, so its stderr holds the probes' output alone (the extraction bar
    belongs to features/)."""
    first = run_cli(*args, env={"TQDM_DISABLE": "1"})
    assert first.returncode == 0, first.stderr
    again = run_cli(*args, env=env)
    assert again.returncode == 0, again.stderr
    return again.stderr


def _progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.split("\n") if line.startswith("progress: ")]


def test_linear_fits_report_epochs_with_the_val_metric_in_plain_lines(tmp_path):
    root, recipe = make_pcam(tmp_path / "data"), tmp_path / "quick_linear.yaml"
    recipe.write_text(LINEAR)
    args = ["run", "--task", "pcam", "--data-root", root, "--out", tmp_path / "out", *FAST, "--probes", recipe,
            "--seeds", "0,1"]
    stderr = _cached_rerun(args, tmp_path, EVERY_LINE)
    assert "\r" not in stderr  # before: nothing at all was printed while a probe trained
    lines = _progress_lines(stderr)
    for seed, fit in ((0, 1), (1, 2)):
        ours = [line for line in lines if line.startswith(f"progress: quick_linear seed {seed}, fit {fit}/2: ")]
        epochs = [int(m.group(1)) for m in map(re.compile(r": epoch (\d+)/20, ").search, ours) if m]
        assert epochs == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20], ours  # one line per tenth of the 20 epochs
        assert all("val balanced_accuracy 0." in line for line in ours[:-1]), ours
        assert ours[-1].startswith(f"progress: quick_linear seed {seed}, fit {fit}/2: done, epoch 20/20 in ")


def test_extraction_reports_images_in_plain_lines_not_carriage_returns(tmp_path):
    # Before: a tqdm bar redrawn with '\r' every 10 s into the Slurm log, however long the extraction.
    root = make_pcam(tmp_path / "data")
    result = run_cli("run", "--task", "pcam", "--data-root", root, "--out", tmp_path / "out", *FAST,
                     "--probes", "knn", env=EVERY_LINE)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr
    lines = [line for line in _progress_lines(result.stderr) if " img " in line]
    done = [re.search(r"done, img (\d+)/(\d+) in ", line) for line in lines]
    finished = [(int(m.group(1)), int(m.group(2))) for m in done if m]
    assert len(finished) == 3 and all(a == b > 0 for a, b in finished), lines  # train, val, test extracted whole


def test_mask_transformer_reports_every_epoch_of_a_short_fit(tmp_path):
    root, recipe = make_pannuke(tmp_path / "data"), tmp_path / "quick_mask.yaml"
    recipe.write_text(MASK)
    args = ["run", "--task", "pannuke", "--data-root", root, "--out", tmp_path / "out", *FAST, "--probes", recipe]
    stderr = _cached_rerun(args, tmp_path, EVERY_LINE)
    assert "\r" not in stderr
    lines = [line for line in _progress_lines(stderr) if line.startswith("progress: quick_mask ")]  # not the stages
    assert [line.split(": ")[2].split(",")[0] for line in lines] == ["epoch 1/4", "epoch 2/4", "epoch 3/4",
                                                                      "epoch 4/4", "done"], lines
    assert all(line.startswith("progress: quick_mask seed 0, fit 1/1: ") for line in lines)
    assert all(", val dice_fg_mean " in line for line in lines[:-1]) and "kept epoch " in lines[-1], lines


def test_a_long_loop_gets_at_most_a_line_per_tenth(monkeypatch):
    monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", "0")
    log = io.StringIO()  # not a terminal: plain lines
    with labelled("grid"):
        progress = Progress("unused", 1000, unit="config", stream=log)
        for done in range(1, 1001):
            progress.update(done, lambda: "ok")
        progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 11 and lines[0] == "progress: grid: config 100/1000, ok, " + lines[0].split(", ")[-1]
    assert lines[-1].startswith("progress: grid: done, config 1000/1000 in ")


@pytest.mark.parametrize("value", ["x", "-3"])
def test_a_bad_delay_falls_back_to_a_valid_one(monkeypatch, value):
    monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", value)
    log = io.StringIO()
    progress = Progress("loop", 10, stream=log)
    progress.update(10)
    progress.close()
    assert ("progress: loop: done" in log.getvalue()) == (value == "-3")  # -3 is clamped to 0: every line


def test_a_loop_shorter_than_the_delay_prints_nothing(monkeypatch):
    monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", "1000")  # the default is 5 s: sub-second fits stay quiet
    log = io.StringIO()
    progress = Progress("loop", 10, stream=log)
    for done in range(1, 11):
        progress.update(done, "ok")
    progress.close("summary")
    assert log.getvalue() == ""


def test_the_linear_probes_progress_lines_leave_its_fit_unchanged(monkeypatch, capsys):
    """The val pass behind each line must not move the heads: the same seed gives the same weights, lines or not."""
    import numpy as np

    from evalsuite.probes.pooled.linear import LinearProbe

    rng = np.random.default_rng(0)
    labels = np.arange(90) % 3
    features = (rng.normal(size=(90, 8)) + labels[:, None]).astype(np.float16)
    weights = {}
    for after_s in ("0", "1000"):
        monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", after_s)
        probe = LinearProbe(3, lr=[1e-2, 1e-3], epochs=10, batch_size=16).fit(features, labels, features, labels)
        weights[after_s] = (probe.head_.weight.detach().numpy().copy(), probe.selected_params_)
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == (11 if after_s == "0" else 0), lines
    assert np.array_equal(weights["0"][0], weights["1000"][0]) and weights["0"][1] == weights["1000"][1]


def test_fewshot_reports_each_shot_count_as_a_config(monkeypatch, capsys):
    import numpy as np

    from evalsuite.probes import FewShotProbe

    monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", "0")
    rng = np.random.default_rng(0)
    labels = np.arange(60) % 3
    features = (rng.normal(size=(60, 8)) + labels[:, None]).astype(np.float16)
    FewShotProbe(3, shots=[1, 2, 4], support_sets=5).evaluate({"train": (features, labels), "test": (features, labels)})
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[0] for line in lines[:3]] == [f"progress: fewshot: config {k}/3" for k in (1, 2, 3)]
    assert "4-shot x 5 sets: test balanced_accuracy 0." in lines[2] and lines[3].startswith("progress: fewshot: done")


def test_abmil_reports_epochs_and_the_kept_one(monkeypatch, capsys):
    import numpy as np

    from evalsuite.features.bags import SlideBags
    from evalsuite.probes import ABMILProbe

    monkeypatch.setenv("EVALSUITE_PROGRESS_AFTER_S", "0")
    rng = np.random.default_rng(0)
    targets = np.arange(8) % 2
    tiles = np.concatenate([rng.normal(size=(3, 4)) + t for t in targets]).astype(np.float16)
    bags = SlideBags(tiles, np.arange(0, 25, 3))
    with labelled("abmil seed 0, fit 1/1"):
        ABMILProbe(2, epochs=5, patience=None, batch_size=4).fit(bags, targets, bags, targets)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[1] for line in lines[:5]] == [f"fit 1/1: epoch {k}/5" for k in range(1, 6)], lines
    assert all("val score " in line and "val loss " in line for line in lines[:5])
    assert lines[5].startswith("progress: abmil seed 0, fit 1/1: done, epoch 5/5 in ") and "kept epoch " in lines[5]
