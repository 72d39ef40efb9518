"""Slide bags: the tile features of each slide, as a slide-level probe reads them.

A slide split's cache is one float16 array [tiles of all slides, D] whose rows are grouped by
slide (slide i holds rows offsets[i]:offsets[i + 1]). `SlideBags` gives one slide's rows at a
time, copied out of the cache (a host-RAM array or positioned reads of the file), so a probe
holds at most the bags it asked for, never the split.

`PatientBags` is the same interface one level up, for kinds scored per patient (survival): patient i's
bag is the tiles of all of its slides, in cache order (Patho-Bench's `combine_slides_per_patient`,
early fusion), so a probe fits and scores one row per patient without knowing about slides.
"""

import numpy as np

from evalsuite.errors import EvalsuiteError


class SlideBags:
    """`len(bags)` slides; `bags.bag(i)` is slide i's float16 tile features [tiles_i, D]."""

    def __init__(self, features, offsets):
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(features) \
                or np.any(np.diff(offsets) < 1):
            raise EvalsuiteError(f"slide bags: offsets must rise from 0 to {len(features)} tiles with at least one "
                                 f"tile per slide, got {offsets[:4].tolist()}...{offsets[-2:].tolist()}")
        if getattr(features, "ndim", None) != 2:
            raise EvalsuiteError(f"slide bags: tile features must be 2-D [tiles, dim], got {features.shape}")
        self.features = features
        self.offsets = offsets
        self.tile_counts = np.diff(offsets)  # int64 [slides]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    @property
    def dtype(self):
        return self.features.dtype

    def bag(self, index: int) -> np.ndarray:
        return np.asarray(self.features[int(self.offsets[index]) : int(self.offsets[index + 1])])

    def tile_rows(self, index: int) -> tuple[int, int]:
        """(first, stop) rows of slide `index` in the split's tile array."""
        return int(self.offsets[index]), int(self.offsets[index + 1])

    def bag_rows(self, index: int, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` (ascending, 0-based within the bag) of bag `index`, reading only those."""
        return np.asarray(self.features[int(self.offsets[index]) + np.asarray(rows)])


class PatientBags:
    """`len(bags)` patients; `bags.bag(i)` is patient i's tiles from every one of its slides, float16 [tiles_i, D].

    `patient_of_slide`: the patient number (0..patients-1) of each slide of `slides` (a SlideBags)."""

    def __init__(self, slides: SlideBags, patient_of_slide):
        numbers = np.asarray(patient_of_slide, dtype=np.int64)
        if numbers.shape != (len(slides),) or (len(numbers) and set(np.unique(numbers)) != set(range(numbers.max() + 1))):
            raise EvalsuiteError(f"patient bags: need one patient number 0..P-1 for each of {len(slides)} slides, got "
                                 f"{numbers[:6].tolist()}; the cache and the manifest disagree: remove the task's cache")
        self.slides = slides
        self.slides_of = [np.flatnonzero(numbers == p) for p in range(int(numbers.max()) + 1 if len(numbers) else 0)]
        self.tile_counts = np.array([slides.tile_counts[s].sum() for s in self.slides_of], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.slides_of)

    @property
    def dim(self) -> int:
        return self.slides.dim

    @property
    def dtype(self):
        return self.slides.dtype

    def bag(self, index: int) -> np.ndarray:
        slides = self.slides_of[index]
        if len(slides) == 1:
            return self.slides.bag(int(slides[0]))
        return np.concatenate([self.slides.bag(int(s)) for s in slides])

    def bag_rows(self, index: int, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` (ascending, 0-based within the patient's bag) of patient `index`, reading only those."""
        cache_rows = np.concatenate([np.arange(*self.slides.tile_rows(int(s))) for s in self.slides_of[index]])
        return np.asarray(self.slides.features[cache_rows[np.asarray(rows)]])
