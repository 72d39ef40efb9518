"""HEST-Benchmark's files: split CSVs, fold pairs, gene list, patch h5 and AnnData h5ad read with h5py."""

import json
import multiprocessing
import os
import pickle

import h5py
import numpy as np
import pytest
from hest_layout import random_barcodes, write_h5ad, write_hest_task, write_patches, write_split_csv

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.spots import hest_h5ad
from evalsuite.readers.spots.hest_files import (
    PatchFile,
    fold_files,
    log1p_expression,
    read_expression,
    read_gene_list,
    read_split_csv,
)

TILE_PX = 4


def _one_line_error(call, *fragments) -> str:
    with pytest.raises(EvalsuiteError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("hest: "), message
    for fragment in fragments:
        assert str(fragment) in message, message
    return message


def _task(tmp_path, **kwargs):
    return write_hest_task(tmp_path / "bench_data", tile_px=TILE_PX, **kwargs)


def _matrix(rng, spots=7, genes=6):
    counts = (rng.poisson(4.0, (spots, genes)) * (rng.random((spots, genes)) < 0.5)).astype(np.float32)
    return random_barcodes(rng, spots), [f"G{i}" for i in range(genes)], counts


# --- the task folder end to end ---

@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_every_fold_reads_back_the_exact_counts_in_patch_order(tmp_path, sparse):
    task = _task(tmp_path, sparse=sparse)
    genes = read_gene_list(task.task_dir / "var_50genes.json")
    assert genes == task.genes
    folds = fold_files(task.task_dir)
    assert [(a.name, b.name) for a, b in folds] == [(f"train_{k}.csv", f"test_{k}.csv") for k in range(3)]
    seen = set()
    for train_csv, test_csv in folds:
        for row in read_split_csv(train_csv, task.task_dir) + read_split_csv(test_csv, task.task_dir):
            assert row.patches_path == task.task_dir / "patches" / f"{row.sample_id}.h5"
            patches = PatchFile(row.patches_path)
            assert patches.barcodes == task.barcodes[row.sample_id] and len(patches) == len(patches.barcodes)
            counts = read_expression(row.expr_path, genes, patches.barcodes)
            assert counts.dtype == np.float64 and np.array_equal(counts, task.counts[row.sample_id])
            assert np.array_equal(log1p_expression(counts), np.log1p(task.counts[row.sample_id]))
            seen.add(row.sample_id)
    assert seen == set(task.counts)


def test_split_csv_rows_and_folds(tmp_path):
    task = _task(tmp_path, samples={"A": 2, "B": 2, "C": 2, "D": 2}, folds=[(["A", "B"], ["C", "D"]),
                                                                            (["C", "D"], ["A", "B"])])
    rows = read_split_csv(task.task_dir / "splits" / "test_1.csv", task.task_dir)
    assert [r.sample_id for r in rows] == ["A", "B"]
    assert rows[1].expr_path == task.task_dir / "adata" / "B.h5ad"
    assert len(fold_files(task.task_dir)) == 2


def test_absolute_paths_in_a_split_csv_are_accepted(tmp_path):
    task = _task(tmp_path, samples={"A": 2})
    csv_path = tmp_path / "abs.csv"
    patches, expr = task.task_dir / "patches" / "A.h5", task.task_dir / "adata" / "A.h5ad"
    csv_path.write_text(f"sample_id,patches_path,expr_path\nA,{patches},{expr}\n")
    assert read_split_csv(csv_path, tmp_path / "elsewhere")[0].patches_path == patches


# --- X layouts, row and column order ---

@pytest.mark.parametrize("x_format", ["dense", "csr", "csc", "csr_h5sparse"])
def test_rows_and_columns_follow_the_requested_order(tmp_path, x_format):
    obs, var, counts = _matrix(np.random.default_rng(1))
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, x_format)
    rows, cols = [5, 0, 3, 6], [4, 1, 5]
    got = read_expression(path, [var[c] for c in cols], [obs[r] for r in rows])
    assert np.array_equal(got, counts[rows][:, cols].astype(np.float64))


def test_names_under_a_custom_index_or_in_a_pre_0_7_record_dataset(tmp_path):
    obs, var, counts = _matrix(np.random.default_rng(6), spots=4, genes=3)
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, "csr")
    with h5py.File(path, "r+") as file:
        file["obs"].move("_index", "barcode")  # anndata writes df.index.name there when it has one
        file["obs"].attrs["_index"] = "barcode"
        del file["var"]
        file["var"] = np.array([(name.encode(), 1) for name in var], dtype=[("index", "S8"), ("n_cells", "i8")])
    assert np.array_equal(read_expression(path, var[::-1], obs), counts[:, ::-1].astype(np.float64))


def test_csr_is_read_in_slices_of_rows_not_whole(tmp_path, monkeypatch):
    obs, var, counts = _matrix(np.random.default_rng(2), spots=11)
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, "csr")
    spans, real_scatter = [], hest_h5ad._scatter
    monkeypatch.setattr(hest_h5ad, "ROWS_PER_READ", 2)
    monkeypatch.setattr(hest_h5ad, "_scatter", lambda out, *args, **kw: spans.append(args[3]) or
                        real_scatter(out, *args, **kw))
    rows = [9, 0, 5, 4, 10]
    got = read_expression(path, var, [obs[r] for r in rows])
    assert np.array_equal(got, counts[rows].astype(np.float64))
    assert len(spans) == 4 and max(hi - lo for lo, hi in spans) < np.count_nonzero(counts)  # rows {0}, {4, 5}, 9, 10


# --- patch files ---

@pytest.mark.parametrize("barcode_kind", ["vlen", "bytes"])
@pytest.mark.parametrize("flat", [False, True], ids=["Nx1", "N"])
def test_patch_barcodes_decode_to_str_whatever_their_storage(tmp_path, barcode_kind, flat):
    rng = np.random.default_rng(3)
    barcodes, tiles = random_barcodes(rng, 5), rng.integers(0, 256, (5, 6, 6, 3), dtype=np.uint8)
    path = tmp_path / "p.h5"
    write_patches(path, barcodes, tiles, np.arange(10).reshape(5, 2), barcode_kind, flat)
    patches = PatchFile(path)
    assert patches.barcodes == barcodes and all(type(b) is str for b in patches.barcodes)
    assert len(patches) == 5 and patches.coords.tolist() == np.arange(10).reshape(5, 2).tolist()
    tile = patches.tile(3)
    assert tile.dtype == np.uint8 and np.array_equal(tile, tiles[3])


def test_patch_file_opens_its_own_handle_in_a_new_process(tmp_path, monkeypatch):
    task = _task(tmp_path, samples={"A": 3})
    opens, real_open = [], h5py.File
    monkeypatch.setattr(h5py, "File", lambda *args, **kw: opens.append(args[0]) or real_open(*args, **kw))
    patches = PatchFile(task.task_dir / "patches" / "A.h5")
    parent_handle = patches._file
    patches.tile(0)
    assert len(opens) == 1  # validating and reading share one handle in one process
    child_pid = os.getpid() + 100_000
    monkeypatch.setattr(os, "getpid", lambda: child_pid)  # what a forked DataLoader worker sees
    assert np.array_equal(patches.tile(2), task.tiles["A"][2]) and np.array_equal(patches.tile(1), task.tiles["A"][1])
    assert len(opens) == 2 and patches._file is not parent_handle and patches._pid == child_pid
    assert parent_handle.id.valid  # the parent's handle is left alone


def _read_in_child(patches, queue):
    inherited = patches._file
    tile = patches.tile(1)
    queue.put((patches._file is not inherited, patches._pid == os.getpid(), tile.tolist()))


def test_patch_file_in_a_forked_process_and_pickled(tmp_path):
    task = _task(tmp_path, samples={"A": 3})
    patches = PatchFile(task.task_dir / "patches" / "A.h5")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(patches, queue))
    child.start()
    own_handle, own_pid, tile = queue.get(timeout=60)
    child.join(timeout=60)
    assert own_handle and own_pid and tile == task.tiles["A"][1].tolist()
    copy = pickle.loads(pickle.dumps(patches))
    assert copy._file is None and copy.barcodes == patches.barcodes
    assert np.array_equal(copy.tile(2), task.tiles["A"][2])


def test_anndata_reads_the_written_h5ad(tmp_path):
    anndata = pytest.importorskip("anndata")
    task = _task(tmp_path, samples={"A": 3}, sparse=True)
    adata = anndata.read_h5ad(task.task_dir / "adata" / "A.h5ad")
    sub = adata[task.barcodes["A"]][:, task.genes]
    x = sub.X.toarray() if hasattr(sub.X, "toarray") else np.asarray(sub.X)
    assert np.array_equal(x.astype(np.float64), task.counts["A"])


# --- bad inputs: one line naming the file ---

def test_split_csv_errors(tmp_path):
    task = _task(tmp_path, samples={"A": 2, "B": 2})
    bad = tmp_path / "bad.csv"
    _one_line_error(lambda: read_split_csv(tmp_path / "none.csv", task.task_dir), "missing split file",
                    tmp_path / "none.csv")
    bad.write_text("sample_id,patches\nA,patches/A.h5\n")
    _one_line_error(lambda: read_split_csv(bad, task.task_dir), str(bad), "no column patches_path, expr_path")
    bad.write_text("sample_id,patches_path,expr_path\n")
    _one_line_error(lambda: read_split_csv(bad, task.task_dir), str(bad), "lists no samples")
    bad.write_text("sample_id,patches_path,expr_path\nA,patches/A.h5,adata/A.h5ad\nB,patches/B.h5,adata/NOPE.h5ad\n")
    _one_line_error(lambda: read_split_csv(bad, task.task_dir), str(bad), "sample 'B'", "expr_path",
                    task.task_dir / "adata" / "NOPE.h5ad", "does not exist")
    write_split_csv(bad, ["A", "B", "A"])
    _one_line_error(lambda: read_split_csv(bad, task.task_dir), str(bad), "sample 'A' twice")
    bad.write_text("sample_id,patches_path,expr_path\n,patches/A.h5,adata/A.h5ad\n")
    _one_line_error(lambda: read_split_csv(bad, task.task_dir), str(bad), "line 2 has no sample_id")


def test_fold_file_errors(tmp_path):
    task = _task(tmp_path, samples={"A": 2, "B": 2, "C": 2})
    splits = task.task_dir / "splits"
    (splits / "test_2.csv").unlink()
    _one_line_error(lambda: fold_files(task.task_dir), str(splits), "lacks 'test_2.csv'", "numbered 0..2")
    (splits / "train_1.csv").unlink()
    (splits / "test_1.csv").unlink()
    _one_line_error(lambda: fold_files(task.task_dir), "lacks 'train_1.csv', 'test_1.csv', 'test_2.csv'")
    for file in splits.iterdir():
        file.unlink()
    _one_line_error(lambda: fold_files(task.task_dir), str(splits), "no train_<k>.csv")
    splits.rmdir()
    _one_line_error(lambda: fold_files(task.task_dir), "missing folder", str(splits))


@pytest.mark.parametrize("content, fragment", [
    (None, "missing gene list"),
    ("{genes: [", "is not JSON"),
    ('{"gene": ["A"]}', "has no 'genes' list"),
    ('{"genes": []}', "lists no genes"),
    ('{"genes": ["A", 3]}', "lists 3, which is not a gene symbol"),
    ('{"genes": ["A", "B", "A"]}', "lists gene 'A' twice"),
])
def test_gene_list_errors(tmp_path, content, fragment):
    path = tmp_path / "var_50genes.json"
    if content is not None:
        path.write_text(content)
    _one_line_error(lambda: read_gene_list(path), str(path), fragment)


def test_gene_list_as_a_bare_list(tmp_path):
    path = tmp_path / "genes.json"
    path.write_text(json.dumps(["B", "A"]))
    assert read_gene_list(path) == ["B", "A"]


def _patch_file(path, **datasets):
    with h5py.File(path, "w") as file:
        for key, data in datasets.items():
            file.create_dataset(key, data=data)
    return path


def test_patch_file_errors(tmp_path):
    tiles, names = np.zeros((3, 4, 4, 3), np.uint8), np.array([b"a", b"b", b"c"]).reshape(3, 1)
    path = tmp_path / "p.h5"
    _one_line_error(lambda: PatchFile(path), "missing patch file", path)
    path.write_text("not hdf5")
    _one_line_error(lambda: PatchFile(path), "cannot open patch file", path, "as HDF5")
    cases = [
        ({"barcode": names, "coords": np.zeros((3, 2))}, "has no dataset 'img' (found barcode, coords)"),
        ({"img": tiles}, "has no dataset 'barcode' (found img)"),
        ({"img": np.zeros((3, 4, 4, 4), np.uint8), "barcode": names}, "'img' is uint8 (3, 4, 4, 4); expected uint8"),
        ({"img": tiles.astype(np.float32), "barcode": names}, "'img' is float32"),
        ({"img": tiles[:0], "barcode": names[:0]}, "has no tiles"),
        ({"img": tiles, "barcode": names[:2]}, "has 3 tiles in 'img' but 2 barcodes"),
        ({"img": tiles, "barcode": np.array([b"a", b"b", b"a"])}, "has barcode 'a' twice"),
        ({"img": tiles, "barcode": np.arange(3)}, "'barcode' is int64 (3,); expected strings"),
        ({"img": tiles, "barcode": names, "coords": np.zeros((3, 3))}, "'coords' is (3, 3); expected [3, 2]"),
    ]
    for datasets, fragment in cases:
        _one_line_error(lambda: PatchFile(_patch_file(path, **datasets)), str(path), fragment)


def test_expression_errors(tmp_path):
    obs, var, counts = _matrix(np.random.default_rng(4), spots=5, genes=4)
    path = tmp_path / "s.h5ad"
    _one_line_error(lambda: read_expression(path, var, obs), "missing expression file", path)
    path.write_text("not hdf5")
    _one_line_error(lambda: read_expression(path, var, obs), "cannot open expression file", path)
    write_h5ad(path, obs, var, counts, None)
    _one_line_error(lambda: read_expression(path, var, obs), str(path), "has no 'X'")
    write_h5ad(path, obs, var, counts, "csr")
    strangers = obs[:2] + ["NOPE1", "NOPE2", "NOPE3", "NOPE4"]
    _one_line_error(lambda: read_expression(path, var, strangers, barcodes_source="patches/A.h5"), str(path),
                    "4 of 6 spots of patches/A.h5 match no obs name", "'NOPE1', 'NOPE2', 'NOPE3' and 1 more",
                    "different samples")
    _one_line_error(lambda: read_expression(path, var[:2] + ["MYC"], obs, genes_source="IDC/var_50genes.json"),
                    str(path), "gene 'MYC' of IDC/var_50genes.json is not among the var names")
    with h5py.File(path, "r+") as file:
        del file["X"].attrs["encoding-type"]
    _one_line_error(lambda: read_expression(path, var, obs), str(path), "not a CSR or CSC matrix")
    write_h5ad(path, obs + ["EXTRA-1"], var, np.zeros((6, 4), np.float32))
    with h5py.File(path, "r+") as file:
        del file["X"]
        file["X"] = counts
    _one_line_error(lambda: read_expression(path, var, obs), str(path), "'X' has shape (5, 4)", "name 6 spots")
    write_h5ad(path, obs[:4] + obs[:1], var, counts)
    _one_line_error(lambda: read_expression(path, var, obs[:2]), str(path), f"obs name '{obs[0]}' more than once")


@pytest.mark.parametrize("x_format", ["dense", "csr"])
@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_nan_or_negative_counts_name_the_spot_and_gene(tmp_path, x_format, bad):
    obs, var, counts = _matrix(np.random.default_rng(5), spots=5, genes=4)
    counts[3, 2] = bad
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, x_format)
    _one_line_error(lambda: read_expression(path, var, obs), str(path), f"spot '{obs[3]}', gene '{var[2]}'",
                    "raw non-negative counts")
    assert read_expression(path, var[:2], obs).shape == (5, 2)  # the bad gene not asked for: fine


def _replace(path, key: str, values) -> None:
    with h5py.File(path, "r+") as file:
        dtype = file[key].dtype
        del file[key]
        file[key] = np.asarray(values).astype(dtype)


INDPTR_CASES = {  # issue 40 item 8: each was an internal error (a numpy ValueError from np.repeat or a slice)
    "decreasing": (lambda p: p[[0, 2, 1, *range(3, len(p))]], "decreases at entry 2"),
    "negative": (lambda p: np.concatenate([[-3], p[1:]]), "starts at -3, not 0"),
    "past-the-entries": (lambda p: np.concatenate([p[:-1], [p[-1] + 7]]), "ends at"),
    "not-from-0": (lambda p: p + 2, "starts at 2, not 0"),
}


@pytest.mark.parametrize("x_format", ["csr", "csc"])
@pytest.mark.parametrize("case", INDPTR_CASES)
def test_a_damaged_indptr_is_a_one_line_redownload_error(tmp_path, x_format, case):
    obs, var, counts = _matrix(np.random.default_rng(7), spots=5, genes=4)
    counts[:, :] = np.arange(1, 21).reshape(5, 4)  # every entry stored, so every pointer moves
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, x_format)
    change, fragment = INDPTR_CASES[case]
    with h5py.File(path, "r") as file:
        indptr = file["X/indptr"][()].astype(np.int64)
    _replace(path, "X/indptr", change(indptr))
    _one_line_error(lambda: read_expression(path, var, obs), str(path), "'X/indptr'", fragment, "re-download")


def test_data_and_indices_of_different_lengths_are_a_one_line_error(tmp_path):
    obs, var, counts = _matrix(np.random.default_rng(8), spots=5, genes=4)
    path = tmp_path / "s.h5ad"
    write_h5ad(path, obs, var, counts, "csr")
    with h5py.File(path, "r") as file:
        indices = file["X/indices"][()]
    _replace(path, "X/indices", indices[:-1])
    _one_line_error(lambda: read_expression(path, var, obs), str(path), f"{len(indices) - 1} 'X/indices'",
                    f"{len(indices)} 'X/data'", "re-download")
