"""PANDA (Kaggle, prostate biopsies) in its distributed layout: ISUP grade 0-5 per slide.

Layout under the data root: `train_images/<image_id>.tiff` and `train.csv` (columns image_id,
data_provider, isup_grade, gleason_score; 10,616 slides). Kaggle's test set has no public
labels, so the labelled slides are split: per ISUP grade, seeded shuffle (numpy default_rng,
seed 42), then floor(70 %) train, floor(15 %) val, the rest test, the stratified rule of eva's
`stratified_split` (kaiko-ai/eva src/eva/core/data/splitting/stratified.py). eva additionally
drops the slides that analokmaus' relabelled train.csv marks as noisy (column noise_ratio_10):
point `labels_csv` at that file to do the same; with Kaggle's own train.csv every slide is kept.
A biopsy's patient is not published: each slide is its own unit.
"""

import csv

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slide_manifest import SlideRecord
from evalsuite.readers.slides import SlideReader

KAGGLE_SLIDES = 10616


class PandaReader(SlideReader):
    def __init__(self, card, data_root, check_counts: bool = True, labels_csv: str = "train.csv",
                 ratios: tuple = (0.7, 0.15), seed: int = 42):
        super().__init__(card, data_root, check_counts)
        self.labels_csv, self.ratios, self.seed = self.data_root / labels_csv, tuple(ratios), int(seed)

    def records(self) -> list[SlideRecord]:
        rows = self._rows()
        grades = np.array([int(r["isup_grade"]) for r in rows])
        split_of = _stratified_splits(grades, self.ratios, self.seed)
        images = self.data_root / "train_images"
        return [SlideRecord(r["image_id"], images / f"{r['image_id']}.tiff", (int(r["isup_grade"]),), r["image_id"],
                            split) for r, split in zip(rows, split_of)]

    def _rows(self) -> list[dict]:
        if not self.labels_csv.is_file():
            raise EvalsuiteError(f"PANDA: labels {self.labels_csv} not found; the data root must hold train.csv and "
                                 "train_images/ as distributed by Kaggle (docs/slides.md)")
        with open(self.labels_csv, newline="") as handle:
            rows = sorted(csv.DictReader(handle), key=lambda r: r.get("image_id", ""))
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


def _stratified_splits(grades: np.ndarray, ratios: tuple, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    split_of = np.empty(len(grades), dtype=object)
    for grade in np.unique(grades):
        members = np.flatnonzero(grades == grade)
        rng.shuffle(members)
        n_train = int(np.floor(ratios[0] * len(members))) or 1
        n_val = int(np.floor(ratios[1] * len(members))) or 1
        split_of[members[:n_train]] = "train"
        split_of[members[n_train : n_train + n_val]] = "val"
        split_of[members[n_train + n_val :]] = "test"
    return split_of.tolist()
