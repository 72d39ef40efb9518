"""The HEST-Benchmark reader: an H&E tile per spot, its target the log1p expression of the task's 50 genes.

One card per HEST task folder (`--data-root .../bench_data/IDC`). HEST evaluates each task by its own
patient-level folds, `splits/train_<k>.csv` and `test_<k>.csv`; the runner runs every fold in turn
(`use_fold(k)`) and reports each fold's rows and their mean and standard deviation (results/folds.py).
In fold k, `train` is the spots of the samples of train_<k>.csv and `test` those of test_<k>.csv. HEST has no
val split: `val` is train's spots under train's cache (`split_aliases`), so nothing is extracted twice, and
probes that choose on val are refused on these cards (their choice would be made on train); the leaderboard gets no
val rows (runner.py), so no table chooses between recipes on train's scores either.
A spot's targets: its counts of the card's genes (`targets: var_50genes.json`, HEST's file) in the sample's
.h5ad, matched by barcode, log1p as HEST (hest_h5ad.log1p_expression). The bootstrap's cluster is the patient where
the split files or the card name one (hest_patients.py), else the sample; a fold whose test is one cluster has no
interval, and the run's note says so (`intervals_note`).
"""

from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import Reader, TargetImages
from evalsuite.readers.reader_args import checked_integer
from evalsuite.readers.spots.hest_files import (
    PatchFile,
    fold_files,
    log1p_expression,
    read_expression,
    read_gene_list,
    read_split_csv,
)
from evalsuite.readers.spots.hest_folds import check_folds_disjoint, check_one_sample_per_file
from evalsuite.readers.spots.hest_identity import check_one_section_per_sample
from evalsuite.readers.spots.hest_patients import few_cluster_note, sample_patients

LAYOUT = ("one HEST-Benchmark task folder as distributed (bench_data/<TASK>): splits/train_<k>.csv and test_<k>.csv, "
          "patches/<sample>.h5, adata/<sample>.h5ad, var_50genes.json")


class SpotTiles(TargetImages):
    """The spots of several samples' patch files, in split-file order then patch-file order."""

    def __init__(self, patches: list, targets: np.ndarray, transform):
        super().__init__(targets, transform)
        self.patches = patches
        self.where = [(number, row) for number, patch in enumerate(patches) for row in range(len(patch))]

    def image(self, index: int) -> Image.Image:
        number, row = self.where[index]
        return Image.fromarray(self.patches[number].tile(row))


class HestReader(Reader):
    split_aliases = {"val": "train"}  # HEST has no val split (see the module docstring)

    def __init__(self, card, data_root: Path, folds: int | None = None, samples: int | None = None,
                 patients: dict | None = None, check_counts: bool = True):
        self.card, self.task_dir = card, Path(data_root)
        if not isinstance(card.targets, str):
            raise EvalsuiteError(f"task card {card.path}: a hest card's 'targets' names the task's gene list file, "
                                 "e.g. targets: var_50genes.json")
        for name, count in (("folds", folds), ("samples", samples)):  # the counts _check_counts compares
            if count is not None:
                checked_integer(card, name, count, 1, why=" (HEST-Benchmark's count of the task, checked against "
                                                          "splits/)")
        self.target_names = read_gene_list(self.task_dir / card.targets)
        fold_paths = fold_files(self.task_dir)
        self.fold_rows = [(read_split_csv(train, self.task_dir), read_split_csv(test, self.task_dir))
                          for train, test in fold_paths]
        if check_counts:
            self._check_counts(folds, samples)
        # Spots of one section are correlated, and so are sections of one patient: the patient is the unit where known.
        self.patient_of = sample_patients(self.fold_rows, patients, card.path, fold_paths)
        check_one_sample_per_file(self.fold_rows, fold_paths)  # nothing leaks from a fold's train into its test
        check_folds_disjoint(self.fold_rows, fold_paths, self.patient_of)
        self._targets, self._patches = {}, {}
        # Opens every patch file (its barcodes are read once, here): a re-saved copy has other bytes, the same spots.
        check_one_section_per_sample(self.fold_rows, fold_paths, self._patch)
        self.interval_unit = "sample" if self.patient_of is None else "patient"
        self.cv_folds, self.fold = len(self.fold_rows), 0  # the runner runs each fold (`use_fold`)

    def use_fold(self, fold: int) -> None:
        if not 0 <= fold < self.cv_folds:
            raise ValueError(f"fold {fold} of a task with {self.cv_folds} folds")
        self.fold = fold

    def fold_samples(self, fold: int) -> dict:
        """{"train": [sample ids], "test": [sample ids]} of one fold, and "test_patients" where patients are known."""
        train, test = self.fold_rows[fold]
        patients = {"test_patients": sorted({self._cluster(row) for row in test})} if self.patient_of else {}
        return {"train": [row.sample_id for row in train], "test": [row.sample_id for row in test], **patients}

    @property
    def intervals_note(self) -> str | None:
        """What the run says where a fold's test has too few patients (or samples) for an interval: it has none."""
        return few_cluster_note([[self._cluster(row) for row in test] for _, test in self.fold_rows],
                                   self.interval_unit)

    def dataset(self, split: str, transform) -> SpotTiles:
        rows = self._rows(split)
        patches = [self._patch(row) for row in rows]
        targets = [self._sample_targets(row, patch) for row, patch in zip(rows, patches)]
        return SpotTiles(patches, np.concatenate(targets), transform)

    def groups(self, split: str) -> list:
        return [self._cluster(row) for row in self._rows(split) for _ in range(len(self._patch(row)))]

    def item_ids(self, split: str) -> list:
        """Each spot's sample and barcode, in dataset order (barcodes are unique within a patch file)."""
        return [f"{row.sample_id} spot {barcode}" for row in self._rows(split) for barcode in self._patch(row).barcodes]

    def _cluster(self, row) -> str:
        return row.sample_id if self.patient_of is None else self.patient_of[row.sample_id]

    def _patch(self, row) -> PatchFile:
        # One PatchFile per sample: a sample is in several folds and splits, and opening one checks and decodes
        # all its barcodes. PatchFile reopens its h5 handle in a forked DataLoader worker.
        if row.sample_id not in self._patches:
            self._patches[row.sample_id] = PatchFile(row.patches_path)
        return self._patches[row.sample_id]

    def _rows(self, split: str) -> list:
        self.check_split(split, self.card.splits)
        train, test = self.fold_rows[self.fold]
        return test if split == "test" else train

    def _sample_targets(self, row, patch: PatchFile) -> np.ndarray:
        if row.sample_id not in self._targets:
            counts = read_expression(row.expr_path, self.target_names, patch.barcodes,
                                     genes_source=str(self.task_dir / self.card.targets),
                                     barcodes_source=str(row.patches_path))
            self._targets[row.sample_id] = log1p_expression(counts)
        return self._targets[row.sample_id]

    def _check_counts(self, folds: int | None, samples: int | None) -> None:
        found_samples = len({row.sample_id for train, test in self.fold_rows for row in [*train, *test]})
        for what, expected, found in (("folds", folds, len(self.fold_rows)), ("samples", samples, found_samples)):
            if expected is not None and expected != found:
                raise EvalsuiteError(f"HEST task {self.task_dir} has {found} {what} in splits/ but HEST-Benchmark's "
                                     f"{self.card.name} has {expected}; point --data-root at the task's folder as "
                                     "distributed, or pass --no-count-check to run a subset")
