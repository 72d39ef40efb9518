"""Input checks shared by probes, with errors that say what to fix."""

import numpy as np

from evalsuite.errors import EvalsuiteError


def check_features_labels(features, labels, num_classes: int, what: str) -> np.ndarray:
    labels = np.asarray(labels)
    if getattr(features, "ndim", None) != 2:
        raise EvalsuiteError(f"{what}: features must be 2-D [samples, dim], got shape {getattr(features, 'shape', None)}")
    if len(features) != len(labels):
        raise EvalsuiteError(f"{what}: {len(features)} feature rows but {len(labels)} labels")
    if len(labels) == 0:
        raise EvalsuiteError(f"{what}: no samples; check the task card's splits and data")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise EvalsuiteError(f"{what}: label {int(labels.max() if labels.max() >= num_classes else labels.min())} "
                             f"is outside 0..{num_classes - 1}; check the card's classes")
    return labels.astype(np.int64, copy=False)
