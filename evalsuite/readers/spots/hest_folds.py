"""A HEST task's folds must not leak: no sample (nor patient) in train and test of one fold, no section under two ids.

Why: a sample on both sides of a fold is scored on spots the probe was fitted on, and so is one section whose patch
and expression files are listed under two sample ids (a renamed copy, a link). Slide manifests refuse both
(readers/slides/slide_manifest.py, readers/slides/slide_identity.py); these are the same rules for HEST's split files,
checked when the task is read, before any tile is extracted.
"""

from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.slide_identity import first_same_file
from evalsuite.readers.spots.hest_h5ad import TASK

FILE_KINDS = {"patches_path": "patch file", "expr_path": "expression file"}


def check_folds_disjoint(fold_rows: list, fold_paths: list, patient_of: dict | None) -> None:
    """`fold_rows` [(train rows, test rows)] read from `fold_paths` [(train_k.csv, test_k.csv)]; `patient_of`:
    {sample id: patient} where known."""
    for (train, test), (train_path, test_path) in zip(fold_rows, fold_paths):
        trained = {row.sample_id for row in train}
        both = [row.sample_id for row in test if row.sample_id in trained]
        if both:
            raise EvalsuiteError(f"{TASK}: sample '{both[0]}' is listed in both {train_path} and {test_path}; a "
                                 "sample's spots must share one split of a fold (its test spots would score a probe "
                                 "fitted on them): remove it from one of the two files")
        if patient_of:
            _check_patients(train, test, patient_of, train_path, test_path)


def _check_patients(train: list, test: list, patient_of: dict, train_path: Path, test_path: Path) -> None:
    trained = {patient_of[row.sample_id]: row.sample_id for row in train}
    for row in test:
        patient = patient_of[row.sample_id]
        if patient in trained:
            raise EvalsuiteError(f"{TASK}: patient '{patient}' has sample '{trained[patient]}' in {train_path} and "
                                 f"sample '{row.sample_id}' in {test_path}; a patient's samples must share one split "
                                 "of a fold: move one of them, or fix its patient")


def check_one_sample_per_file(fold_rows: list, fold_paths: list) -> None:
    """Each sample id names one patch and one expression file in every split file, and no file is named by two ids."""
    first = {}  # sample id -> (its first row, the split file listing it)
    for row, path in listed_rows(fold_rows, fold_paths):
        seen, seen_in = first.setdefault(row.sample_id, (row, path))
        for column, kind in FILE_KINDS.items():
            if getattr(seen, column).resolve() != getattr(row, column).resolve():
                raise EvalsuiteError(f"{TASK}: sample '{row.sample_id}' names {kind} {getattr(row, column)} in "
                                     f"{path} but {getattr(seen, column)} in {seen_in}; give a sample the same "
                                     "files in every split file")
    samples = list(first.values())
    for column, kind in FILE_KINDS.items():
        same = first_same_file([getattr(row, column) for row, _ in samples])
        if same is not None:
            (earlier, _), (later, later_in) = samples[same[0]], samples[same[1]]
            raise EvalsuiteError(f"{TASK}: sample '{later.sample_id}' ({later_in}) names the {kind} of sample "
                                 f"'{earlier.sample_id}' ({same[2]}: {getattr(later, column)}); one section under two "
                                 "ids is scored twice or leaks between train and test: list each sample once")


def listed_rows(fold_rows: list, fold_paths: list):
    """(row, the split file listing it) for every row of every split file, fold by fold."""
    for (train, test), (train_path, test_path) in zip(fold_rows, fold_paths):
        yield from ((row, train_path) for row in train)
        yield from ((row, test_path) for row in test)
