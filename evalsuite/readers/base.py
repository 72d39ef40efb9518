"""The reader contract: what `evalsuite.readers.build_reader` builds and the feature stage calls.

A reader is built as `Reader(card, data_root, check_counts=True, **card.reader.args)` and gives
one torch Dataset per split through `dataset(split, transform)`; each dataset exposes `labels`
(class ids, or uint8 masks for segmentation) so nothing iterates images to get them. Readers that
know which samples share a patient or slide give `groups(split)` and an `interval_unit` for the
bootstrap; every reader names each sample through `item_ids(split)` (a relative path, an array row, a tile origin,
a slide or patient id: readers/item_identity.py), so stored test predictions pair only on the same items. Readers
that know each sample's site/scanner/stain give `groups_of(split, column)` for a card's `group` field (the
robustness index, evalsuite.metrics.group_robustness). A cross-validated reader (HEST's patient-level folds,
readers/spots/hest.py) gives `cv_folds` and `use_fold(k)`: the runner runs every fold (results/folds.py);
`split_aliases` ({"val": "train"}) names a split that is another's items and cache.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.batch_decoding import BatchDecoding


class Reader:
    card = None
    interval_unit = "tile"  # what one sample is when no clusters are known
    clusters_fix = ""  # how a user gives this reader its clusters, for the note a run without them carries
    scored_unit = "image"  # what one scored sample is (a tile or an image; slide readers: slide or patient)

    def dataset(self, split: str, transform):
        raise NotImplementedError

    def groups(self, split: str) -> list | None:
        """The cluster id (patient, slide) of each sample of `split` in dataset order; None: every sample is its
        own unit."""
        return None

    def item_ids(self, split: str) -> list | None:
        """What identifies each sample of `split` (readers/item_identity.py), in dataset order: the order of
        `groups(split)`, of the feature cache and of the stored test predictions, whose pairing they check. None: this
        reader cannot name its items (pairing then compares labels and clusters only)."""
        return None

    def groups_of(self, split: str, column: str) -> list:
        """The value of metadata `column` (a card's `group`: site, scanner, stain) of each sample of `split` in
        dataset order. This reader has no per-sample metadata: a card asking for it is an error."""
        raise EvalsuiteError(f"task card {self.card.path}: 'group: {column}' needs per-tile metadata, but reader "
                             f"'{self.card.reader}' has none; list the tiles in a CSV with a '{column}' column and "
                             "use reader tile_csv (datasets/tile_csv.yaml)")

    def check_split(self, split: str, known) -> None:
        """The one error for a split the reader does not have (a card or a caller naming a wrong split)."""
        known = list(known)
        if split not in known:
            raise EvalsuiteError(f"task '{self.card.name}' has no split '{split}'; it has {', '.join(map(str, known))}")


class LabelledImages(BatchDecoding, torch.utils.data.Dataset):
    """A classification dataset: items `(transform(PIL image), class id)`; `labels` (int64) is known without
    decoding any image. A subclass gives `image(index)`. Batches are decoded as readers/batch_decoding.py says."""

    def __init__(self, labels, transform):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.transform = transform
        self.init_batch_decoding(transform)

    def __len__(self) -> int:
        return len(self.labels)

    def label(self, index: int) -> int:
        return int(self.labels[index])

    def image(self, index: int):
        raise NotImplementedError


class TargetImages(BatchDecoding, torch.utils.data.Dataset):
    """A regression dataset: items `(transform(PIL image), float32 target vector)`; `labels` (float64 [N, T], the
    cached targets) is known without decoding any image. A subclass gives `image(index)`. Batches are decoded as
    readers/batch_decoding.py says."""

    def __init__(self, targets, transform):
        self.labels = np.asarray(targets, dtype=np.float64).reshape(len(targets), -1)
        self.transform = transform
        self.init_batch_decoding(transform)

    def __len__(self) -> int:
        return len(self.labels)

    def label(self, index: int) -> np.ndarray:
        return self.labels[index].astype(np.float32)

    def image(self, index: int):
        raise NotImplementedError
