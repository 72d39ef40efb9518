"""Patho-Bench's published splits (hub dataset MahmoodLab/Patho-Bench) as a slide task, run fold by fold.

Layout, as Patho-Bench downloads it (mahmoodlab/Patho-Bench patho_bench/SplitFactory.py `from_hf` at 660e770):
`<splits_root>/<source>/<task>/k=all.tsv` with `config.yaml` beside it. The split file is read as DataSplit reads it
(patho_bench/datasets/DataSplit.py): tab-separated for `.tsv`, else comma-separated; one row per slide with `slide_id`,
`case_id`, the task column and `fold_0` .. `fold_<k-1>` (every column named `fold_<n>`, in n's order), each holding
`train`, `val`, `test` or `-1` (DataSplit.sample_fewshots' "in no split"); rows with an empty task value are dropped;
the rows of one sample (config `sample_col`) must agree on their label and folds. config.yaml gives `task_col`,
`sample_col`, `label_dict` (class id in the task column -> class name; the card's classes are those names) and
`extra_cols`; a survival task's time and event are the columns `<task>_days` and `<task>_event`
(patho_bench/DatasetFactory.py `_labels_dataset`). Without a config, `task` names the label column and its values
are the card's class names.

Reader args: `split_file` (the k=all.tsv, relative to the data root) or `task_code` (Patho-Bench's
`<source>--<task>` or cross-cohort `<train source>==<test source>--<task>`, Runner/ExperimentFactory
`parse_task_code`) under `splits_root`; `config` (default: config.yaml beside the (train) split file, when there);
`slides`: where slide `<slide_id>` is: a folder (its files `<slide_id>.<slide suffix>`), a pattern with `{slide_id}`
(glob wildcards allowed, e.g. `wsis/{slide_id}.*`), or a `.csv` with columns slide_id, slide_path; `{source}` in a
folder or pattern is the cohort's source name. Paths are relative to the data root unless absolute.

Folds: each fold column is one fold; the runner runs them all (`cv_folds`, `use_fold`; results/folds.py). A cross-
cohort code is one fold, as Patho-Bench runs it (GeneralizabilityExperimentWrapper with test_external_only: every
sample of the train cohort's file trains, every sample of the test cohort's file tests; the train cohort's config).
Val: the published splits hold train and test only (Patho-Bench README: "only include train and test assignments,
not validation ... manually reserve a portion of the training set"). Our probes choose hyper-parameters on val, so a
fold without val carves one from its train: `val_fraction` of train's patients, class- (survival: event-) stratified,
seeded by `seed + fold` (readers/splits.py carve_val), the same on every run. Refusing the probes that choose on val
instead would leave the slide probes (abmil, meanpool) unusable on every published task. The probe thus trains on
fewer slides than Patho-Bench's linear probe, which fits on all of train with a fixed cost.

Units: a slide's patient is its `case_id` (else its sample); a case's slides must share a split within a fold. The
`slide` kind scores slides (a multi-slide case's slides each carry the case label; Patho-Bench pools a case's slides
into one sample where sample_col is case_id); the `survival` kind scores patients, as Patho-Bench's case-level tasks.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.slides.base import SlideReader
from evalsuite.readers.slides.patho_bench_files import SPLIT_FILE, Cohort, find_slides, read_cohort, task_columns
from evalsuite.readers.slides.slide_identity import first_same_file
from evalsuite.readers.slides.slide_manifest import SPLITS, SlideRecord, check_events, check_patients_in_one_split
from evalsuite.readers.splits import carve_val
from evalsuite.tasks.kinds import KINDS


class PathoBenchReader(SlideReader):
    def __init__(self, card, data_root, check_counts: bool = True, split_file: str | None = None,
                 task_code: str | None = None, splits_root: str = ".", config: str | None = None,
                 slides: str = "slides", task: str | None = None, val_fraction: float = 0.2, seed: int = 0):
        super().__init__(card, data_root, check_counts)
        if not KINDS[card.kind].bags:
            raise EvalsuiteError(f"task card {card.path}: reader patho_bench reads slides; the card's kind must be "
                                 f"slide or survival, not {card.kind}")
        self.val_fraction = checked_fraction(card, "val_fraction", val_fraction)
        self.seed = checked_seed(card, "seed", seed)
        files = self._split_files(split_file, task_code, splits_root)
        self.manifest_path = files[0][1]
        columns = task_columns(self._path(config) if config else None, files[0][1], task, card, self.survival)
        self.cohorts = [read_cohort(source, path, columns, card.classes, self.survival) for source, path in files]
        for cohort in self.cohorts:
            cohort.paths = find_slides(cohort, slides, self.data_root)
        if len(self.cohorts) == 2:
            check_cohorts_apart(*self.cohorts)
        check_one_file_per_slide(self.cohorts)
        folds = 1 if len(self.cohorts) == 2 else len(self.cohorts[0].fold_columns)
        self.cv_folds = folds if folds > 1 else None  # one fold: a plain run (with its bootstrap intervals)
        self.fold, self._by_fold, self._kept_by_fold = 0, {}, {0: self._kept}

    def _path(self, name: str) -> Path:
        return Path(name) if Path(name).is_absolute() else self.data_root / name

    def _split_files(self, split_file, task_code, splits_root) -> list:
        """[(source, split file)]: one cohort, or the train and the test cohort of a cross-cohort code."""
        if (split_file is None) == (task_code is None):
            raise EvalsuiteError(f"task card {self.card.path}: give one of reader.args split_file (a Patho-Bench "
                                 "k=all.tsv) and task_code (bcnb--her2, cptac_ccrcc==mut-het-rcc--BAP1_mutation)")
        if split_file is not None:
            path = self._path(split_file)
            return [(path.parent.parent.name, path)]
        sources, task = parse_task_code(task_code, self.card)
        return [(source, self._path(splits_root) / source / task / SPLIT_FILE) for source in sources]

    def use_fold(self, fold: int) -> None:
        if not 0 <= fold < (self.cv_folds or 1):
            raise ValueError(f"fold {fold} of a task with {self.cv_folds or 1} folds")
        self.fold = fold
        self._kept = self._kept_by_fold.setdefault(fold, {})  # the slides cached in this fold's splits

    def records(self) -> list[SlideRecord]:
        return self._fold_records(self.fold)

    def split_records(self, split: str) -> list[SlideRecord]:
        self.check_split(split, self.card.splits)
        return [record for record in self._fold_records(self.fold) if record.split == split]

    def fold_samples(self, fold: int) -> dict:
        """The slides of each split of one fold (val: carved from train when the file has none) and its column."""
        records = self._fold_records(fold)
        column = "all (cross-cohort)" if len(self.cohorts) == 2 else self.cohorts[0].fold_columns[fold]
        return {"column": column, **{split: [r.slide_id for r in records if r.split == split] for split in SPLITS},
                "test_patients": sorted({r.patient for r in records if r.split == "test"})}

    def _fold_records(self, fold: int) -> list[SlideRecord]:
        if fold not in self._by_fold:
            self._by_fold[fold] = self._checked(self._assigned(fold))
        return self._by_fold[fold]

    def _assigned(self, fold: int) -> list[SlideRecord]:
        if len(self.cohorts) == 2:
            placed = [(cohort, row, split) for cohort, split in zip(self.cohorts, ("train", "test"))
                      for row in cohort.rows]
            source = f"{self.cohorts[0].path} (train) and {self.cohorts[1].path} (test)"
        else:
            cohort = self.cohorts[0]
            placed = [(cohort, row, row.folds[fold]) for row in cohort.rows if row.folds[fold] != "-1"]
            source = f"{cohort.path} ({cohort.fold_columns[fold]})"
        records = [SlideRecord(row.slide_id, cohort.paths[row.slide_id], row.target, row.patient, split)
                   for cohort, row, split in placed]
        check_patients_in_one_split(records, None, where=f"Patho-Bench split file {source}", patient="case")
        if not any(record.split == "val" for record in records):
            records = self._with_val(records, fold)
        if self.survival:
            check_events(records, source)
        return records

    def _with_val(self, records: list, fold: int) -> list:
        train = [r for r in records if r.split == "train"]
        strata = np.array([int(r.target[-1]) if self.survival else r.target[0] for r in train], dtype=np.int64)
        moved = carve_val(strata, self.val_fraction, self.seed + fold, groups=np.array([r.patient for r in train]))
        to_val = {r.slide_id for r, m in zip(train, moved) if m}
        return [SlideRecord(r.slide_id, r.path, r.target, r.patient, "val") if r.slide_id in to_val else r
                for r in records]


def parse_task_code(code: str, card) -> tuple[list, str]:
    """([source] or [train source, test source], task) of `<source>--<task>` or `<train>==<test>--<task>`."""
    parts = str(code).split("--")
    sources = parts[0].split("==") if len(parts) == 2 else []
    if len(parts) != 2 or not all(sources) or not parts[1] or len(sources) > 2 or len(set(sources)) != len(sources):
        raise EvalsuiteError(f"task card {card.path}: reader.args.task_code '{code}' is not Patho-Bench's "
                             "<source>--<task> or <train source>==<test source>--<task> (two different sources)")
    return sources, parts[1]


def check_cohorts_apart(train: Cohort, test: Cohort) -> None:
    for what, key in (("case", lambda row: row.patient), ("slide", lambda row: row.slide_id)):
        shared = sorted({key(row) for row in train.rows} & {key(row) for row in test.rows})
        if shared:
            raise EvalsuiteError(f"Patho-Bench split files {train.path} and {test.path} both list {what} "
                                 f"'{shared[0]}'; a cross-cohort task trains and tests on different {what}s (two "
                                 f"{what}s sharing an id: give one of them another id)")


def check_one_file_per_slide(cohorts: list) -> None:
    ids = [(cohort, row) for cohort in cohorts for row in cohort.rows]
    same = first_same_file([cohort.paths[row.slide_id] for cohort, row in ids])
    if same is not None:
        (cohort, first), (_, later) = ids[same[0]], ids[same[1]]
        raise EvalsuiteError(f"Patho-Bench split file {cohort.path}: slides '{first.slide_id}' and '{later.slide_id}' "
                             f"name one file ({same[2]}); point reader.args.slides at one file per slide")
