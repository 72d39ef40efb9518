"""PANDA (Kaggle, prostate biopsies) in its distributed layout: ISUP grade 0-5 per slide.

Layout under the data root: `train_images/<image_id>.tiff` and `train.csv` (columns image_id,
data_provider, isup_grade, gleason_score; 10,616 slides). Kaggle's test set has no public
labels, so the labelled slides are split by eva's rule (`stratified_split`, kaiko-ai/eva
src/eva/core/data/splitting/stratified.py) with `ratios` = (train, val, test): slides in eva's
order (sorted `<image_id>.tiff`), then per ISUP grade in ascending order a shuffle by one numpy
default_rng(seed) shared by the grades; floor(train x n) slides (at least 1) go to train, the
next floor(val x n) (at least 1) to val; when the three ratios sum to exactly 1 (a float
comparison, as eva's) the rest go to test, otherwise the next floor(test x n) (at least 1) and
the remainder is in no split (PANDA-small, 0.1/0.05/0.05, uses a fifth of the slides).
eva additionally drops the slides that analokmaus' relabelled train.csv marks as noisy (column
noise_ratio_10): point `labels_csv` at that file to do the same; with Kaggle's own train.csv
every slide is kept. A biopsy's patient is not published: each slide is its own unit.
"""

import csv

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.reader_args import checked_seed
from evalsuite.readers.slides.base import SlideReader
from evalsuite.readers.slides.slide_manifest import SlideRecord

KAGGLE_SLIDES = 10616


class PandaReader(SlideReader):
    def __init__(self, card, data_root, check_counts: bool = True, labels_csv: str = "train.csv",
                 ratios: tuple = (0.7, 0.15, 0.15), seed: int = 42):
        super().__init__(card, data_root, check_counts)
        self.labels_csv, self.ratios = self.data_root / labels_csv, _checked_ratios(card, ratios)
        self.seed = checked_seed(card, "seed", seed)  # int(.inf) was an internal OverflowError

    def records(self) -> list[SlideRecord]:
        rows = self._rows()
        grades = np.array([int(r["isup_grade"]) for r in rows])
        split_of = _stratified_splits(grades, self.ratios, self.seed)
        images = self.data_root / "train_images"
        return [SlideRecord(r["image_id"], images / f"{r['image_id']}.tiff", (int(r["isup_grade"]),), r["image_id"],
                            split) for r, split in zip(rows, split_of) if split is not None]

    def _rows(self) -> list[dict]:
        if not self.labels_csv.is_file():
            raise EvalsuiteError(f"PANDA: labels {self.labels_csv} not found; the data root must hold train.csv and "
                                 "train_images/ as distributed by Kaggle (docs/slides.md)")
        with open(self.labels_csv, newline="") as handle:
            # eva's order is its sorted file names; "a-b.tiff" < "a.tiff" though "a" < "a-b", so sort the names
            rows = sorted(csv.DictReader(handle), key=lambda r: f"{r.get('image_id', '')}.tiff")
        if not rows or "image_id" not in rows[0] or "isup_grade" not in rows[0]:
            raise EvalsuiteError(f"PANDA: {self.labels_csv} needs the columns image_id and isup_grade")
        if self.check_counts and len(rows) != KAGGLE_SLIDES:
            raise EvalsuiteError(f"PANDA: {self.labels_csv} lists {len(rows)} slides, Kaggle's has {KAGGLE_SLIDES}; "
                                 "pass --no-count-check for a subset")
        bad = [r["image_id"] for r in rows if r["isup_grade"] not in {str(g) for g in range(6)}]
        if bad:
            raise EvalsuiteError(f"PANDA: {self.labels_csv}: slide {bad[0]} has isup_grade outside 0-5")
        if "noise_ratio_10" in rows[0]:  # analokmaus' relabelled file: eva drops the rows where it is 0
            rows = [r for r in rows if float(r["noise_ratio_10"]) != 0]
        return rows


def _checked_ratios(card, ratios) -> tuple:
    numbers = ratios if isinstance(ratios, (list, tuple)) else ()
    numbers = tuple(numbers) if all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in numbers) else ()
    train, val, test = numbers if len(numbers) == 3 else (-1, -1, -1)
    # eva's own check is train + val + test <= 1; a test share of 0 would leave the test split empty
    if min(train, val) < 0 or test <= 0 or train + val + test > 1:
        raise EvalsuiteError(f"task card {card.path}: reader.args.ratios must be three shares [train, val, test] >= 0 "
                             f"with test > 0 and a sum <= 1, as eva's (PANDA [0.7, 0.15, 0.15], PANDA-small "
                             f"[0.1, 0.05, 0.05]); got {ratios!r}")
    return float(train), float(val), float(test)


def _stratified_splits(grades: np.ndarray, ratios: tuple, seed: int) -> list:
    """The split of every slide (None: left out), eva's `stratified_split` rule (module docstring)."""
    train, val, test = ratios
    use_all = train + val + test == 1  # eva's exact float comparison (0.7 + 0.15 + 0.15 == 1 holds in floats)
    rng = np.random.default_rng(seed)
    split_of = np.full(len(grades), None, dtype=object)
    for grade in np.unique(grades):
        members = np.flatnonzero(grades == grade)
        rng.shuffle(members)
        n_train = int(np.floor(train * len(members))) or 1
        n_val = int(np.floor(val * len(members))) or 1
        n_test = len(members) - n_train - n_val if use_all else int(np.floor(test * len(members))) or 1
        split_of[members[:n_train]] = "train"
        split_of[members[n_train : n_train + n_val]] = "val"
        split_of[members[n_train + n_val : n_train + n_val + n_test]] = "test"
    return split_of.tolist()
