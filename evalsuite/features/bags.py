"""Slide bags: the tile features of each slide, as a slide-level probe reads them.

A slide split's cache is one float16 array [tiles of all slides, D] whose rows are grouped by
slide (slide i holds rows offsets[i]:offsets[i + 1]). `SlideBags` gives one slide's rows at a
time, copied out of the cache (a host-RAM array or positioned reads of the file), so a probe
holds at most the bags it asked for, never the split.
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

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    @property
    def dtype(self):
        return self.features.dtype

    @property
    def tile_counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def bag(self, index: int) -> np.ndarray:
        return np.asarray(self.features[int(self.offsets[index]) : int(self.offsets[index + 1])])

    def tile_rows(self, index: int) -> tuple[int, int]:
        """(first, stop) rows of slide `index` in the split's tile array."""
        return int(self.offsets[index]), int(self.offsets[index + 1])
