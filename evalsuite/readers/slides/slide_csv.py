"""The generic slide reader: any cohort described by a CSV manifest (readers/slides/slide_manifest.py)."""

from evalsuite.readers.reader_args import checked_fold_args
from evalsuite.readers.slides.base import SlideReader
from evalsuite.readers.slides.slide_manifest import (
    assign_splits,
    check_events,
    check_patients_in_one_split,
    read_manifest_rows,
    records_from_rows,
)


class SlideCsvReader(SlideReader):
    def __init__(self, card, data_root, check_counts: bool = True, manifest: str = "slides.csv", folds: int = 5,
                 test_fold: int = 0, val_fraction: float = 0.2, seed: int = 0):
        super().__init__(card, data_root, check_counts)
        self.manifest_path = self.data_root / manifest
        self.folds, self.test_fold, self.val_fraction, self.seed = checked_fold_args(card, folds, test_fold,
                                                                                     val_fraction, seed)

    def records(self):
        required = ("slide_path", "time", "event") if self.survival else ("slide_path", "label")
        rows = read_manifest_rows(self.manifest_path, required)
        parsed = records_from_rows(rows, self.manifest_path, self.data_root, self.card.classes, self.survival)
        records = assign_splits(parsed, self.folds, self.test_fold, self.val_fraction, self.seed,
                                source=f"task card {self.card.path} ({self.manifest_path})")
        check_patients_in_one_split(records, self.manifest_path)
        if self.survival:
            check_events(records, self.manifest_path)
        return records
