"""A cross-validated task's folds in one run record: every fold's rows, and their mean and spread over folds.

A reader with folds (HEST-Benchmark's patient-level `splits/train_<k>.csv`, `test_<k>.csv`) is run fold by fold;
each fold's probe results are kept under the splits `train_fold<k>`, `val_fold<k>`, `test_fold<k>` (with that
fold's test bootstrap interval), and `train`, `val`, `test` hold each metric's mean over folds, as HEST reports
a task (benchmark.py `merge_fold_results`: the mean over folds of each fold's mean over genes). Test adds
`<metric>_fold_std`, the standard deviation over folds (population, numpy's default, as HEST's `np.std`). A
mean over folds has no bootstrap interval of its own: the folds' test sets are different samples, each
interval is in its fold's rows. `*_undefined_targets` counts are summed over folds, not averaged. Nor does it
have per-item test predictions (the folds' items differ): the merged result keeps none of the folds'.
"""

import numpy as np

from evalsuite.results.beside_run import PER_ITEM_OUTPUTS

FOLD_SPLITS = ("train", "val", "test")
COUNT_SUFFIX = "_undefined_targets"


def fold_split(split: str, fold: int) -> str:
    return f"{split}_fold{fold}"


def merge_folds(per_fold: list) -> list:
    """One probe result per (probe, seed) from `per_fold` [fold][result] (the same probes and seeds, in the same
    order, in every fold)."""
    return [_merged([results[i] for results in per_fold]) for i in range(len(per_fold[0]))]


def _merged(results: list) -> dict:
    first = results[0]
    metrics, intervals = {}, {}
    for fold, result in enumerate(results):
        for split, values in result["metrics"].items():
            metrics[fold_split(split, fold)] = values
        for split, values in result.get("intervals_95", {}).items():
            intervals[fold_split(split, fold)] = values
    for split in FOLD_SPLITS:
        metrics[split] = _over_folds([r["metrics"][split] for r in results], with_std=split == "test")
    kept = {key: value for key, value in first.items() if key not in PER_ITEM_OUTPUTS}  # fold 0's items only
    return {**kept, "metrics": metrics, "intervals_95": intervals,
            "selected_params": {f"fold{fold}": r["selected_params"] for fold, r in enumerate(results)},
            "fit_s": sum(r.get("fit_s", 0.0) for r in results)}


def _over_folds(per_fold: list, with_std: bool) -> dict:
    merged = {}
    for metric in per_fold[0]:
        values = np.array([fold.get(metric, np.nan) for fold in per_fold], dtype=np.float64)
        if metric.endswith(COUNT_SUFFIX):
            merged[metric] = int(np.nansum(values))
            continue
        merged[metric] = float(values.mean())
        if with_std:
            merged[f"{metric}_fold_std"] = float(values.std())
    return merged


def merged_sizes(per_fold_sizes: list) -> dict:
    """n_samples per split name: each fold's own; for the means, test counts every fold's test items (each scored
    once over the folds) and train and val a fold's mean size, rounded."""
    sizes = {fold_split(split, fold): count for fold, split_sizes in enumerate(per_fold_sizes)
             for split, count in split_sizes.items()}
    for split in FOLD_SPLITS:
        counts = [split_sizes[split] for split_sizes in per_fold_sizes]
        sizes[split] = int(sum(counts)) if split == "test" else int(round(np.mean(counts)))
    return sizes
