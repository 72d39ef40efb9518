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


STREAM_BLOCK_BYTES = 8 * 1024**2
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

    Resident mode (the cache is a host-RAM array and fits the device): features and labels go
    to the device once; a batch is a slice of the epoch's permutation, one gather and an
    upcast, with no host sync. Streamed mode (memory-mapped caches, or too big for the
    device): blocks of contiguous rows are read in a permuted block order, shuffled within,
    and cut into batches, carrying remainders across blocks so every sample is seen once.
    """

    def __init__(self, features, labels: np.ndarray, device: torch.device, block_rows: int | None = None):
        self.device = torch.device(device)
        self.samples = len(labels)
        self.labels = torch.as_tensor(np.array(labels)).to(self.device)  # a writable copy of a mapped file
        row_bytes = int(np.prod(features.shape[1:])) * features.dtype.itemsize
        self.block_rows = block_rows or max(1, STREAM_BLOCK_BYTES // max(row_bytes, 1))
        resident = isinstance(features, np.ndarray) and fits_on_device(self.samples * row_bytes, self.device)
        self.resident = torch.from_numpy(features).to(self.device) if resident else None
        self.features = features

    def epoch(self, epoch: int, batch_size: int, seed: int = 0, drop_last: bool = True):
        """Yield (float32 features [b, ...], labels [b]) covering each sample at most once."""
        if self.resident is not None:
            yield from self._resident_epoch(epoch, batch_size, seed, drop_last)
        else:
            yield from self._streamed_epoch(epoch, batch_size, seed, drop_last)

    def _resident_epoch(self, epoch, batch_size, seed, drop_last):
        order = epoch_permutation(self.samples, seed, epoch).to(self.device)
        stop = self.samples - self.samples % batch_size if drop_last else self.samples
        for start in range(0, stop, batch_size):
            index = order[start : start + batch_size]
            yield self.resident.index_select(0, index).float(), self.labels[index]

    def _streamed_epoch(self, epoch, batch_size, seed, drop_last):
        # Peak extra memory: one block (read once, never permuted as a whole) plus one batch.
        blocks = [(start, min(start + self.block_rows, self.samples)) for start in range(0, self.samples, self.block_rows)]
        block_order = epoch_permutation(len(blocks), seed, epoch).tolist()
        carry_x, carry_y = None, None
        for position, block in enumerate(block_order):
            start, stop = blocks[block]
            rows = torch.from_numpy(np.asarray(self.features[start:stop])).to(self.device)
            labels = self.labels[start:stop]
            within = epoch_permutation(stop - start, seed + position + 1, epoch).to(self.device)
            used = 0
            if carry_x is not None:  # complete the batch left over from the previous block
                take = within[: batch_size - len(carry_x)]
                carry_x, carry_y = torch.cat([carry_x, rows[take]]), torch.cat([carry_y, labels[take]])
                used = len(take)
                if len(carry_x) < batch_size:
                    continue
                yield carry_x.float(), carry_y
                carry_x = carry_y = None
            while used + batch_size <= len(within):
                index = within[used : used + batch_size]
                yield rows[index].float(), labels[index]
                used += batch_size
            if used < len(within):
                rest = within[used:]
                carry_x, carry_y = rows[rest], labels[rest]
        if not drop_last and carry_x is not None and len(carry_x):
            yield carry_x.float(), carry_y
