"""Archives as published (zip, tar.gz) unpacked into the card's layout and counted by the card's reader, and what the
unpacker refuses: members pointing outside the folder, links, a damaged archive, a disk that is full."""

import dataclasses
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import assert_one_line_error, fill_leaving, make_breakhis, make_crc, make_monusac
from download_server import FileServer, url_path

from evalsuite.downloads import sources
from evalsuite.downloads.layout_check import split_sizes
from evalsuite.downloads.model import Download, Remote
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card


@pytest.fixture
def served():
    with FileServer() as served:
        yield served


def zip_folders(src: Path, folders: list, junk: bool = True) -> bytes:
    """The folders under `src` zipped as published (top folder included), plus the macOS metadata such zips carry."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for folder in folders:
            for path in sorted((src / folder).rglob("*")):
                bundle.write(path, path.relative_to(src).as_posix())
        if junk:
            bundle.writestr(f"__MACOSX/{folders[0]}/._x.tif", b"metadata")
            bundle.writestr(f"{folders[0]}/.DS_Store", b"finder")
    return buffer.getvalue()


def reader_sizes(task: str, root: Path) -> dict:
    """What the card's reader finds in the fixture before it is packed: the counts the download must give."""
    card = load_card(task)
    return split_sizes(card, build_reader(card, str(root), check_counts=False))


def fixture_entry(entry: Download, served, blobs: dict, expected: dict, query: bool = False) -> Download:
    """`entry` with each file's bytes served at its URL and its published sums replaced by the fixture's."""
    files = []
    for remote in entry.files:
        facts = served.add(url_path(remote.url, query), blobs[remote.filename])
        files.append(dataclasses.replace(remote, **{name: facts[name] for name in ("md5", "sha256", "size")
                                                    if getattr(remote, name) is not None}))
    return dataclasses.replace(entry, files=tuple(files), expected_counts=expected)


def download(cli_in_process, served, root: Path, task: str, *extra):
    return cli_in_process("download", task, "--data-root", root, "--mirror", served.base, *extra)


def test_crc_zips_unpack_into_the_layout_without_the_macos_metadata(cli_in_process, served, tmp_path, monkeypatch):
    src = make_crc(tmp_path / "src", train_per_class=2, test_per_class=1, size=(24, 24))
    blobs = {"NCT-CRC-HE-100K.zip": zip_folders(src, ["NCT-CRC-HE-100K"]),
             "CRC-VAL-HE-7K.zip": zip_folders(src, ["CRC-VAL-HE-7K"])}
    expected = reader_sizes("crc", src)
    monkeypatch.setitem(sources.SOURCES, "crc", fixture_entry(sources.CRC, served, blobs, expected))
    root = tmp_path / "crc"
    result = download(cli_in_process, served, root, "crc")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in root.iterdir()) == [".evalsuite-download", "CRC-VAL-HE-7K", "NCT-CRC-HE-100K"]
    assert not list(root.rglob("._*")) and not list(root.rglob(".DS_Store"))
    assert len(list((root / "NCT-CRC-HE-100K").rglob("*.tif"))) == 18
    # NCT-CRC-HE-100K.zip has no published checksum: said once; CRC-VAL-HE-7K.zip's md5 is checked.
    assert "NCT-CRC-HE-100K.zip: no checksum or size is published" in result.stderr
    assert "placed    CRC-VAL-HE-7K.zip -> CRC-VAL-HE-7K (md5 as published)" in result.stdout
    assert ", ".join(f"{k} {v}" for k, v in expected.items()) in result.stdout


def test_breakhis_tar_gz_unpacks_into_the_layout(cli_in_process, served, tmp_path, monkeypatch):
    src = make_breakhis(tmp_path / "src")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        bundle.add(src / "BreaKHis_v1", arcname="BreaKHis_v1")
    expected = reader_sizes("breakhis", src)
    monkeypatch.setitem(sources.SOURCES, "breakhis",
                        fixture_entry(sources.BREAKHIS, served, {"BreaKHis_v1.tar.gz": buffer.getvalue()}, expected))
    root = tmp_path / "breakhis"
    result = download(cli_in_process, served, root, "breakhis")
    assert result.returncode == 0, result.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*.png")) == \
        sorted(p.relative_to(src) for p in src.rglob("*.png"))


def test_monusac_two_drive_files_land_side_by_side(cli_in_process, served, tmp_path, monkeypatch):
    src = make_monusac(tmp_path / "src")
    blobs = {remote.filename: zip_folders(src, [Path(remote.filename).stem], junk=False)
             for remote in sources.MONUSAC.files}
    expected = reader_sizes("monusac", src)
    monkeypatch.setitem(sources.SOURCES, "monusac",
                        fixture_entry(sources.MONUSAC, served, blobs, expected, query=True))
    root = tmp_path / "monusac"
    result = download(cli_in_process, served, root, "monusac")
    assert result.returncode == 0, result.stderr
    assert {p.name for p in root.iterdir()} == {".evalsuite-download", "MoNuSAC_images_and_annotations",
                                               "MoNuSAC Testing Data and Annotations"}
    assert [sent.path.split("id=")[1][:8] for sent in served.log] == ["1lxMZaAP", "1G54vsOd"]


def one_file_entry(served, name: str, data: bytes, unpack: str = "zip", **sums) -> Download:
    served.add(f"/files/{name}", data)
    return Download("a fixture", "https://example.org/page", "CC0", "tiny",
                    files=(Remote(f"https://example.org/files/{name}", name, unpack=unpack, **sums),))


def test_a_member_pointing_outside_is_refused(cli_in_process, served, tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("NCT-CRC-HE-100K/ADI/a.tif", b"x")
        bundle.writestr("../evil.txt", b"boo")
    monkeypatch.setitem(sources.SOURCES, "crc", one_file_entry(served, "evil.zip", buffer.getvalue()))
    root = tmp_path / "data" / "crc"
    result = download(cli_in_process, served, root, "crc")
    assert_one_line_error(result, "evil.zip holds the entry '../evil.txt'", "refusing to unpack it")
    assert not (tmp_path / "data" / "evil.txt").exists()
    assert sorted(p.name for p in root.iterdir()) == [".evalsuite-download"]


def test_links_in_a_tar_are_left_out(cli_in_process, served, tmp_path, monkeypatch):
    src = make_breakhis(tmp_path / "src")
    (src / "BreaKHis_v1" / "escape").symlink_to("/etc")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        bundle.add(src / "BreaKHis_v1", arcname="BreaKHis_v1")
    entry = one_file_entry(served, "BreaKHis_v1.tar.gz", buffer.getvalue(), unpack="tar.gz")
    monkeypatch.setitem(sources.SOURCES, "breakhis", dataclasses.replace(entry, expected_counts=reader_sizes(
        "breakhis", src)))
    root = tmp_path / "breakhis"
    result = download(cli_in_process, served, root, "breakhis")
    assert result.returncode == 0, result.stderr
    assert "left out 1 links or special files" in result.stderr
    assert not os.path.lexists(root / "BreaKHis_v1" / "escape")


def test_a_damaged_zip_is_moved_aside(cli_in_process, served, tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as bundle:
        bundle.writestr("NCT-CRC-HE-100K/ADI/a.tif", b"A" * 1000)
    data = bytearray(buffer.getvalue())
    data[30 + len("NCT-CRC-HE-100K/ADI/a.tif") + 10] ^= 0xFF  # a byte of the stored member: its CRC-32 fails
    monkeypatch.setitem(sources.SOURCES, "crc", one_file_entry(served, "damaged.zip", bytes(data)))
    root = tmp_path / "crc"
    result = download(cli_in_process, served, root, "crc")
    assert_one_line_error(result, "damaged.zip from https://example.org/files/damaged.zip is damaged", "CRC",
                          "moved aside", "rerun")
    assert (root / ".evalsuite-download" / "damaged.zip.bad").is_file()
    assert sorted(p.name for p in root.iterdir()) == [".evalsuite-download"]


def test_a_full_disk_is_refused_before_writing(cli_in_process, served, tmpfs, monkeypatch):
    point = tmpfs(1024 * 1024)
    monkeypatch.setitem(sources.SOURCES, "crc", one_file_entry(served, "big.zip", os.urandom(2 * 1024 * 1024)))
    result = download(cli_in_process, served, point / "crc", "crc")
    assert_one_line_error(result, "not enough space for the rest of", "big.zip", "give another --data-root")
    assert not (point / "crc" / ".evalsuite-download" / "big.zip.part").exists()


def test_a_disk_that_fills_while_writing_keeps_the_partial_file(cli_in_process, served, tmpfs, monkeypatch):
    point = tmpfs(4 * 1024 * 1024)
    monkeypatch.setitem(sources.SOURCES, "crc", one_file_entry(served, "big.zip", os.urandom(3 * 1024 * 1024)))
    served.no_length.add("/files/big.zip")  # no Content-Length: nothing to check beforehand
    (point / "crc" / ".evalsuite-download").mkdir(parents=True)
    fill_leaving(point, 1024 * 1024)
    result = download(cli_in_process, served, point / "crc", "crc")
    assert_one_line_error(result, "disk full writing", "big.zip.part", "the partial file is kept",
                          "the same command resumes")
    assert (point / "crc" / ".evalsuite-download" / "big.zip.part").stat().st_size > 0


def test_a_link_in_a_zip_is_left_out(cli_in_process, served, tmp_path, monkeypatch):
    src = make_crc(tmp_path / "src", train_per_class=1, test_per_class=1, size=(8, 8))
    buffer = io.BytesIO(zip_folders(src, ["NCT-CRC-HE-100K", "CRC-VAL-HE-7K"], junk=False))
    with zipfile.ZipFile(buffer, "a") as bundle:
        link = zipfile.ZipInfo("NCT-CRC-HE-100K/ADI/escape.tif")
        link.external_attr = (0o120777 << 16)  # a symbolic link, as Info-ZIP stores one
        bundle.writestr(link, "/etc/passwd")
    entry = one_file_entry(served, "crc.zip", buffer.getvalue())
    monkeypatch.setitem(sources.SOURCES, "crc", dataclasses.replace(entry, expected_counts=reader_sizes("crc", src)))
    root = tmp_path / "crc"
    result = download(cli_in_process, served, root, "crc")
    assert result.returncode == 0, result.stderr
    assert "crc.zip: left out 1 links or special files" in result.stderr
    assert not os.path.lexists(root / "NCT-CRC-HE-100K" / "ADI" / "escape.tif")
