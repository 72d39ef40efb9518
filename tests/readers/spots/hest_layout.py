"""A tiny HEST-Benchmark task folder in HEST's exact on-disk layout (mahmoodlab/HEST, HF MahmoodLab/hest-bench).

`<root>/<task>/patches/<id>.h5` as hestcore's WSIPatcher.to_h5 writes it (img uint8 [N, px, px, 3], barcode vlen UTF-8
[N, 1], coords int64 [N, 2]); `adata/<id>.h5ad` in the anndata 0.8+ on-disk spec, written with h5py so no anndata is
needed; `splits/{train,test}_<k>.csv` (paths relative to the task folder); `var_50genes.json` as {"genes": [...]}.
Each h5ad lists its spots in another order than the patch file, plus spots without a tile and genes beyond the list,
so a reader must match barcodes and genes by name.
"""

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

STRING = h5py.string_dtype()  # vlen UTF-8, what h5py writes for a numpy `U` array or a list of str


@dataclass
class WrittenTask:
    task_dir: Path
    genes: list
    barcodes: dict  # sample id -> the patch file's barcodes, in file order
    counts: dict  # sample id -> float64 [spots in patch order, genes in list order], the exact X values
    tiles: dict  # sample id -> uint8 [spots, px, px, 3]


def write_hest_task(root, task="IDC", samples=None, folds=None, genes=None, sparse=False, rng=None, tile_px=224,
                    extra_spots=3, extra_genes=4, patients=None) -> WrittenTask:
    """`samples`: sample id -> number of spots with a tile; `folds`: [(train ids, test ids), ...] (default: leave one
    sample out); `tile_px`: tile side (HEST's is 224; small keeps tests fast); `patients`: sample id -> patient, written
    as a `patient` column of the split files (HEST's own have none)."""
    rng = rng or np.random.default_rng(0)
    samples = samples or {"TENX95": 6, "TENX99": 5, "NCBI783": 4}
    genes = list(genes or [f"GENE{i}" for i in range(5)])
    folds = folds or [([s for s in samples if s != held], [held]) for held in samples]
    task_dir = Path(root) / task
    written = WrittenTask(task_dir, genes, {}, {}, {})
    for sample_id, spots in samples.items():
        _write_sample(written, sample_id, spots, sparse, rng, tile_px, extra_spots, extra_genes)
    for k, (train_ids, test_ids) in enumerate(folds):
        write_split_csv(task_dir / "splits" / f"train_{k}.csv", train_ids, patients)
        write_split_csv(task_dir / "splits" / f"test_{k}.csv", test_ids, patients)
    (task_dir / "var_50genes.json").write_text(json.dumps({"genes": genes}, indent=4))
    return written


def _write_sample(written: WrittenTask, sample_id, spots, sparse, rng, tile_px, extra_spots, extra_genes) -> None:
    obs_names = random_barcodes(rng, spots + extra_spots)  # h5ad order; the patch file has the first `spots`, shuffled
    patch_barcodes = [obs_names[i] for i in rng.permutation(spots)]
    var_names = [written.genes[i] if i < len(written.genes) else f"EXTRA{i}"
                 for i in rng.permutation(len(written.genes) + extra_genes)]
    # Integer counts with many zeros, stored as float32 like most h5ad X
    counts = (rng.poisson(3.0, (len(obs_names), len(var_names))) * (rng.random((len(obs_names), len(var_names))) < 0.6))
    counts = counts.astype(np.float32)
    write_h5ad(written.task_dir / "adata" / f"{sample_id}.h5ad", obs_names, var_names, counts,
               "csr" if sparse else "dense")
    tiles = rng.integers(0, 256, (spots, tile_px, tile_px, 3), dtype=np.uint8)
    coords = rng.integers(0, 50_000, (spots, 2), dtype=np.int64)
    write_patches(written.task_dir / "patches" / f"{sample_id}.h5", patch_barcodes, tiles, coords)
    rows = [obs_names.index(b) for b in patch_barcodes]
    cols = [var_names.index(g) for g in written.genes]
    written.barcodes[sample_id] = patch_barcodes
    written.counts[sample_id] = counts[rows][:, cols].astype(np.float64)
    written.tiles[sample_id] = tiles


def random_barcodes(rng, count: int) -> list[str]:
    """Visium-like spot barcodes (16 bases, `-1`), all different."""
    barcodes = set()
    while len(barcodes) < count:
        barcodes.add("".join(rng.choice(list("ACGT"), 16)) + "-1")
    ordered = sorted(barcodes)
    return [ordered[i] for i in rng.permutation(count)]


def write_split_csv(path: Path, sample_ids, patients=None) -> None:
    """`patients` (sample id -> patient): add a `patient` column, as a folder of your own may."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:  # pandas to_csv(index=False), as HESTData.create_splits does
        out = csv.writer(handle)
        out.writerow(["sample_id", "patches_path", "expr_path", *(["patient"] if patients else [])])
        out.writerows([s, f"patches/{s}.h5", f"adata/{s}.h5ad", *([patients[s]] if patients else [])]
                      for s in sample_ids)


def write_patches(path: Path, barcodes, tiles, coords=None, barcode_kind="vlen", flat=False) -> None:
    """`barcode_kind`: "vlen" (UTF-8, as HEST writes it) or "bytes" (fixed-length `S`); `flat`: [N] not [N, 1]."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (len(barcodes),) if flat else (len(barcodes), 1)
    with h5py.File(path, "w") as file:
        file.create_dataset("img", data=tiles)
        if barcode_kind == "vlen":
            file.create_dataset("barcode", data=np.array(barcodes, dtype=object).reshape(shape), dtype=STRING)
        else:
            file.create_dataset("barcode", data=np.array([b.encode() for b in barcodes]).reshape(shape))
        if coords is not None:
            file.create_dataset("coords", data=coords)


def write_h5ad(path: Path, obs_names, var_names, counts, x_format="dense") -> None:
    """An AnnData file (anndata 0.8+ spec) with X in `x_format`: "dense", "csr", "csc", "csr_h5sparse" (the attrs of
    files before anndata 0.7), or None (no X)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as file:
        file.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
        _write_dataframe(file.create_group("obs"), obs_names, "in_tissue")
        _write_dataframe(file.create_group("var"), var_names, "n_cells")
        for key in ("layers", "obsm", "obsp", "uns", "varm", "varp"):
            file.create_group(key).attrs.update({"encoding-type": "dict", "encoding-version": "0.1.0"})
        if x_format == "dense":
            file.create_dataset("X", data=counts).attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})
        elif x_format is not None:
            _write_sparse(file, np.asarray(counts), x_format)


def _write_dataframe(group: h5py.Group, names, column: str) -> None:
    group.attrs.update({"_index": "_index", "column-order": np.array([column], dtype=object),
                        "encoding-type": "dataframe", "encoding-version": "0.2.0"})
    index = group.create_dataset("_index", data=np.array(names, dtype=object), dtype=STRING)
    index.attrs.update({"encoding-type": "string-array", "encoding-version": "0.2.0"})
    values = group.create_dataset(column, data=np.ones(len(names), dtype=np.int64))
    values.attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})


def _write_sparse(file: h5py.File, counts: np.ndarray, x_format: str) -> None:
    by_column = x_format == "csc"
    major, minor = np.nonzero(counts.T if by_column else counts)  # row-major order of the stored orientation
    data = (counts.T if by_column else counts)[major, minor]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(major, minlength=counts.shape[1 if by_column else 0]))])
    group = file.create_group("X")
    group.create_dataset("data", data=data)
    group.create_dataset("indices", data=minor.astype(np.int32))
    group.create_dataset("indptr", data=indptr.astype(np.int32))
    if x_format == "csr_h5sparse":
        group.attrs.update({"h5sparse_format": "csr", "h5sparse_shape": counts.shape})
    else:
        group.attrs.update({"encoding-type": f"{x_format}_matrix", "encoding-version": "0.1.0", "shape": counts.shape})
