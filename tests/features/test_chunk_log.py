"""Chunk records of an unfinished cache go to chunks.jsonl (features/chunk_log.py), not into a rewritten manifest."""

import os

import numpy as np
import pytest

from evalsuite.features.cache import MANIFEST_FILE, FeatureCache
from evalsuite.features.chunk_log import CHUNK_LOG_FILE

DIM = 4


def _started(tmp_path, rows: int = 10, chunk_rows: int = 3):
    cache = FeatureCache(tmp_path / "cache")
    writer = cache.start_or_resume("k", (rows, DIM), np.arange(rows), {"split": "train"}, chunk_rows, {})
    return cache, writer


def _rows(start: int, stop: int, value: float = 0.0) -> np.ndarray:
    return (np.arange(start * DIM, stop * DIM).reshape(-1, DIM) + value).astype(np.float16)


def _fill(writer, indices=None, value: float = 0.0) -> None:
    for index, start, stop in writer.pending_chunks():
        if indices is None or index in indices:
            writer.write_chunk(index, _rows(start, stop, value))


@pytest.mark.parametrize("chunks", [4, 40])
def test_the_manifest_is_written_at_start_and_finish_only_whatever_the_chunk_count(tmp_path, monkeypatch, chunks):
    """Rewriting the manifest after every chunk made a PANDA-sized slide cache cost the square of its chunks."""
    real_replace, manifest_writes = os.replace, []

    def counting(source, target, *args, **kwargs):
        if os.path.basename(target) == MANIFEST_FILE:
            manifest_writes.append(target)
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counting)
    cache, writer = _started(tmp_path, rows=chunks * 3)
    _fill(writer)
    assert len((writer.folder / CHUNK_LOG_FILE).read_bytes().splitlines()) == chunks
    writer.finish()
    assert len(manifest_writes) == 2
    assert not (writer.folder / CHUNK_LOG_FILE).exists()
    features, _ = cache.open("k", "ram")
    np.testing.assert_array_equal(features, _rows(0, chunks * 3))


def test_an_unfinished_cache_reads_back_its_logged_chunks_and_resumes_the_rest(tmp_path):
    cache, writer = _started(tmp_path)
    _fill(writer, indices={0, 2})
    manifest = cache.manifest("k")
    assert [chunk["done"] for chunk in manifest["chunks"]] == [True, False, True, False]
    assert not manifest["complete"]
    resumed = cache.start_or_resume("k", (10, DIM), np.arange(10), {"split": "train"}, 3, {})
    assert [index for index, _, _ in resumed.pending_chunks()] == [1, 3]
    _fill(resumed)
    resumed.finish()
    np.testing.assert_array_equal(cache.open("k", "memmap")[0][:], _rows(0, 10))


def test_a_line_cut_short_by_a_kill_is_skipped_and_the_next_record_still_reads(tmp_path):
    cache, writer = _started(tmp_path)
    _fill(writer, indices={0})
    log = writer.folder / CHUNK_LOG_FILE
    whole = log.read_bytes()
    with open(log, "ab") as handle:  # a writer killed mid-line while recording chunk 1
        handle.write(b'{"index":1,"sha256":"ab')
    assert [chunk["done"] for chunk in cache.manifest("k")["chunks"]] == [True, False, False, False]
    resumed = cache.start_or_resume("k", (10, DIM), np.arange(10), {"split": "train"}, 3, {})
    _fill(resumed, indices={1})
    assert log.read_bytes().startswith(whole + b'{"index":1,"sha256":"ab\n')
    assert [chunk["done"] for chunk in cache.manifest("k")["chunks"]] == [True, True, False, False]


@pytest.mark.parametrize("line", [b'{"index": 7, "start": 0, "stop": 3, "sha256": "x"}',  # no such chunk
                                  b'{"index": 1, "start": 0, "stop": 3, "sha256": "x"}',  # another chunk's rows
                                  b'{"index": 1, "start": 3, "stop": 6}',  # no checksum
                                  b'[1, 2]', b'\xff\xfe'])
def test_a_record_that_does_not_fit_the_chunk_table_counts_for_nothing(tmp_path, line):
    cache, writer = _started(tmp_path)
    (writer.folder / CHUNK_LOG_FILE).write_bytes(line + b"\n")
    assert not any(chunk["done"] for chunk in cache.manifest("k")["chunks"])


def test_a_rewritten_chunk_replaces_its_earlier_record(tmp_path):
    """A chunk found corrupt on resume is extracted again: its new checksum is the one that counts."""
    cache, writer = _started(tmp_path)
    _fill(writer)
    first = cache.manifest("k")["chunks"][1]["sha256"]
    writer.write_chunk(1, _rows(3, 6, value=0.5))
    assert cache.manifest("k")["chunks"][1]["sha256"] not in (first, None)
    writer.finish()
    np.testing.assert_array_equal(cache.open("k", "ram")[0][3:6], _rows(3, 6, value=0.5))


def test_two_ranks_writing_one_cache_see_each_others_chunks_on_reload(tmp_path):
    cache, rank0 = _started(tmp_path)
    rank1 = cache.attach("k")
    _fill(rank0, indices={0, 1})
    _fill(rank1, indices={2, 3})
    rank0.reload()
    assert not rank0.pending_chunks()
    rank0.finish()
    np.testing.assert_array_equal(cache.open("k", "ram")[0], _rows(0, 10))


def test_a_log_that_cannot_be_removed_after_the_finish_is_left_and_never_read(tmp_path, monkeypatch):
    cache, writer = _started(tmp_path, rows=6)
    _fill(writer)
    real_unlink = type(writer.folder).unlink

    def refusing(path, *args, **kwargs):
        if path.name == CHUNK_LOG_FILE:
            raise PermissionError(13, "Permission denied")
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(type(writer.folder), "unlink", refusing)
    writer.finish()
    (writer.folder / CHUNK_LOG_FILE).write_bytes(b'{"index": 0, "start": 0, "stop": 3, "sha256": "stale"}\n')
    assert cache.manifest("k")["complete"] and cache.manifest("k")["chunks"][0]["sha256"] != "stale"
    np.testing.assert_array_equal(cache.open("k", "ram")[0], _rows(0, 6))
