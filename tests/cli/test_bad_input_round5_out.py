"""--out, --plots, --weights and robustness --seed (issue 48): one `evalsuite: error:` line saying what is wrong and
the fix, a non-zero exit, before any extraction where the input is known up front, and no file left behind that no
run JSON names. Runs go through the CLI's main() in this process (imports paid once), on the demo with timm's
64-wide test_vit."""

import errno
import os
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error, make_crc

from evalsuite import cli, runner  # noqa: F401  (imported once, here)
from evalsuite.config import MAX_SEED
from evalsuite.features import budget

TINY = ["--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0", "--device", "cpu"]


def _cli(capsys, *args) -> subprocess.CompletedProcess:
    capsys.readouterr()
    code = cli.main([*map(str, args)])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.suffix != ".lock") \
        if folder.exists() else []


def test_out_on_a_disk_with_less_room_than_the_caches_is_refused_before_extracting(capsys, tmp_path, monkeypatch):
    """Before: the planner looked at the free space only for memory-mapped caches; a RAM cache is written to disk
    too, so the run failed with ENOSPC after writing train."""
    out = tmp_path / "out"
    monkeypatch.setattr(budget, "_free_disk_bytes", lambda folder: 1024)  # the file system's free-space reading
    result = _cli(capsys, "run", *TINY, "--probes", "knn", "--out", out)
    needed = (333 + 106 + 112) * 64 * 2  # the demo's train, val and test tiles x 64 float16 features
    assert_one_line_error(result, "--out", str(out / "cache"), f"({needed} bytes) on disk", "(1024 bytes) free",
                          "pass --out on a disk with room")
    assert not list(out.glob("cache/*/manifest.json")) and not (out / "leaderboard.csv").exists()


def test_a_failing_reliability_plot_takes_the_plots_written_before_it_along(capsys, tmp_path, monkeypatch):
    """Before: the second PNG's ENOSPC left the first one in runs/, named by no run JSON."""
    out, real_replace, pngs = tmp_path / "out", os.replace, []

    def disk_full_at_the_second_png(source, target, *args, **kwargs):
        if str(target).endswith(".reliability.png"):
            pngs.append(target)
            if len(pngs) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", disk_full_at_the_second_png)
    data = make_crc(tmp_path / "data", train_per_class=2, test_per_class=1, size=(16, 16))
    result = _cli(capsys, "run", "--task", "crc", "--no-count-check", "--data-root", data, *TINY[2:], "--probes", "knn",
                  "--seeds", "0,1", "--plots", "--out", out)
    assert_one_line_error(result, "reliability diagram", "no space left on the device")
    assert len(pngs) == 2
    assert [name for name in _files(out) if name.startswith("runs")] == []
    assert not (out / "leaderboard.csv").exists()


def _loop(root: Path) -> tuple[Path, list]:
    (root / "loop").symlink_to("loop")
    return root / "loop", ["it is a symlink loop", "point the link at a folder or pass another --out"]


def _loop_above(root: Path) -> tuple[Path, list]:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    return root / "a" / "out", [f"{root / 'a'} is a symlink loop"]


def _dangling(root: Path) -> tuple[Path, list]:
    (root / "results").symlink_to(root / "scratch" / "results")
    return root / "results", [f"it is a symlink to a missing folder ({root / 'scratch' / 'results'})",
                              "create that folder (mkdir -p) or pass another --out"]


LINKS = {"loop": _loop, "loop-above": _loop_above, "dangling": _dangling}


@pytest.mark.parametrize("case", LINKS)
def test_an_out_symlink_that_leads_nowhere_says_what_it_is(capsys, tmp_path, case):
    """Before: a loop was an internal error, a dangling link "a file in the way" after the whole extraction."""
    root = tmp_path / "root"
    root.mkdir()
    out, fragments = LINKS[case](root)
    before = sorted(os.listdir(root))
    result = _cli(capsys, "run", *TINY, "--probes", "knn", "--out", out)
    assert result.returncode == 2
    assert_one_line_error(result, f"--out {out}", *fragments)
    assert sorted(os.listdir(root)) == before


def test_a_weights_file_name_that_is_no_label_is_refused_naming_weights_and_label(capsys, tmp_path):
    """Before: the label made of the file's stem skipped --label's rule, and leaderboard.csv got a line break."""
    weights = tmp_path / "x\ny.safetensors"
    weights.write_bytes(b"")  # refused on its name, before it is read
    out = tmp_path / "out"
    result = _cli(capsys, "run", "--task", "demo", "--model", "test_vit", "--weights", weights, "--out", out)
    assert result.returncode == 2
    assert_one_line_error(result, "--weights", "'test_vit+x\\ny'", "it holds '\\n'", "pass --label")
    assert not out.exists()


def test_robustness_refuses_a_seed_run_refuses(capsys, tmp_path):
    out = tmp_path / "out"
    result = _cli(capsys, "robustness", *TINY, "--seed", MAX_SEED + 1, "--out", out)
    assert result.returncode == 2
    assert_one_line_error(result, f"--seed must be a non-negative integer up to {MAX_SEED}", f"got {MAX_SEED + 1}")
    assert not out.exists()
