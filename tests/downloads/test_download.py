"""`evalsuite download` against a local HTTP server (issue 49): the real source entries' URLs, filenames and unpack
rules, with the checksums and split sizes of small fixtures in the datasets' published layouts.

The server (download_server.py) serves the fixture archives at the URL paths of the real sources; `--mirror` points
the command at it. A test's source entry is the real one with the fixture's own sizes, hashes and counts.
"""

import dataclasses
import gzip
import hashlib
from pathlib import Path

import pytest
from conftest import assert_one_line_error, make_pcam, make_pcam_meta, pcam_name
from download_server import FileServer, url_path

from evalsuite.downloads import sources, transfer
from evalsuite.downloads.model import Download

PCAM_COUNTS = {"train": 8, "valid": 4, "test": 4}
TRAIN_X = "/records/2546921/files/camelyonpatch_level_2_split_train_x.h5.gz"


@pytest.fixture
def served():
    with FileServer() as served:
        yield served


def pcam_fixture(served, tmp_path: Path, **changes) -> Download:
    """PCam's real entry with a fixture's sums: .h5.gz files and meta CSVs served at their Zenodo paths."""
    src = make_pcam(tmp_path / "src", PCAM_COUNTS)
    for split, n in PCAM_COUNTS.items():
        make_pcam_meta(src, split, [f"slide_{i % 3}" for i in range(n)])
    files = []
    for remote in sources.PCAM.files:
        raw = (src / remote.target).read_bytes()
        if remote.unpack == "gz":
            facts = served.add(url_path(remote.url), gzip.compress(raw, mtime=0), "application/gzip")
            files.append(dataclasses.replace(remote, size=facts["size"], sha256=facts["sha256"],
                                             unpacked_md5=hashlib.md5(raw).hexdigest()))
        else:
            facts = served.add(url_path(remote.url), raw, "text/csv")
            files.append(dataclasses.replace(remote, md5=facts["md5"]))
    return dataclasses.replace(sources.PCAM, files=tuple(files), expected_counts={"train": 8, "val": 4, "test": 4},
                               **changes)


def use(monkeypatch, task: str, entry) -> None:
    monkeypatch.setitem(sources.SOURCES, task, entry)


def download(cli_in_process, served, root: Path, task: str = "pcam", *extra):
    return cli_in_process("download", task, "--data-root", root, "--mirror", served.base, *extra)


def test_pcam_lands_in_the_card_layout_and_the_reader_counts_it(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    root = tmp_path / "pcam"
    result = download(cli_in_process, served, root)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for split in PCAM_COUNTS:
        assert (root / pcam_name(split, "x")).is_file() and (root / pcam_name(split, "y")).is_file()
        assert (root / f"camelyonpatch_level_2_split_{split}_meta.csv").is_file()
    assert "ready     pcam under" in result.stdout and "train 8, val 4, test 4" in result.stdout
    assert f"next      evalsuite run --task pcam --data-root {root}" in result.stdout
    assert not list((root / ".evalsuite-download").glob("*.gz"))  # archives go once unpacked
    assert not list(root.glob(".evalsuite-unpack-*"))
    requests = len(served.log)
    again = download(cli_in_process, served, root)  # everything is in place: nothing is fetched again
    assert again.returncode == 0, again.stderr
    assert len(served.log) == requests and "have      9 files unpacked by an earlier run" in again.stdout


def test_an_interrupted_transfer_resumes_on_the_next_run(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    size = len(served.files[TRAIN_X])
    served.cut_after[TRAIN_X] = 100_000
    root = tmp_path / "pcam"
    first = download(cli_in_process, served, root, "pcam", "--retries", "0")
    assert_one_line_error(first, "stopped at byte 100,000", ".part is kept", "rerun the same command")
    assert (root / ".evalsuite-download" / "camelyonpatch_level_2_split_train_x.h5.gz.part").stat().st_size == 100_000
    assert not (root / pcam_name("train", "x")).exists()
    second = download(cli_in_process, served, root)
    assert second.returncode == 0, second.stderr
    requests = served.requests(TRAIN_X)
    assert [sent.range for sent in requests] == [None, "bytes=100000-"]
    assert [sent.body_bytes for sent in requests] == [100_000, size - 100_000]  # only the rest, once
    assert served.body_bytes(TRAIN_X) == size


def test_a_transfer_that_stops_is_resumed_within_the_run(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    monkeypatch.setattr(transfer, "RETRY_WAIT_S", 0.0)
    served.cut_after[TRAIN_X] = 50_000
    result = download(cli_in_process, served, tmp_path / "pcam")
    assert result.returncode == 0, result.stderr
    assert "stopped at byte 50,000" in result.stderr and "try 1 of 3" in result.stderr
    assert served.body_bytes(TRAIN_X) == len(served.files[TRAIN_X])


def test_a_server_ignoring_range_restarts_from_zero_and_says_so(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    served.honour_range = False
    served.cut_after[TRAIN_X] = 100_000
    root = tmp_path / "pcam"
    assert download(cli_in_process, served, root, "pcam", "--retries", "0").returncode == 2
    second = download(cli_in_process, served, root)
    assert second.returncode == 0, second.stderr
    assert "does not honour HTTP Range requests" in second.stderr and "restarts from byte 0" in second.stderr
    assert served.body_bytes(TRAIN_X) == 100_000 + len(served.files[TRAIN_X])
    assert (root / pcam_name("train", "x")).is_file()


def test_a_wrong_checksum_is_refused_and_nothing_is_unpacked(cli_in_process, served, tmp_path, monkeypatch):
    entry = pcam_fixture(served, tmp_path)
    bad = dataclasses.replace(entry.files[0], sha256="0" * 64)
    use(monkeypatch, "pcam", dataclasses.replace(entry, files=(bad, *entry.files[1:])))
    root = tmp_path / "pcam"
    result = download(cli_in_process, served, root)
    assert_one_line_error(result, f"checksum mismatch for {served.base}{TRAIN_X}?download=1",
                          "nothing was unpacked", ".gz.bad", "rerun")
    assert sorted(p.name for p in root.iterdir()) == [".evalsuite-download"]
    state = root / ".evalsuite-download"
    assert (state / "camelyonpatch_level_2_split_train_x.h5.gz.bad").is_file()
    assert not (state / "camelyonpatch_level_2_split_train_x.h5.gz").exists()


def test_a_missing_optional_file_is_a_note(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    del served.files["/records/2546921/files/camelyonpatch_level_2_split_test_meta.csv"]
    result = download(cli_in_process, served, tmp_path / "pcam")
    assert result.returncode == 0, result.stderr
    assert "left out the optional camelyonpatch_level_2_split_test_meta.csv" in result.stderr
    assert "HTTP 404" in result.stderr


def test_a_file_already_in_the_way_is_refused_and_the_download_kept(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    root = tmp_path / "pcam"
    in_the_way = root / pcam_name("test", "y")
    in_the_way.parent.mkdir(parents=True)
    in_the_way.write_text("mine")
    result = download(cli_in_process, served, root)
    assert_one_line_error(result, str(in_the_way), "is already there", "move it away and rerun")
    assert in_the_way.read_text() == "mine"
    path = "/records/2546921/files/camelyonpatch_level_2_split_test_y.h5.gz"
    fetched = served.body_bytes(path)
    in_the_way.unlink()
    again = download(cli_in_process, served, root)
    assert again.returncode == 0, again.stderr
    assert served.body_bytes(path) == fetched  # the verified download was kept, not fetched again
    assert "found     " in again.stdout


def test_a_web_page_instead_of_the_file_names_the_page_and_the_fix(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    served.content_types[TRAIN_X] = "text/html; charset=utf-8"
    result = download(cli_in_process, served, tmp_path / "pcam")
    assert_one_line_error(result, "answered with a web page instead of the file", sources.PCAM.page,
                          "camelyonpatch_level_2_split_train_x.h5.gz and rerun")


def test_a_form_gated_task_prints_its_page_and_steps_and_writes_nothing(cli_in_process, tmp_path):
    root = tmp_path / "mhist"
    result = cli_in_process("download", "mhist", "--data-root", root)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[-1] == "evalsuite: error: mhist cannot be downloaded by evalsuite: follow the steps above (nothing " \
                        "was written)"
    assert "https://bmirds.github.io/MHIST/#accessing-dataset" in result.stderr
    assert f"evalsuite run --task mhist --data-root {root}" in result.stderr
    assert 4 <= len(lines) <= 10
    assert not root.exists()


@pytest.mark.parametrize(("task", "fragment"), [("no_such_task", "unknown task 'no_such_task'"),
                                                 ("tile_csv", "nothing to download")])
def test_unknown_and_own_data_tasks_are_one_line(cli_in_process, tmp_path, task, fragment):
    result = cli_in_process("download", task, "--data-root", tmp_path / "x")
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "x").exists()


def test_a_bad_mirror_is_one_line(cli_in_process, tmp_path):
    result = cli_in_process("download", "pcam", "--data-root", tmp_path / "p", "--mirror", "ftp://mirror")
    assert_one_line_error(result, "mirror 'ftp://mirror'", "http(s)://HOST")


def test_the_mirror_variable_is_read(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    result = cli_in_process("download", "pcam", "--data-root", tmp_path / "pcam",
                            env={"EVALSUITE_DOWNLOAD_MIRROR": served.base + "/"})
    assert result.returncode == 0, result.stderr
    assert f"get       {served.base}{TRAIN_X}?download=1" in result.stdout


def test_the_list_names_every_card(cli_in_process):
    result = cli_in_process("download", "--list")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert "evalsuite download" in rows["pcam"] and "by hand" in rows["mhist"] and "ships" in rows["demo"]
    assert "your own data" in rows["tile_csv"]


def test_a_file_removed_since_is_fetched_again_and_only_it(cli_in_process, served, tmp_path, monkeypatch):
    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    root = tmp_path / "pcam"
    assert download(cli_in_process, served, root).returncode == 0
    (root / pcam_name("valid", "y")).unlink()
    requests = len(served.log)
    again = download(cli_in_process, served, root)
    assert again.returncode == 0, again.stderr
    assert [sent.path for sent in served.log[requests:]] == [
        "/records/2546921/files/camelyonpatch_level_2_split_valid_y.h5.gz"]
    assert "is gone in part" in again.stderr and (root / pcam_name("valid", "y")).is_file()


def test_two_downloads_into_one_folder_are_refused(cli_in_process, served, tmp_path, monkeypatch):
    import fcntl

    use(monkeypatch, "pcam", pcam_fixture(served, tmp_path))
    state = tmp_path / "pcam" / ".evalsuite-download"
    state.mkdir(parents=True)
    with open(state / "lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = download(cli_in_process, served, tmp_path / "pcam")
    assert_one_line_error(result, "another `evalsuite download` is writing", str(tmp_path / "pcam"))
    assert served.log == []
