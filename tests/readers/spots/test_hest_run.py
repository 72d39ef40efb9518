"""A HEST-Benchmark task folder in HEST's exact layout, run end to end through the CLI with its folds.

The fixture (hest_layout.py) writes 4 samples with leave-one-out folds, as IDC's 4 samples and 4 folds. The run's
every fold is checked against a scikit-learn re-implementation of HEST's own pipeline on the same cached features
(mahmoodlab/HEST src/hest/bench/benchmark.py: StandardScaler + PCA fit on train; trainer.py train_test_reg:
Ridge(solver='lsqr', alpha=100 / (dim x genes), fit_intercept=False, max_iter=1000), Pearson r per gene with scipy,
mean over genes; the task's score: the mean over folds, its spread np.std over folds).
"""

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, leaderboard_rows, run_cli
from hest_layout import write_hest_task
from scipy.stats import pearsonr
from sklearn.decomposition import PCA
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

SAMPLES = {"TENX95": 150, "TENX99": 140, "NCBI783": 130, "NCBI785": 160}
# HEST's float32 lsqr stops at scikit-learn's tol: on ill-conditioned PCA scores its solution moves by about 1e-3 when
# the scores move by float rounding (measured on this fixture: 32 of test_vit's 64 random-init dimensions, whose
# smallest component holds 1/180 of the largest one's variance, give 1e-3 between scikit-learn's PCA and ours; 16
# give 1e-7). The equality is checked where the problem is well-conditioned, with a recipe of 16 components.
RECIPE = "name: ridge_hest_16\nprobe: ridge_hest\nparams: {components: 16, alpha_numerator: 100.0, max_iter: 1000}\n"
COMPONENTS = 16


def _hest_train_test_reg(x_train, x_test, y_train, y_test, seed: int) -> float:
    pipe = Pipeline([("scaler", StandardScaler()), ("PCA", PCA(n_components=COMPONENTS, random_state=seed))])
    x_train = pipe.fit_transform(x_train).astype(np.float32)  # benchmark.py wraps them in torch.Tensor (float32)
    x_test = pipe.transform(x_test).astype(np.float32)
    reg = Ridge(solver="lsqr", alpha=100 / (x_train.shape[1] * y_train.shape[1]), random_state=seed,
                fit_intercept=False, max_iter=1000).fit(x_train, y_train.astype(np.float32))
    predictions = reg.predict(x_test)
    return float(np.mean([pearsonr(y_test[:, g], predictions[:, g])[0] for g in range(y_test.shape[1])]))


def _cached(out, key: str) -> tuple[np.ndarray, np.ndarray]:
    folder = out / "cache" / key
    return np.load(folder / "features.npy").astype(np.float64), np.load(folder / "labels.npy")


@pytest.mark.parametrize("sparse", [False, True], ids=["dense_X", "csr_X"])
def test_a_hest_task_runs_every_fold_and_each_equals_hest_own_pipeline(tmp_path, sparse):
    written = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, sparse=sparse, tile_px=32,
                              rng=np.random.default_rng(3))
    out, recipe = tmp_path / "out", tmp_path / "ridge_hest_16.yaml"
    recipe.write_text(RECIPE)
    result = run_cli("run", "--task", "hest_idc", "--data-root", written.task_dir, "--model", "test_vit",
                     "--random-init", "--probes", recipe, "--out", out)
    assert result.returncode == 0, result.stderr
    record = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert [fold["test"] for fold in record["folds"]] == [[sample] for sample in SAMPLES]
    rows = {(r["split"], r["metric"]): r for r in leaderboard_rows(out)}
    per_fold = []
    for fold, held_out in enumerate(SAMPLES):
        x_train, y_train = _cached(out, record["cache"]["keys"][f"train_fold{fold}"])
        x_test, y_test = _cached(out, record["cache"]["keys"][f"test_fold{fold}"])
        # The targets are log1p of the h5ad's counts, spots in patch-file order, genes in var_50genes.json order.
        np.testing.assert_array_equal(y_test, np.log1p(written.counts[held_out]))
        per_fold.append(_hest_train_test_reg(x_train, x_test, y_train, y_test, seed=0))
        assert float(rows[(f"test_fold{fold}", "pearson")]["value"]) == pytest.approx(per_fold[-1], abs=1.5e-6)
        assert rows[(f"test_fold{fold}", "pearson")]["n_samples"] == str(SAMPLES[held_out])
    assert float(rows[("test", "pearson")]["value"]) == pytest.approx(np.mean(per_fold), abs=1.5e-6)
    assert float(rows[("test", "pearson_fold_std")]["value"]) == pytest.approx(np.std(per_fold), abs=1.5e-6)
    assert rows[("test", "pearson")]["n_samples"] == str(sum(SAMPLES.values()))
    # HEST has no val split: val is each fold's train, under train's cache (extracted once).
    assert record["cache"]["keys"]["val_fold0"] == record["cache"]["keys"]["train_fold0"]


def test_hest_bad_input_is_one_line_and_writes_nothing(tmp_path):
    written = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=32, rng=np.random.default_rng(4))
    genes_file = written.task_dir / "var_50genes.json"
    genes_file.write_text(json.dumps({"genes": [*written.genes, "NOTAGENE"]}))
    out = tmp_path / "out"
    result = run_cli("run", "--task", "hest_idc", "--data-root", written.task_dir, "--model", "test_vit",
                     "--random-init", "--out", out)
    assert_one_line_error(result, "NOTAGENE", str(genes_file))
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()


def test_a_hest_card_counts_its_folds_and_samples(tmp_path):
    written = write_hest_task(tmp_path / "bench_data", samples=dict(list(SAMPLES.items())[:3]), tile_px=32)
    result = run_cli("run", "--task", "hest_idc", "--data-root", written.task_dir, "--out", tmp_path / "out")
    assert_one_line_error(result, "has 3 folds in splits/ but HEST-Benchmark's hest_idc has 4", "--no-count-check")


def test_a_probe_that_chooses_on_val_is_refused_on_a_task_without_val(tmp_path):
    written = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=32)
    result = run_cli("run", "--task", "hest_idc", "--data-root", written.task_dir, "--probes", "ridge",
                     "--out", tmp_path / "out")
    assert_one_line_error(result, "task 'hest_idc' has no val split (its val is its train split)", "use ridge_hest")


# --- leakage and damaged files refused through the CLI before anything is extracted (issue 40) ---

TINY = {"A": 3, "B": 3, "C": 3}


def _refused(task_dir, out, *fragments) -> None:
    result = run_cli("run", "--task", "hest_idc", "--data-root", task_dir, "--model", "test_vit", "--random-init",
                     "--no-count-check", "--out", out)
    assert_one_line_error(result, *fragments)
    assert result.returncode == 2
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()


def test_a_sample_in_train_and_test_of_one_fold_is_refused(tmp_path):
    """Item 2: sample B in train_1.csv and test_1.csv was scored (test Pearson from spots it trained on)."""
    task = write_hest_task(tmp_path / "bench_data", samples=TINY, tile_px=8,
                           folds=[(["A", "B"], ["C"]), (["A", "B"], ["B", "C"])])
    splits = task.task_dir / "splits"
    _refused(task.task_dir, tmp_path / "out", "sample 'B' is listed in both", str(splits / "train_1.csv"),
             str(splits / "test_1.csv"), "must share one split of a fold", "remove it from one of the two files")


def test_a_patient_in_train_and_test_of_one_fold_is_refused(tmp_path):
    """Item 2 for patients, as a slide manifest refuses a patient whose slides straddle splits."""
    task = write_hest_task(tmp_path / "bench_data", samples=TINY, tile_px=8, folds=[(["A", "B"], ["C"])],
                           patients={"A": "P1", "B": "P2", "C": "P2"})
    _refused(task.task_dir, tmp_path / "out", "patient 'P2' has sample 'B' in", "and sample 'C' in",
             "a patient's samples must share one split of a fold")


@pytest.mark.parametrize("how, fragment", [("copy", "(a copy"), ("same-path", "(the same path once resolved")])
def test_one_sections_files_under_two_sample_ids_are_refused(tmp_path, how, fragment):
    """Item 3: train sample 'B' listed again in test as 'B2', by its own files or by renamed copies, was scored."""
    task = write_hest_task(tmp_path / "bench_data", samples=TINY, tile_px=8, folds=[(["A", "B"], ["C"])])
    files = ["patches/B.h5", "adata/B.h5ad"]
    if how == "copy":
        for name in files:
            copy = task.task_dir / name.replace("/B.", "/B2.")
            copy.write_bytes((task.task_dir / name).read_bytes())
        files = [name.replace("/B.", "/B2.") for name in files]
    test_csv = task.task_dir / "splits" / "test_0.csv"
    test_csv.write_text(test_csv.read_text() + f"B2,{files[0]},{files[1]}\n")
    _refused(task.task_dir, tmp_path / "out", f"sample 'B2' ({test_csv}) names the patch file of sample 'B' "
             f"{fragment}", "list each sample once")


def test_one_sample_id_naming_two_patch_files_is_refused(tmp_path):
    task = write_hest_task(tmp_path / "bench_data", samples=TINY, tile_px=8,
                           folds=[(["A", "B"], ["C"]), (["A", "C"], ["B"])])
    (task.task_dir / "splits" / "test_1.csv").write_text("sample_id,patches_path,expr_path\nB,patches/C.h5,"
                                                         "adata/B.h5ad\n")
    _refused(task.task_dir, tmp_path / "out", "sample 'B' names patch file", "give a sample the same files")


def test_a_damaged_sparse_pointer_is_one_line_through_the_cli(tmp_path):
    """Item 8: an h5ad whose CSR `indptr` decreases was an internal error (numpy's 'repeats may not contain
    negative values')."""
    import h5py

    task = write_hest_task(tmp_path / "bench_data", samples=TINY, tile_px=8, sparse=True,
                           folds=[(["A", "B"], ["C"])])
    path = task.task_dir / "adata" / "C.h5ad"
    with h5py.File(path, "r+") as file:
        indptr = file["X/indptr"][()]
        indptr[1], indptr[2] = indptr[2], indptr[1]
        file["X/indptr"][...] = indptr
    _refused(task.task_dir, tmp_path / "out", str(path), "'X/indptr' decreases at entry 2", "re-download")
