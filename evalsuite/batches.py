"""The one path by which probes read cached features: float16 rows upcast one batch at a time.

The cache (RAM array or memory map) stays float16; only `batch_size` rows at a time become
float32 on the compute device. That bounds a probe's extra memory by the batch, not the cache.
"""

import numpy as np
import torch


def iter_float32_batches(features, indices: np.ndarray, batch_size: int, device: torch.device):
    """Yield (batch_indices, float32 tensor [b, D] on device) over `indices` in the given order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for start in range(0, len(indices), batch_size):
        batch_indices = indices[start : start + batch_size]
        rows = np.asarray(features[batch_indices])
        batch = torch.from_numpy(rows).to(device, non_blocking=True).float()
        yield batch_indices, batch


def all_indices(features) -> np.ndarray:
    return np.arange(len(features))
