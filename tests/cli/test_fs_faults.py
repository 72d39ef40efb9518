"""File-system faults, non-finite caches and `cache rm` safety: the rows of the bad-input corpus (issue 13)
that tests/cli/test_bad_input_corpus.py leaves to this file.

Every fault must end in one `evalsuite: error:` line naming the path and what to do, exit 2, with no
temp file left behind and the caches and leaderboard as they were. Real faults come from small tmpfs
mounts: a read-only remount, and a file system filled up to a chosen number of free bytes (so the
run's own writes hit ENOSPC). Mounting needs root; without it those tests skip. A fault at one precise
write call (a chunk's pwrite or fsync, a manifest rename, the leaderboard's write) is injected by
patching that `os` function for the one file. Runs go through the CLI's main() in this process (the
imports and one extraction are paid once) on a tiny CRC layout and timm's 64-wide test_vit.
"""

import csv
import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    PAGE,
    REPO,
    assert_one_line_error,
    cache_manifests,
    fill_leaving,
    leaderboard_rows,
    make_crc,
    remount_read_only,
)
from test_bad_input_corpus import report_board, report_cli

from evalsuite import cli, runner
from evalsuite.features.chunk_log import CHUNK_LOG_FILE
from evalsuite.results.leaderboard import COLUMNS

RUN = ["run", "--task", "crc", "--no-count-check", "--model", "test_vit", "--random-init", "--precision", "fp32",
       "--num-workers", "0", "--probes", "knn"]
FOREIGN_CSV = b"name,score\nx,1\n"
NOBODY = 65534


@pytest.fixture(scope="module")
def shared():
    """A world-readable folder (one test runs as `nobody`) with the tiny CRC data and a complete cached run."""
    base = Path(tempfile.mkdtemp(prefix="evalsuite-fs-faults-"))
    base.chmod(0o755)
    data = make_crc(base / "data", train_per_class=2, test_per_class=1, size=(16, 16))
    assert cli.main([*RUN, "--data-root", str(data), "--out", str(base / "cached")]) == 0
    # Copies of the card and recipe `nobody` can read even when the checkout sits in a private folder.
    shutil.copy(REPO / "datasets" / "crc.yaml", base / "crc.yaml")
    shutil.copy(REPO / "probes" / "knn.yaml", base / "knn.yaml")
    yield {"data": data, "cached": base / "cached", "base": base}
    shutil.rmtree(base)


def run(capsys, shared, out, *extra) -> subprocess.CompletedProcess:
    """`evalsuite run` on the tiny CRC layout through the CLI's main(), as a completed process."""
    capsys.readouterr()
    base = RUN[:-2] if "--probes" in extra else RUN  # a repeated --probes adds to the list: extra's replaces RUN's
    code = cli.main([*base, "--data-root", str(shared["data"]), "--out", str(out), *extra])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(RUN, code, captured.out, captured.err)


def cache_cli(capsys, *args) -> subprocess.CompletedProcess:
    capsys.readouterr()
    code = cli.main(["cache", *map(str, args)])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["cache", *args], code, captured.out, captured.err)


def expect_error(result, *fragments) -> None:
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, *fragments)


def snapshot(folder: Path) -> dict:
    """Every file's bytes, lock files aside (empty, created by any run, and no data)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.suffix != ".lock"}


def debris(folder: Path) -> list[str]:
    return [str(p) for p in Path(folder).rglob("*") if p.name.endswith(".tmp") or "write-check" in p.name]


def cache_keys(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "cache").iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if (out / "cache").is_dir() else []


def run_jsons(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "runs").glob("*")) if (out / "runs").is_dir() else []


def old_schema_leaderboard(path: Path, min_bytes: int = 0) -> bytes:
    """Rewrite a leaderboard with the schema-3 header (no `precision`), so the next append widens it."""
    rows = leaderboard_rows(path.parent)
    header = COLUMNS[: COLUMNS.index("precision")]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    copy = 0
    while copy == 0 or len(buffer.getvalue()) < min_bytes:
        writer.writerows({**row, "schema": 3, "run_id": f"{row['run_id']}-{copy}"} for row in rows)
        copy += 1
    path.write_bytes(buffer.getvalue().encode())
    return path.read_bytes()


# ---- --out that cannot hold a run ----------------------------------------------------------------------------

def _out_is_a_file(root):
    (root / "x").write_text("notes\n")
    return root / "x", [str(root / "x"), "is a file"]


def _parent_is_a_file(root):
    (root / "x").write_text("notes\n")
    return root / "x" / "sub", [str(root / "x" / "sub"), f"{root / 'x'} is a file"]


def _sub_folder_is_a_file(name):
    def setup(root):
        (root / "out").mkdir()
        (root / "out" / name).write_text("notes\n")
        return root / "out", [str(root / "out" / name), "is a file, not a folder"]
    return setup


def _leaderboard_is_a_folder(root):
    (root / "out" / "leaderboard.csv").mkdir(parents=True)
    return root / "out", [str(root / "out" / "leaderboard.csv"), "is a folder"]


NOT_A_FOLDER = {"out-is-a-file": _out_is_a_file, "parent-is-a-file": _parent_is_a_file,
                "runs-is-a-file": _sub_folder_is_a_file("runs"), "cache-is-a-file": _sub_folder_is_a_file("cache"),
                "leaderboard-is-a-folder": _leaderboard_is_a_folder}


@pytest.mark.parametrize("case", NOT_A_FOLDER)
def test_out_that_cannot_hold_a_run_is_refused_before_any_work(capsys, shared, tmp_path, case):
    out, fragments = NOT_A_FOLDER[case](tmp_path)
    before = sorted(map(str, tmp_path.rglob("*")))
    expect_error(run(capsys, shared, out), *fragments, "--out")
    assert sorted(map(str, tmp_path.rglob("*"))) == before  # nothing created, nothing extracted


READ_ONLY = ["cached-run", "new-extraction", "old-header-leaderboard", "new-sub-folder"]


@pytest.mark.parametrize("case", READ_ONLY)
def test_read_only_out_is_a_one_line_error_and_changes_nothing(capsys, shared, tmpfs, case):
    fs = tmpfs()
    out = fs / "out"
    if case in ("cached-run", "old-header-leaderboard"):
        shutil.copytree(shared["cached"], out)
    if case == "old-header-leaderboard":
        old_schema_leaderboard(out / "leaderboard.csv")
    if case == "new-extraction":
        out.mkdir()
    if case == "new-sub-folder":
        out = fs / "new" / "sub"
    remount_read_only(fs)
    before = snapshot(fs)
    expect_error(run(capsys, shared, out), str(out), "read-only file system", "writable")
    assert snapshot(fs) == before


# ---- a full disk ---------------------------------------------------------------------------------------------

def test_disk_full_while_writing_results_leaves_no_run_json_and_no_temp_file(capsys, shared, tmpfs):
    fs = tmpfs()
    out = fs / "out"
    shutil.copytree(shared["cached"], out)
    fill_leaving(fs, 0)
    before = snapshot(out)
    expect_error(run(capsys, shared, out), str(out / "runs"), "no space left", "free space")
    assert snapshot(out) == before
    assert not debris(fs)


def test_disk_full_while_widening_the_leaderboard_header_leaves_it_as_it_was(capsys, shared, tmpfs):
    fs = tmpfs()
    out = fs / "out"
    shutil.copytree(shared["cached"], out)
    old = old_schema_leaderboard(out / "leaderboard.csv", min_bytes=256 * 1024)
    fill_leaving(fs, 64 * 1024)  # room for the run JSON (a few KiB), not for the widened copy of the leaderboard
    runs_before = run_jsons(out)
    expect_error(run(capsys, shared, out), str(out / "leaderboard.csv"), "no space left")
    assert (out / "leaderboard.csv").read_bytes() == old
    assert run_jsons(out) == runs_before
    assert not debris(fs)


def test_disk_full_during_extraction_leaves_no_partial_cache(capsys, shared, tmpfs):
    fs = tmpfs()
    out = fs / "out"
    out.mkdir()
    # The budget planner sees room for the features (27 rows x 64 float16 = 3.4 KB); the cache's
    # headers, labels and manifests need more pages than that, so a write inside extraction fails.
    fill_leaving(fs, 2 * PAGE)
    expect_error(run(capsys, shared, out), str(out / "cache"), "no space left")
    assert cache_keys(out) == [] and run_jsons(out) == [] and not (out / "leaderboard.csv").exists()
    assert not debris(fs)


# ---- a fault at one write call -------------------------------------------------------------------------------

def inject(monkeypatch, function: str, file_name: str, error: int, after: int = 0, times: int = 1 << 30) -> None:
    """os.FUNCTION raises OSError(error) for `file_name` on `times` calls, after `after` successful ones."""
    real = getattr(os, function)
    calls = []

    def target_of(args) -> str:
        target = args[1] if function == "replace" else args[0]
        return os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else str(target)

    def failing(*args, **kwargs):
        if Path(target_of(args)).name == file_name:
            calls.append(1)
            if after < len(calls) <= after + times:
                raise OSError(error, os.strerror(error))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, function, failing)


CACHE_WRITE_FAULTS = {
    "chunk-pwrite-full": ("pwrite", "features.npy", errno.ENOSPC, 0, ["features.npy", "no space left"]),
    "chunk-fsync-io-error": ("fsync", "features.npy", errno.EIO, 0, ["features.npy", "Input/output error"]),
    "manifest-create-full": ("replace", "manifest.json", errno.ENOSPC, 0, ["create feature cache", "no space left"]),
    "chunk-record-quota": ("write", "chunks.jsonl", errno.EDQUOT, 0, ["chunks.jsonl", "disk quota exceeded"]),
    "chunk-record-fsync-io-error": ("fsync", "chunks.jsonl", errno.EIO, 0, ["chunks.jsonl", "Input/output error"]),
}


@pytest.mark.parametrize("case", CACHE_WRITE_FAULTS)
def test_fault_at_a_cache_write_leaves_no_cache_and_no_temp_file(capsys, shared, tmp_path, monkeypatch, case):
    function, file_name, error, after, fragments = CACHE_WRITE_FAULTS[case]
    out = tmp_path / "out"
    inject(monkeypatch, function, file_name, error, after)
    expect_error(run(capsys, shared, out), str(out / "cache"), *fragments)
    assert cache_keys(out) == []  # the train cache failed before its first chunk was recorded: nothing to resume
    assert run_jsons(out) == [] and not (out / "leaderboard.csv").exists()
    assert not debris(tmp_path)


def test_quota_hit_finishing_a_cache_leaves_its_chunks_for_the_rerun(capsys, shared, tmp_path, monkeypatch):
    """The manifest is rewritten only when a cache starts and finishes (chunk records go to chunks.jsonl): a fault at
    the finish keeps every chunk, and the rerun completes the cache without extracting anything again."""
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        inject(patch, "replace", "manifest.json", errno.EDQUOT, after=1)
        expect_error(run(capsys, shared, out, "--chunk-rows", "8"), "manifest.json", "disk quota exceeded")
    (manifest,) = cache_manifests(out).values()
    assert [chunk["done"] for chunk in manifest["chunks"]] == [True, True] and not manifest["complete"]
    assert not debris(tmp_path)
    rerun = run(capsys, shared, out, "--chunk-rows", "8")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads((out / "runs" / run_jsons(out)[0]).read_text())["samples_extracted"]["train"] == 0
    assert not list((out / "cache").glob(f"*/{CHUNK_LOG_FILE}"))  # folded into the finished manifests


def test_an_unreadable_chunk_log_is_one_line_naming_it_and_the_cache_is_kept(capsys, shared, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        inject(patch, "pwrite", "features.npy", errno.ENOSPC, after=1)
        expect_error(run(capsys, shared, out, "--chunk-rows", "8"), "features.npy", "no space left")
    (key,) = cache_keys(out)
    log = out / "cache" / key / CHUNK_LOG_FILE
    before = snapshot(out)
    real_read_bytes = Path.read_bytes

    def failing(path):
        if path.name == CHUNK_LOG_FILE:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_read_bytes(path)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "read_bytes", failing)
        expect_error(run(capsys, shared, out, "--chunk-rows", "8"), f"cannot read {log}", "Input/output error")
    assert snapshot(out) == before and not (out / "leaderboard.csv").exists()


def test_disk_full_after_the_first_chunk_leaves_a_cache_the_rerun_resumes(capsys, shared, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        inject(patch, "pwrite", "features.npy", errno.ENOSPC, after=1)
        expect_error(run(capsys, shared, out, "--chunk-rows", "8"), "features.npy", "no space left")
    (manifest,) = cache_manifests(out).values()
    assert [chunk["done"] for chunk in manifest["chunks"]] == [True, False] and not manifest["complete"]  # 9 rows
    assert not debris(tmp_path)
    rerun = run(capsys, shared, out, "--chunk-rows", "8")
    assert rerun.returncode == 0, rerun.stderr
    name, predictions = run_jsons(out)  # the run JSON and the test predictions it names
    assert json.loads((out / "runs" / name).read_text())["predictions"]["file"] == predictions
    assert json.loads((out / "runs" / name).read_text())["samples_extracted"]["train"] == 9 - 8


def test_disk_full_appending_to_the_leaderboard_leaves_it_byte_for_byte(capsys, shared, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    with open(out / "leaderboard.csv", "ab") as handle:
        handle.write(b"5,torn-by-a-killed-writer,2026")  # an unfinished last line, cut off by the next append
    before, runs_before = snapshot(out), run_jsons(out)
    inject(monkeypatch, "write", "leaderboard.csv", errno.ENOSPC, times=1)  # the rows' write; the restore works
    expect_error(run(capsys, shared, out), str(out / "leaderboard.csv"), "no space left")
    assert snapshot(out) == before and run_jsons(out) == runs_before
    assert not debris(tmp_path)


# ---- `evalsuite leaderboard` writes leaderboard_wide.csv and the heatmap -----------------------------------------

def board_cli(capsys, *args) -> subprocess.CompletedProcess:
    capsys.readouterr()
    code = cli.main(["leaderboard", *map(str, args)])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["leaderboard", *args], code, captured.out, captured.err)


def test_leaderboard_on_a_read_only_out_prints_the_table_and_says_the_csv_was_not_written(capsys, shared, tmpfs):
    """Issue 24: it refused to print because it could not write leaderboard_wide.csv."""
    fs = tmpfs()
    out = fs / "out"
    shutil.copytree(shared["cached"], out)
    remount_read_only(fs)
    before = snapshot(fs)
    result = board_cli(capsys, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "test_vit" in result.stdout and "crc" in result.stdout  # the table
    assert f"note: leaderboard_wide.csv not written (cannot write {out / 'leaderboard_wide.csv'}: read-only file " \
           "system" in result.stderr
    assert snapshot(fs) == before


def test_plot_into_a_read_only_folder_names_plot_and_writes_no_wide_table(capsys, shared, tmpfs, tmp_path):
    """Issue 24: the refusal said "pass an --out folder" and came after leaderboard_wide.csv was written."""
    fs = tmpfs()
    remount_read_only(fs)
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    (out / "leaderboard_wide.csv").unlink(missing_ok=True)
    result = board_cli(capsys, "--out", out, "--plot", fs / "plots" / "map.png")
    expect_error(result, "--plot", str(fs), "read-only file system", "a --plot path on a writable file system")
    assert "--out" not in result.stderr
    assert not (out / "leaderboard_wide.csv").exists()


def test_disk_full_writing_the_wide_table_or_the_heatmap_keeps_the_old_files(capsys, shared, tmpfs):
    fs = tmpfs()
    out = fs / "out"
    shutil.copytree(shared["cached"], out)
    assert board_cli(capsys, "--out", out, "--plot", out / "map.png").returncode == 0
    wide, image = (out / "leaderboard_wide.csv").read_bytes(), (out / "map.png").read_bytes()
    fill_leaving(fs, 0)
    full = board_cli(capsys, "--out", out)  # the table is printed; the CSV is not written (issue 24)
    assert full.returncode == 0 and "note: leaderboard_wide.csv not written" in full.stderr, full.stderr
    assert str(out / "leaderboard_wide.csv") in full.stderr and "no space left" in full.stderr
    (out / "leaderboard_wide.csv").rename(out / "kept.csv")  # the wide table is written first: move it out of the way
    (fs / "filler").unlink()
    assert len(wide) < PAGE
    fill_leaving(fs, PAGE)  # room for the wide table again, not for the image
    expect_error(board_cli(capsys, "--out", out, "--plot", out / "map.png"), str(out / "map.png"), "no space left")
    assert (out / "kept.csv").read_bytes() == wide and (out / "map.png").read_bytes() == image
    assert not debris(fs)


def test_report_html_on_a_full_disk_keeps_the_old_page_and_leaves_no_temp_file(capsys, tmpfs):
    """Issue 40: Errno 28 from the page's write was an internal error."""
    fs = tmpfs()
    out = fs / "out"
    out.mkdir()
    report_board(out)
    assert report_cli(capsys, "--out", out).returncode == 0
    page = (out / "report.html").read_bytes()
    fill_leaving(fs, 0)
    expect_error(report_cli(capsys, "--out", out), f"cannot write {out / 'report.html'}", "no space left",
                 "a --html path on a disk with room")
    assert (out / "report.html").read_bytes() == page
    assert not debris(fs)


def test_report_html_failing_at_its_fsync_keeps_the_old_page(capsys, tmp_path, monkeypatch):
    """The same fault without a tmpfs (no root needed): the staged page's fsync answers ENOSPC."""
    out = tmp_path / "out"
    out.mkdir()
    report_board(out)
    target = out / "pages" / "report.html"
    target.parent.mkdir()
    target.write_bytes(b"the old page")
    inject(monkeypatch, "fsync", f".report.html.{os.getpid()}.tmp", errno.ENOSPC)
    expect_error(report_cli(capsys, "--out", out, "--html", target), f"cannot write {target}", "no space left")
    assert target.read_bytes() == b"the old page"
    assert not debris(tmp_path)


# ---- permissions ---------------------------------------------------------------------------------------------

def _readable_task(shared) -> list[str]:
    return ["--task", str(shared["base"] / "crc.yaml"), "--probes", str(shared["base"] / "knn.yaml")]


@pytest.fixture
def as_nobody():
    """Run the block with the effective uid of `nobody` (root bypasses permission bits)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to the nobody user")

    class Nobody:
        def __enter__(self):
            os.seteuid(NOBODY)

        def __exit__(self, *exc):
            os.seteuid(0)

    return Nobody()


def test_out_without_write_permission_is_refused_before_any_work(capsys, shared, as_nobody):
    out = Path(tempfile.mkdtemp(prefix="out-", dir=shared["base"]))
    out.chmod(0o555)
    with as_nobody:
        result = run(capsys, shared, out, *_readable_task(shared))
    expect_error(result, str(out), "permission denied", "writable for this user")
    assert not list(out.iterdir())


def _cached_out_of_nobody_with_roots_leaderboard(shared) -> Path:
    """A copy of the cached run owned by `nobody`, except leaderboard.csv, which stays root's."""
    parent = Path(tempfile.mkdtemp(prefix="out-", dir=shared["base"]))
    parent.chmod(0o755)
    out = parent / "out"
    shutil.copytree(shared["cached"], out)
    for path in [out, *out.rglob("*")]:
        os.chown(path, NOBODY, -1)
    os.chown(out / "leaderboard.csv", 0, -1)
    return out


def test_leaderboard_without_write_permission_leaves_no_run_json(capsys, shared, as_nobody):
    out = _cached_out_of_nobody_with_roots_leaderboard(shared)  # mode 0644: nobody reads it but cannot append
    before, runs_before = snapshot(out), run_jsons(out)
    with as_nobody:
        result = run(capsys, shared, out, *_readable_task(shared))
    expect_error(result, str(out / "leaderboard.csv"), "permission denied")
    assert snapshot(out) == before and run_jsons(out) == runs_before
    assert not debris(out)


def test_leaderboard_without_read_permission_says_to_make_it_readable(capsys, shared, as_nobody):
    out = _cached_out_of_nobody_with_roots_leaderboard(shared)
    (out / "leaderboard.csv").chmod(0o600)  # root's and private: nobody cannot even read it
    before, runs_before = snapshot(out), run_jsons(out)
    with as_nobody:
        result = run(capsys, shared, out, *_readable_task(shared))
    expect_error(result, str(out / "leaderboard.csv"), "permission denied", "readable for this user")
    assert "writable" not in result.stderr
    assert snapshot(out) == before and run_jsons(out) == runs_before
    assert not debris(out)


# ---- a leaderboard.csv that is not an evalsuite file -----------------------------------------------------------

def test_foreign_leaderboard_refuses_before_anything_is_written(capsys, shared, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "leaderboard.csv").write_bytes(FOREIGN_CSV)
    expect_error(run(capsys, shared, out), str(out / "leaderboard.csv"), "not an evalsuite leaderboard")
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.csv"]
    assert (out / "leaderboard.csv").read_bytes() == FOREIGN_CSV


def test_leaderboard_turning_foreign_during_the_run_leaves_no_run_json(capsys, shared, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    runs_before = run_jsons(out)
    real_run_probe = runner.run_probe

    def probe_then_another_tool_writes_the_csv(*args, **kwargs):
        result = real_run_probe(*args, **kwargs)
        (out / "leaderboard.csv").write_bytes(FOREIGN_CSV)
        return result

    monkeypatch.setattr(runner, "run_probe", probe_then_another_tool_writes_the_csv)
    expect_error(run(capsys, shared, out), "not an evalsuite leaderboard")
    assert run_jsons(out) == runs_before  # no run JSON that no leaderboard row names
    assert (out / "leaderboard.csv").read_bytes() == FOREIGN_CSV
    assert not debris(out)


# ---- a cache holding NaN or inf --------------------------------------------------------------------------------

def _poison_with_matching_checksums(cache_folder: Path, value: float, row: int) -> None:
    """Overwrite one row on disk and update the manifest's checksums, as a stray edit or tool would."""
    features = np.load(cache_folder / "features.npy", mmap_mode="r+")
    features[row, :4] = value
    features.flush()
    del features
    manifest = json.loads((cache_folder / "manifest.json").read_text())
    row_bytes = int(np.prod(manifest["shape"][1:])) * 2
    data = (cache_folder / "features.npy").read_bytes()
    for chunk in manifest["chunks"]:
        start = manifest["data_offset_bytes"] + chunk["start"] * row_bytes
        chunk["sha256"] = hashlib.sha256(data[start : start + (chunk["stop"] - chunk["start"]) * row_bytes]).hexdigest()
    (cache_folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("value,mode", [(np.inf, "ram"), (np.nan, "memmap")], ids=["inf-ram", "nan-memmap"])
def test_cache_holding_non_finite_values_is_reported_as_a_corrupt_cache(capsys, shared, tmp_path, value, mode):
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    key = next(m.parent.name for m in (out / "cache").glob("*/manifest.json")
               if json.loads(m.read_text())["fields"]["split"] == "train")
    _poison_with_matching_checksums(out / "cache" / key, value, row=5)
    runs_before = run_jsons(out)

    expect_error(run(capsys, shared, out, "--cache", mode), key, "corrupt", "sample 5", "NaN/inf",
                 f"evalsuite cache rm {key}")
    assert run_jsons(out) == runs_before
    verify = cache_cli(capsys, "verify", "--out", out)
    assert f"{key}  CORRUPT NaN/inf features from sample 5" in verify.stdout
    expect_error(verify, "1 cache(s) not complete and intact", key)


# ---- cache rm --------------------------------------------------------------------------------------------------

def _fake_caches(out: Path, keys) -> None:
    for key in keys:
        (out / "cache" / key).mkdir(parents=True)
        (out / "cache" / key / "features.npy").write_bytes(b"\0" * 10)


KEYS = ["aa11aa11aa11aa11aa11aa11", "aa22aa22aa22aa22aa22aa22", "bb33bb33bb33bb33bb33bb33"]


@pytest.mark.parametrize("args", [[""], ["  "], ["", "--all"], ["bb33", ""]], ids=["empty", "blank", "empty-all",
                                                                                     "one-empty"])
def test_cache_rm_refuses_an_empty_prefix(capsys, tmp_path, args):
    _fake_caches(tmp_path, KEYS)
    expect_error(cache_cli(capsys, "rm", *args, "--out", tmp_path), "empty key prefix", "evalsuite cache ls")
    assert cache_keys(tmp_path) == KEYS


def test_cache_rm_of_a_prefix_matching_several_caches_needs_all(capsys, tmp_path):
    _fake_caches(tmp_path, KEYS)
    refused = cache_cli(capsys, "rm", "aa", "--out", tmp_path)
    expect_error(refused, "key prefix 'aa' matches 2 caches", "--all")
    assert KEYS[0] in refused.stdout and KEYS[1] in refused.stdout and KEYS[2] not in refused.stdout
    assert cache_keys(tmp_path) == KEYS

    removed = cache_cli(capsys, "rm", "aa", "--all", "--out", tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert f"removed {KEYS[0]}" in removed.stdout and f"removed {KEYS[1]}" in removed.stdout
    assert cache_keys(tmp_path) == KEYS[2:]
    assert cache_cli(capsys, "rm", "bb", "--out", tmp_path).returncode == 0  # one match: no --all needed
    assert cache_keys(tmp_path) == []


# ---- issue 24: refusals before extraction, a commit cut short, a BOM, the demo slides on a full disk ---------------

@pytest.fixture
def immutable():
    """make(path): `chattr +i` (root's read-only that chmod cannot give); undone when the test ends."""
    made = []

    def make(path: Path) -> None:
        result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True) \
            if shutil.which("chattr") else None
        if result is None or result.returncode != 0:
            pytest.skip(f"cannot make a file immutable here: {result.stderr.strip() if result else 'no chattr'}")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _out_with_the_cached_leaderboard(shared, tmp_path) -> Path:
    """A new --out holding only the cached run's leaderboard.csv: a run into it must extract features."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(shared["cached"] / "leaderboard.csv", out / "leaderboard.csv")
    return out


def test_immutable_leaderboard_is_refused_before_extraction(capsys, shared, tmp_path, immutable):
    out = _out_with_the_cached_leaderboard(shared, tmp_path)
    before = (out / "leaderboard.csv").read_bytes()
    immutable(out / "leaderboard.csv")
    expect_error(run(capsys, shared, out), f"cannot append to {out / 'leaderboard.csv'}", "operation not permitted",
                 "immutable")
    assert cache_keys(out) == [] and run_jsons(out) == []  # refused before extraction (was: after the probes)
    assert (out / "leaderboard.csv").read_bytes() == before


def test_lock_file_that_is_a_folder_is_refused_before_extraction(capsys, shared, tmp_path):
    out = _out_with_the_cached_leaderboard(shared, tmp_path)
    (out / "leaderboard.csv.lock").mkdir()
    expect_error(run(capsys, shared, out), f"cannot lock {out / 'leaderboard.csv.lock'}", "is a folder",
                 "move it aside")
    assert cache_keys(out) == [] and run_jsons(out) == []


def _leaderboard_run_ids(out: Path) -> set:
    return {row["run_id"] for row in leaderboard_rows(out)}


def _staged_jsons(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "runs").glob(".*.json.*.tmp"))


def test_out_turning_read_only_at_the_run_json_rename_is_one_line_and_the_rerun_completes(capsys, shared, tmp_path,
                                                                                          monkeypatch):
    """Issue 24: the EROFS of the temp file's cleanup in staged() replaced the one-line error (an internal error).
    The file system turns read-only (ext4's errors=remount-ro) at the rename: the rename and the cleanup's unlink
    fail with EROFS. (A tmpfs cannot be remounted read-only here: the leaderboard lock is open for writing.)"""
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    ids_before = _leaderboard_run_ids(out)
    real_replace, real_unlink = os.replace, os.unlink

    def read_only(real, path_of):
        def call(*args, **kwargs):
            path = Path(path_of(args))
            if path.parent.name == "runs" and (path.suffix == ".json" or path.name.endswith(".json." +
                                                                                         f"{os.getpid()}.tmp")):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))
            return real(*args, **kwargs)
        return call

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", read_only(real_replace, lambda args: args[1]))
        patch.setattr(os, "unlink", read_only(real_unlink, lambda args: args[0]))
        result = run(capsys, shared, out)
    expect_error(result, str(out / "runs"), "read-only file system", "leaderboard rows are written",
                 "moves the run JSON into place")
    (new_id,) = _leaderboard_run_ids(out) - ids_before
    assert len(_staged_jsons(out)) == 1 and not (out / "runs" / f"{new_id}.json").exists()

    rerun = run(capsys, shared, out)  # writable again
    assert rerun.returncode == 0, rerun.stderr
    assert f"note: run {new_id} stopped after its leaderboard rows were written" in rerun.stderr
    assert all((out / "runs" / f"{run_id}.json").is_file() for run_id in _leaderboard_run_ids(out))
    assert not debris(out)


@pytest.mark.parametrize("unlink_fails", [False, True], ids=["disk-full-rename", "read-only-everything"])
def test_a_failed_rename_after_the_append_keeps_what_the_rows_name(capsys, shared, tmp_path, monkeypatch,
                                                                   unlink_fails):
    """Review of issue 24: with the rows appended, a rename failing while unlink works (ENOSPC) deleted the staged
    JSON, so the rows named a run JSON that never came; and the runner's cleanup removed the predictions the JSON
    names (or, read-only, its EROFS hid the one-line error). Now both stay and the rerun finishes the commit."""
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    ids_before = _leaderboard_run_ids(out)
    real_replace, real_unlink = os.replace, os.unlink
    code = errno.EROFS if unlink_fails else errno.ENOSPC

    def failing_replace(source, target, *args, **kwargs):
        if Path(target).parent.name == "runs" and Path(target).suffix == ".json":
            raise OSError(code, os.strerror(code))
        return real_replace(source, target, *args, **kwargs)

    def failing_unlink(path, *args, **kwargs):
        name = Path(path).name  # the run's own files (the start-up write check in runs/ still passes)
        if unlink_fails and Path(path).parent.name == "runs" and (name.endswith(".npz") or name.endswith(".tmp")):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_unlink(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing_replace)
        patch.setattr(os, "unlink", failing_unlink)
        result = run(capsys, shared, out)
    expect_error(result, str(out / "runs"), "leaderboard rows are written", "moves the run JSON into place")
    (new_id,) = _leaderboard_run_ids(out) - ids_before
    assert len(_staged_jsons(out)) == 1
    rerun = run(capsys, shared, out)
    assert rerun.returncode == 0, rerun.stderr
    assert f"note: run {new_id} stopped after its leaderboard rows were written" in rerun.stderr
    record = json.loads((out / "runs" / f"{new_id}.json").read_text())
    assert (out / "runs" / record["predictions"]["file"]).is_file()  # the predictions the run JSON names


KILLED = r"""
import os, signal, sys
from pathlib import Path

real = os.{function}


def target(args):
    path = args[1] if "{function}" == "replace" else args[0]
    return Path(os.readlink(f"/proc/self/fd/{{path}}") if isinstance(path, int) else path)


def killed(*args, **kwargs):
    path = target(args)
    if {condition}:
        os.kill(os.getpid(), signal.SIGKILL)  # no finally block runs, as for the OOM killer or a lost node
    return real(*args, **kwargs)


os.{function} = killed
from evalsuite import cli

sys.exit(cli.main(sys.argv[1:]))
"""
KILL_POINTS = {  # (os function, condition on its path): where the process dies
    "after-the-append": ("replace", 'path.parent.name == "runs" and path.suffix == ".json"'),
    "before-the-append": ("write", 'path.name == "leaderboard.csv"'),
}


def _killed_run(shared, out: Path, tmp_path: Path, point: str) -> subprocess.CompletedProcess:
    function, condition = KILL_POINTS[point]
    script = tmp_path / "killed.py"
    script.write_text(KILLED.format(function=function, condition=condition))
    return subprocess.run([sys.executable, str(script), *RUN, "--data-root", str(shared["data"]), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)


# Each case is a killed process (~15 s): the two kill points, repaired by the two entry points between them.
@pytest.mark.parametrize("point,repaired_by", [("after-the-append", "run"), ("before-the-append", "leaderboard")])
def test_sigkill_while_committing_is_finished_or_undone_by_the_next_process(capsys, shared, tmp_path, point,
                                                                           repaired_by):
    """Issue 24: a SIGKILL between the leaderboard append and the run JSON's rename left rows naming a missing run
    JSON, a stale .json.PID.tmp and an orphan predictions.npz, and a rerun did not clean them."""
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    ids_before, files_before = _leaderboard_run_ids(out), run_jsons(out)
    killed = _killed_run(shared, out, tmp_path, point)
    assert killed.returncode == -9, killed.stderr
    (staged,) = _staged_jsons(out)
    run_id = staged[1:].split(".json.")[0]
    assert (out / "runs" / f"{run_id}.predictions.npz").is_file() and not (out / "runs" / f"{run_id}.json").exists()
    assert (run_id in _leaderboard_run_ids(out)) == (point == "after-the-append")

    repaired = run(capsys, shared, out) if repaired_by == "run" else board_cli(capsys, "--out", out)
    assert repaired.returncode == 0, repaired.stderr
    if point == "after-the-append":
        assert f"note: run {run_id} stopped after its leaderboard rows were written; its run JSON is now in place" \
            in repaired.stderr
        assert json.loads((out / "runs" / f"{run_id}.json").read_text())["predictions"]["file"] == \
            f"{run_id}.predictions.npz"
    else:
        assert f"note: run {run_id} stopped before its leaderboard rows were written; removed its staged run JSON " \
               "and 1 file(s) written beside it" in repaired.stderr
        assert not list((out / "runs").glob(f"*{run_id}*"))
    assert all((out / "runs" / f"{i}.json").is_file() for i in _leaderboard_run_ids(out))  # every row names a JSON
    assert not _staged_jsons(out) and not debris(out)
    if repaired_by == "leaderboard":
        assert set(run_jsons(out)) - set(files_before) == ({f"{run_id}.json", f"{run_id}.predictions.npz"}
                                                          if point == "after-the-append" else set())
        assert _leaderboard_run_ids(out) == ids_before | ({run_id} if point == "after-the-append" else set())


def test_run_appends_to_a_leaderboard_saved_with_a_bom(capsys, shared, tmp_path):
    """Issue 24: Excel's UTF-8 BOM made the header's first column '\\ufeffschema': "missing columns: schema"."""
    out = tmp_path / "out"
    shutil.copytree(shared["cached"], out)
    rows_before = len(leaderboard_rows(out))
    (out / "leaderboard.csv").write_bytes(b"\xef\xbb\xbf" + (out / "leaderboard.csv").read_bytes())
    result = run(capsys, shared, out)
    assert result.returncode == 0, result.stderr
    assert len(leaderboard_rows(out)) > rows_before


def test_demo_slides_on_a_full_disk_say_the_disk_is_full(tmpfs, monkeypatch):
    """Issue 24: ENOSPC said "set EVALSUITE_DATA_HOME to a writable folder"; the folder was writable, only full."""
    from evalsuite.errors import EvalsuiteError
    from evalsuite.readers.demo.demo_slides import demo_slides_folder

    fs = tmpfs(256 * 1024)  # the build needs about 28 MB
    monkeypatch.setenv("EVALSUITE_DATA_HOME", str(fs / "data"))
    with pytest.raises(EvalsuiteError) as caught:
        demo_slides_folder()
    message = str(caught.value)
    assert f"cannot build the demo slides in {fs / 'data'}" in message and "No space left on device" in message
    assert "free space on that disk" in message and "writable folder" not in message
    assert not debris(fs)
