"""NpyRows gives the rows numpy would, for every index form the pipeline uses, and fails in one line."""

import pickle

import numpy as np
import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.npy_rows import NpyRows


@pytest.fixture
def saved(tmp_path):
    array = np.random.default_rng(0).normal(size=(300, 5, 3)).astype(np.float16)
    np.save(tmp_path / "rows.npy", array)
    return array, NpyRows(tmp_path / "rows.npy")


@pytest.mark.parametrize("index", [
    7, -1, slice(None), slice(10, 20), slice(290, 400), slice(5, 5), slice(3, 200, 7), slice(None, None, -1),
    [4, 2, 2, 299, 0], np.arange(0, 300, 3), np.array([150, 151, 152, 10, 11]), np.array([], dtype=np.int64),
    [-1, -300], np.arange(300) % 2 == 0,
])
def test_rows_equal_numpy_indexing(saved, index):
    array, rows = saved
    got = rows[index]
    assert got.dtype == array.dtype and np.array_equal(got, array[index])


def test_merged_and_split_spans_give_the_same_rows(tmp_path, monkeypatch):
    import evalsuite.storage.npy_rows as npy_rows

    array = np.arange(20_000 * 8, dtype=np.float16).reshape(20_000, 8)
    np.save(tmp_path / "wide.npy", array)
    # Tiny limits force every branch: gaps merged, spans cut at the span limit, single rows.
    monkeypatch.setattr(npy_rows, "MERGE_GAP_BYTES", 64)
    monkeypatch.setattr(npy_rows, "SPAN_BYTES", 1024)
    rows = NpyRows(tmp_path / "wide.npy")
    wanted = np.sort(np.random.default_rng(1).choice(20_000, 3000, replace=False))
    assert np.array_equal(rows[wanted], array[wanted])


def test_masks_and_pickled_copies_read_the_same(tmp_path):
    masks = np.random.default_rng(2).integers(0, 5, (40, 16, 16), dtype=np.uint8)
    np.save(tmp_path / "masks.npy", masks)
    rows = NpyRows(tmp_path / "masks.npy")
    assert np.array_equal(rows[[3, 1]], masks[[3, 1]])
    copy = pickle.loads(pickle.dumps(rows))  # as a spawned DataLoader worker gets it
    assert np.array_equal(copy[5:9], masks[5:9]) and len(copy) == 40 and copy.shape == masks.shape


def test_fortran_ordered_files_are_read_correctly(tmp_path):
    array = np.asfortranarray(np.arange(60, dtype=np.float32).reshape(10, 6))
    np.save(tmp_path / "f.npy", array)
    assert np.array_equal(NpyRows(tmp_path / "f.npy")[[9, 0, 4]], array[[9, 0, 4]])


def test_out_of_range_rows_raise_index_error(saved):
    _, rows = saved
    with pytest.raises(IndexError, match="out of range"):
        rows[[0, 300]]
    with pytest.raises(IndexError, match="out of range"):
        rows[300]


def test_a_truncated_file_is_a_one_line_error_naming_it(tmp_path):
    array = np.ones((100, 64), dtype=np.float16)
    path = tmp_path / "features.npy"
    np.save(path, array)
    rows = NpyRows(path)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with pytest.raises(EvalsuiteError, match="truncated") as failure:
        rows[[1, 90]]
    assert str(path) in str(failure.value) and "\n" not in str(failure.value)
