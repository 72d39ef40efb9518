"""Whose tissue a HEST sample is: the test bootstrap's cluster, and what a fold of one patient can say.

HEST's split files name samples (tissue sections), not patients: HESTData.create_splits writes sample_id,
patches_path and expr_path only, after grouping the samples by the `patient` column of its metadata
(assets/HEST_v1_1_0.csv). Some tasks hold several sections of one patient (PRAD: 23 sections of 2 patients; READ: 2
replicate sections of each of 2 patients), so a bootstrap over a fold's sections would measure how sections of one
patient differ, not how patients do. A sample's patient is the `patient` cell of its split file where a folder has
that column, else the card's `reader.args.patients` (sample id -> patient); with neither, the sample is the cluster.
Where both name a sample's patient they must agree: the card's was dropped without a word, and it may be the one
that is right (issue 48).
"""

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.few_clusters import MIN_CLUSTERS, too_few_clusters
from evalsuite.readers.spots.hest_folds import listed_rows
from evalsuite.readers.spots.hest_h5ad import TASK, examples

CARD_FIX = "map every sample id to its patient, e.g. patients: {MEND139: patient 2, MEND154: patient 1}"


def sample_patients(fold_rows: list, card_patients, card_path, fold_paths: list) -> dict | None:
    """{sample id: patient} for every sample of `fold_rows` [(train rows, test rows), ...] read from `fold_paths`
    [(train_k.csv, test_k.csv), ...], or None where neither the split files nor the card (`card_patients`, its
    reader.args.patients) name any patient. Where both name one, they must agree: the card's was dropped unsaid."""
    card_map = _card_map(card_patients, card_path)
    found, missing = {}, []  # found: sample id -> (patient, where it is named)
    for row, split_file in listed_rows(fold_rows, fold_paths):
        conflict = row.patient is not None and card_map.get(row.sample_id, row.patient) != row.patient
        if conflict:
            raise EvalsuiteError(f"{TASK}: sample '{row.sample_id}' has patient '{row.patient}' in {split_file} but "
                                 f"'{card_map[row.sample_id]}' in reader.args.patients of {card_path}; give it one "
                                 "patient: fix one of the two, or drop the card's entry")
        patient, named_in = (row.patient, split_file) if row.patient else (card_map.get(row.sample_id), card_path)
        if patient is None:
            missing.append(row.sample_id)
        elif found.setdefault(row.sample_id, (patient, named_in))[0] != patient:
            first, first_in = found[row.sample_id]
            raise EvalsuiteError(f"{TASK}: sample '{row.sample_id}' has patient '{first}' in one split file and "
                                 f"'{patient}' in another ({first_in}, {named_in}); give each sample one patient")
    if missing and (found or card_map):
        raise EvalsuiteError(f"{TASK}: no patient is named for sample {examples(sorted(set(missing)))}, while "
                             f"{'the card names' if card_map else 'the split files name'} others'; add it to the "
                             f"patient column of the split files or to reader.args.patients of {card_path}")
    return {sample: patient for sample, (patient, _) in found.items()} or None


def _card_map(card_patients, card_path) -> dict:
    if card_patients is None:
        return {}
    if not isinstance(card_patients, dict) or not card_patients:
        raise EvalsuiteError(f"task card {card_path}: reader.args.patients must be a mapping; {CARD_FIX}")
    for sample, patient in card_patients.items():
        if not (isinstance(sample, str) and isinstance(patient, str) and sample.strip() and patient.strip()):
            raise EvalsuiteError(f"task card {card_path}: reader.args.patients maps {sample!r} to {patient!r}; "
                                 f"{CARD_FIX}")
    return {sample.strip(): patient.strip() for sample, patient in card_patients.items()}


def few_cluster_note(test_clusters: list, unit: str) -> str | None:
    """The run's note where a fold's test has fewer `unit`s than an interval needs (`test_clusters`: each fold's test
    cluster ids; few_clusters.MIN_CLUSTERS): that fold's interval is empty, as the scorers leave it. None when no
    fold is that small."""
    few = [(fold, sorted(set(map(str, ids)))) for fold, ids in enumerate(test_clusters)
           if too_few_clusters(len(set(ids)))]
    if not few:
        return None
    folds = "; ".join(f"test_fold{fold}: {', '.join(repr(name) for name in names)}" for fold, names in few)
    parts = "sections" if unit == "patient" else "spots"  # HEST's samples are sections; a section's parts are spots
    single = all(len(names) == 1 for _, names in few)
    what = (f"test one {unit} ({folds}): resampling the {parts} of one {unit} would measure variation within that "
            f"{unit}, not between {unit}s" if single else
            f"test fewer than {MIN_CLUSTERS} {unit}s ({folds}): one {unit} has no variation between {unit}s to "
            f"resample, and 2 or 3 give no interval that holds (docs/significance.md, \"Few clusters\")")
    return (f"{len(few)} of {len(test_clusters)} folds {what}, so those folds' intervals are empty (nan); the spread "
            f"over folds (<metric>_fold_std) is the only variation between {unit}s")
