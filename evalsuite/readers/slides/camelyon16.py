"""Camelyon16 in its distributed layout: lymph-node slides, normal vs tumour (metastasis).

Layout under the data root (as distributed on the challenge's Google Drive and read by eva,
kaiko-ai/eva src/eva/vision/data/datasets/classification/camelyon16.py):
`training/normal/normal_NNN.tif`, `training/tumor/tumor_NNN.tif`, `testing/images/test_NNN.tif`
and `testing/reference.csv` (no header; column 0 the slide id, column 1 its class, read
case-insensitively: Normal/Tumor). Splits: val = the 54 training slides eva holds out (the
same ids as PatchCamelyon's validation slides: 32 normal, 22 tumour), train = the other 216,
test = the 129 test slides (the duplicate test_049 is absent from distributed copies). The
count check expects 216/54/129. Camelyon16 has one slide per patient.
"""

import csv

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.base import SlideReader
from evalsuite.readers.slides.slide_manifest import SlideRecord

EVA_VAL_SLIDES = frozenset(
    [f"normal_{n:03d}" for n in (10, 13, 16, 17, 19, 20, 25, 30, 31, 32, 52, 56, 57, 67, 76, 79, 85, 95, 98, 99, 101,
                                 102, 105, 106, 109, 129, 132, 137, 142, 143, 148, 152)]
    + [f"tumor_{n:03d}" for n in (1, 5, 11, 12, 13, 19, 31, 37, 43, 46, 57, 65, 69, 71, 73, 79, 80, 81, 82, 85, 97,
                                  109)])
EXPECTED_COUNTS = {"train": 216, "val": 54, "test": 129}


class Camelyon16Reader(SlideReader):
    def records(self) -> list[SlideRecord]:
        records = self._training_records() + self._test_records()
        if self.check_counts:
            for split, expected in EXPECTED_COUNTS.items():
                found = sum(r.split == split for r in records)
                if found != expected:
                    raise EvalsuiteError(f"Camelyon16 under {self.data_root}: {found} {split} slides, expected "
                                         f"{expected}; check the layout (docs/slides.md) or pass --no-count-check")
        return records

    def _record(self, path, label: str, split: str) -> SlideRecord:
        return SlideRecord(path.stem, path, (self.card.classes.index(label),), path.stem, split)

    def _training_records(self) -> list[SlideRecord]:
        records = []
        for label in ("normal", "tumor"):
            folder = self.data_root / "training" / label
            if not folder.is_dir():
                raise EvalsuiteError(f"Camelyon16: folder {folder} not found; the data root must hold "
                                     "training/normal, training/tumor and testing/images (docs/slides.md)")
            records += [self._record(p, label, "val" if p.stem in EVA_VAL_SLIDES else "train")
                        for p in sorted(folder.glob("*.tif"))]
        return records

    def _test_records(self) -> list[SlideRecord]:
        reference = self.data_root / "testing" / "reference.csv"
        if not reference.is_file():
            raise EvalsuiteError(f"Camelyon16: test labels {reference} not found; it ships with the test slides")
        with open(reference, newline="") as handle:
            labels = {row[0].strip().removesuffix(".tif"): row[1].strip().lower() for row in csv.reader(handle)
                      if len(row) >= 2}
        records = []
        for path in sorted((self.data_root / "testing" / "images").glob("*.tif")):
            label = labels.get(path.stem)
            if label not in ("normal", "tumor"):
                raise EvalsuiteError(f"Camelyon16: {reference} gives slide {path.stem} the class {label!r}; expected "
                                     "Normal or Tumor")
            records.append(self._record(path, label, "test"))
        return records
