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


STREAM_BLOCK_BYTES = 4 * 1024**2  # the float16 rows one streamed read copies at most
DEVICE_MEMORY_FRACTION = 0.5  # of the GPU's free memory a resident cache may take


def epoch_permutation(samples: int, seed: int, epoch: int) -> torch.Tensor:
    """The same order on every rank and every restart: a CPU generator seeded by (seed, epoch)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(samples, generator=generator)


def fits_on_device(nbytes: int, device: torch.device) -> bool:
    if device.type == "cuda":
        free_bytes, _ = torch.cuda.mem_get_info(device)
        return nbytes <= DEVICE_MEMORY_FRACTION * free_bytes
    return True


class BatchSource:
    """Training batches of cached float16 features, upcast to float32 one batch at a time.

    Both modes give the same batches for the same (seed, epoch): slices of one permutation of
    all samples (`epoch_permutation`), so a run's numbers do not depend on whether the budget
    planner chose RAM or a memory map. Resident mode (the cache is a host-RAM array and fits
    the device): features and labels go to the device once; a batch is one gather and an
    upcast, with no host sync. Streamed mode (memory-mapped caches, or too big for the device):
    the rows of the next few batches are read from the cache in ascending order (one forward
    sweep per read), at most `read_rows` at a time, and put back in permutation order.

    Why not read contiguous blocks: caches hold samples in the reader's order, which for most
    datasets is class by class, so batches drawn from a block were almost single-class and the
    streamed probe trained on a different, worse-mixed sequence than the resident one.
    """

    def __init__(self, features, labels: np.ndarray, device: torch.device, read_rows: int | None = None):
        self.device = torch.device(device)
        self.samples = len(labels)
        self.labels = torch.as_tensor(np.array(labels)).to(self.device)  # a writable copy of a mapped file
        row_bytes = int(np.prod(features.shape[1:])) * features.dtype.itemsize
        self.read_rows = read_rows or max(1, STREAM_BLOCK_BYTES // max(row_bytes, 1))
        resident = isinstance(features, np.ndarray) and fits_on_device(self.samples * row_bytes, self.device)
        self.resident = torch.from_numpy(features).to(self.device) if resident else None
        self.features = features

    def epoch(self, epoch: int, batch_size: int, seed: int = 0, drop_last: bool = True):
        """Yield (float32 features [b, ...], labels [b]) covering each sample at most once."""
        order = epoch_permutation(self.samples, seed, epoch)
        stop = self.samples - self.samples % batch_size if drop_last else self.samples
        if self.resident is not None:
            yield from self._resident_epoch(order.to(self.device), stop, batch_size)
        else:
            yield from self._streamed_epoch(order.numpy(), stop, batch_size)

    def _resident_epoch(self, order, stop, batch_size):
        for start in range(0, stop, batch_size):
            index = order[start : start + batch_size]
            yield self.resident.index_select(0, index).float(), self.labels[index]

    def _streamed_epoch(self, order: np.ndarray, stop: int, batch_size: int):
        # Whole batches per group, so each batch is cut from one group; peak extra memory is one
        # group's float16 rows (at least one batch) plus one float32 batch.
        group_rows = batch_size * max(1, self.read_rows // batch_size)
        for group_start in range(0, stop, group_rows):
            wanted = order[group_start : min(group_start + group_rows, stop)]
            ascending = np.sort(wanted)
            rows = np.concatenate([np.asarray(self.features[ascending[i : i + self.read_rows]])
                                   for i in range(0, len(ascending), self.read_rows)])
            rows = torch.from_numpy(rows).to(self.device)
            # Row of each wanted sample in `rows`, in permutation order.
            position = torch.from_numpy(np.searchsorted(ascending, wanted)).to(self.device)
            wanted = torch.from_numpy(wanted).to(self.device)
            for start in range(0, len(wanted), batch_size):
                yield (rows.index_select(0, position[start : start + batch_size]).float(),
                       self.labels[wanted[start : start + batch_size]])
