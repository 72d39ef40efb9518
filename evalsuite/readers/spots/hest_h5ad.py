"""HEST's expression files: the `X` of an AnnData .h5ad read with h5py, and the h5py helpers of hest_files.py.

HEST loads each h5ad whole with scanpy; here h5py reads only the wanted spots and genes (anndata 0.8+ on-disk spec:
`obs`/`var` dataframe groups whose `_index` attribute names the names dataset; `X` dense, or a CSR/CSC group of
`data`, `indices`, `indptr` with a `shape` attribute, or `h5sparse_format`/`h5sparse_shape` in older files), so a
30k-gene Visium matrix is never densified.
"""

from pathlib import Path

import h5py
import numpy as np

from evalsuite.errors import EvalsuiteError

TASK = "hest"
REDOWNLOAD = "re-download the task folder from the Hugging Face dataset MahmoodLab/hest-bench"
ROWS_PER_READ = 1024  # CSR rows per slice of data/indices: a Visium slice is ~40 MB, never the whole matrix


def read_expression(path, genes, barcodes, genes_source="the gene list",
                    barcodes_source="the patch file") -> np.ndarray:
    """Counts float64 [len(barcodes), len(genes)] from `X` of an AnnData .h5ad, rows matched to obs names and columns
    to var names in the given orders: HEST's `adata[barcodes][:, genes].X` (bench/st_dataset.py L40-42) before log1p.

    `genes_source` and `barcodes_source` (the gene list file, the patch file) only name the lists in errors."""
    path = Path(path)
    if not path.is_file():
        raise EvalsuiteError(f"{TASK}: missing expression file {path}; {REDOWNLOAD}")
    with open_h5(path, "expression file") as file:
        obs, var = _names(file, "obs", path), _names(file, "var", path)
        rows, missing = _positions(obs, barcodes, path, "obs")
        if missing:
            raise EvalsuiteError(f"{TASK}: {len(missing)} of {len(barcodes)} spots of {barcodes_source} match no obs "
                                 f"name of {path} (e.g. {examples(missing)}); the patch file and the h5ad are probably "
                                 f"of different samples: check the sample's row in the split CSV")
        cols, missing = _positions(var, genes, path, "var")
        if missing:
            raise EvalsuiteError(f"{TASK}: gene {examples(missing)} of {genes_source} is not among the var names of "
                                 f"{path}; use the task's own var_50genes.json with the task's own h5ad files")
        x = file.get("X")
        if x is None:
            raise EvalsuiteError(f"{TASK}: {path} has no 'X' (the spot-by-gene counts); {REDOWNLOAD}")
        counts = _read_x(x, rows, cols, (len(obs), len(var)), path)
    bad = ~np.isfinite(counts) | (counts < 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise EvalsuiteError(f"{TASK}: {path} has count {counts[i, j]} for spot '{barcodes[i]}', gene '{genes[j]}'; "
                             f"X must hold raw non-negative counts (HEST applies log1p to them): {REDOWNLOAD}")
    return counts


def log1p_expression(counts) -> np.ndarray:
    """log(1 + counts) in float64: HEST's only transform of X (bench/st_dataset.py: cast to float64 at L16, then
    `sc.pp.log1p` at L33). There is no library-size normalisation there despite its docstring (L13), so none here."""
    return np.log1p(np.asarray(counts, dtype=np.float64))


def _names(file: h5py.File, key: str, path: Path) -> list[str]:
    """obs or var names: the dataset named by the group's `_index` attribute (anndata 0.8+), or the first field of a
    pre-0.7 record dataset."""
    node = file.get(key)
    if isinstance(node, h5py.Dataset) and node.dtype.names:
        return decode_strings(node[node.dtype.names[0]], path, key)
    if not isinstance(node, h5py.Group):
        raise EvalsuiteError(f"{TASK}: {path} has no '{key}' group, so it is not an AnnData .h5ad; {REDOWNLOAD}")
    index = node.attrs.get("_index", "_index")
    index = index.decode("utf-8") if isinstance(index, bytes) else str(index)
    if not isinstance(node.get(index), h5py.Dataset):
        raise EvalsuiteError(f"{TASK}: {path} '{key}' has no index dataset '{index}' (its {key} names); {REDOWNLOAD}")
    return decode_strings(node[index][()], path, f"{key}/{index}")


def _positions(names: list[str], wanted, path: Path, key: str) -> tuple[np.ndarray, list]:
    """(the position in `names` of each wanted name, the wanted names absent from `names`)."""
    at, repeated = {}, set()
    for position, name in enumerate(names):
        if name in at:
            repeated.add(name)
        at.setdefault(name, position)
    ambiguous = [name for name in wanted if name in repeated]
    if ambiguous:
        raise EvalsuiteError(f"{TASK}: {path} has {key} name '{ambiguous[0]}' more than once, so which one to "
                             f"read is ambiguous; {REDOWNLOAD}")
    missing = [name for name in wanted if name not in at]
    return np.array([at.get(name, -1) for name in wanted], dtype=np.int64), missing


def _read_x(x, rows: np.ndarray, cols: np.ndarray, shape: tuple, path: Path) -> np.ndarray:
    """X[rows][:, cols] as float64; each layout reads the sorted unique rows and columns, then they are reordered."""
    rows_sorted, row_order = np.unique(rows, return_inverse=True)
    cols_sorted, col_order = np.unique(cols, return_inverse=True)
    if isinstance(x, h5py.Dataset):
        _check_shape(x.shape, shape, path)
        # h5py reads a sorted column list in one selection; every spot's 50 columns stay small
        block = np.asarray(x[:, cols_sorted], dtype=np.float64)[rows_sorted]
    else:
        block = _read_sparse(x, rows_sorted, cols_sorted, shape, path)
    return block[row_order.reshape(-1)][:, col_order.reshape(-1)]


def _read_sparse(x: h5py.Group, rows: np.ndarray, cols: np.ndarray, shape: tuple, path: Path) -> np.ndarray:
    # h5sparse_format: the attribute of files written before anndata 0.7
    encoding = _attr_text(x, "encoding-type") or _attr_text(x, "h5sparse_format")
    encoding = {"csr": "csr_matrix", "csc": "csc_matrix"}.get(encoding, encoding)
    if encoding not in ("csr_matrix", "csc_matrix") or not {"data", "indices", "indptr"} <= set(x):
        raise EvalsuiteError(f"{TASK}: {path} 'X' is a group but not a CSR or CSC matrix (encoding-type "
                             f"{encoding!r}, keys {', '.join(x) or 'none'}); {REDOWNLOAD}")
    _check_shape(tuple(x.attrs.get("shape", x.attrs.get("h5sparse_shape", ()))), shape, path)
    indptr = x["indptr"][()].astype(np.int64)
    major = shape[0] if encoding == "csr_matrix" else shape[1]
    if len(indptr) != major + 1:
        raise EvalsuiteError(f"{TASK}: {path} 'X/indptr' has {len(indptr)} entries; expected {major + 1}; "
                             f"{REDOWNLOAD}")
    _check_pointers(indptr, len(x["data"]), len(x["indices"]), path)
    out = np.zeros((len(rows), len(cols)), dtype=np.float64)
    row_at, col_at = _lookup(rows, shape[0]), _lookup(cols, shape[1])
    if encoding == "csr_matrix":
        for start in np.unique(rows // ROWS_PER_READ) * ROWS_PER_READ:
            stop = min(start + ROWS_PER_READ, shape[0])
            entry_rows = np.repeat(np.arange(start, stop), np.diff(indptr[start:stop + 1]))
            _scatter(out, row_at[entry_rows], col_at, x, (indptr[start], indptr[stop]), path)
    else:
        for j, col in enumerate(cols):  # CSC: one slice per wanted gene
            lo, hi = indptr[col], indptr[col + 1]
            _scatter(out, np.full(hi - lo, j), row_at, x, (lo, hi), path, minor_rows=True)
    return out


def _check_pointers(indptr: np.ndarray, data_entries: int, index_entries: int, path: Path) -> None:
    """scipy's conditions on a compressed matrix (sparse check_format): data and indices pair up, and the pointers
    start at 0, never decrease and end within them. A damaged pointer would slice the wrong entries, or fail deep
    in numpy."""
    if data_entries != index_entries:
        problem = f"has {index_entries} 'X/indices' for {data_entries} 'X/data' entries"
    elif indptr[0] != 0:
        problem = f"'X/indptr' starts at {indptr[0]}, not 0"
    elif (np.diff(indptr) < 0).any():
        at = int(np.flatnonzero(np.diff(indptr) < 0)[0]) + 1
        problem = f"'X/indptr' decreases at entry {at} ({indptr[at - 1]} then {indptr[at]})"
    elif indptr[-1] > data_entries:
        problem = f"'X/indptr' ends at {indptr[-1]}, past the {data_entries} stored entries"
    else:
        return
    raise EvalsuiteError(f"{TASK}: {path} {problem}, so its sparse X is damaged; {REDOWNLOAD}")


def _scatter(out, major_at, minor_at, x, span, path, minor_rows=False) -> None:
    """Add the entries data[span] of X into `out`: `major_at` gives each entry's output row (CSR) or column (CSC),
    `minor_at` maps its stored index; entries outside the wanted rows and columns are dropped."""
    indices = x["indices"][span[0]:span[1]].astype(np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= len(minor_at)):
        raise EvalsuiteError(f"{TASK}: {path} 'X/indices' points outside the matrix; {REDOWNLOAD}")
    minor = minor_at[indices]
    out_rows, out_cols = (minor, major_at) if minor_rows else (major_at, minor)
    keep = (out_rows >= 0) & (out_cols >= 0)
    # add.at sums a repeated (row, column) entry, as scipy does for a non-canonical sparse matrix
    np.add.at(out, (out_rows[keep], out_cols[keep]), x["data"][span[0]:span[1]][keep].astype(np.float64))


def _lookup(wanted: np.ndarray, size: int) -> np.ndarray:
    at = np.full(size, -1, dtype=np.int64)
    at[wanted] = np.arange(len(wanted))
    return at


def _check_shape(found: tuple, expected: tuple, path: Path) -> None:
    if tuple(int(n) for n in found) != expected:
        raise EvalsuiteError(f"{TASK}: {path} 'X' has shape {tuple(found)} but obs and var name {expected[0]} spots "
                             f"and {expected[1]} genes; {REDOWNLOAD}")


def _attr_text(node, name: str) -> str | None:
    value = node.attrs.get(name)
    return value.decode("utf-8") if isinstance(value, bytes) else None if value is None else str(value)


def open_h5(path: Path, what: str) -> h5py.File:
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise EvalsuiteError(f"{TASK}: cannot open {what} {path} as HDF5 ({reason(exc)}); {REDOWNLOAD}") from None


def decode_strings(values, path: Path, what: str) -> list[str]:
    """Strings as h5py returns them (vlen UTF-8 and fixed-length `S` both come back as bytes) decoded to str."""
    try:
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.asarray(values).reshape(-1)]
    except UnicodeDecodeError as exc:
        raise EvalsuiteError(f"{TASK}: {path} '{what}' is not UTF-8 text ({reason(exc)}); {REDOWNLOAD}") from None


def first_repeat(values):
    seen = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def examples(values: list, shown: int = 3) -> str:
    more = f" and {len(values) - shown} more" if len(values) > shown else ""
    return ", ".join(f"'{v}'" for v in values[:shown]) + more


def reason(exc: BaseException) -> str:
    return " ".join(str(exc).split())
