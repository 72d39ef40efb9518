"""A chunk's feature rows brought to the host with one host-device synchronisation per chunk, not per batch.

Each batch's rows are checked and converted on the device (finite? beyond float16's range?) and copied to the host
asynchronously: on a GPU into pinned host buffers (`copy_(non_blocking=True)` enqueues the copy on the stream and
returns), so the host goes on to hand the next batch to the device while the forward and the copy run. Only when
the chunk is complete does the host wait for the device (`wait_for_device`, the one place extraction synchronises)
and read the checks; a chunk with a NaN or an out-of-range row is refused before it is written. On the CPU the
copies are plain copies and the wait is nothing: the rows, and so the cache, are the same bytes as before.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError

FLOAT16_MAX = float(np.finfo(np.float16).max)


def wait_for_device(device: torch.device) -> None:
    """Block until the device's queued work (forwards and copies) is done: once per chunk."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


class ChunkRows:
    """One chunk's float16 rows and per-row checks, filled batch by batch without waiting for the device."""

    def __init__(self, rows: int, row_shape: tuple, device: torch.device):
        pinned = device.type == "cuda"  # page-locked host memory: what an asynchronous device-to-host copy needs
        self.device, self.row_shape = device, tuple(row_shape)
        self.features = torch.empty((rows, *row_shape), dtype=torch.float16, pin_memory=pinned)
        self.finite = torch.empty(rows, dtype=torch.bool, pin_memory=pinned)
        self.overflow = torch.empty(rows, dtype=torch.int64, pin_memory=pinned)

    def add(self, rows: torch.Tensor, at: int, description: str) -> int:
        """Queue the copy of `rows` (float32, on the device) to rows at..; returns how many. Only the shape is
        checked now (known on the host); values are checked in `collect`."""
        if tuple(rows.shape[1:]) != self.row_shape:
            raise EvalsuiteError(f"{description}: backbone returned {tuple(rows.shape)}, expected [batch, "
                                 f"{', '.join(map(str, self.row_shape))}]")
        count, flat = len(rows), rows.flatten(1)
        self.finite[at : at + count].copy_(torch.isfinite(flat).all(dim=1), non_blocking=True)
        self.overflow[at : at + count].copy_((flat.abs() > FLOAT16_MAX).sum(dim=1), non_blocking=True)
        self.features[at : at + count].copy_(rows.to(torch.float16), non_blocking=True)
        return count

    def collect(self, filled: int, offset: int, description: str) -> np.ndarray:
        """The first `filled` rows as a float16 array once the device is done, or the one-line error of the first
        row that is not finite or would overflow float16 (`offset`: the chunk's first sample)."""
        wait_for_device(self.device)
        finite = self.finite[:filled].numpy()
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0]) + offset
            raise EvalsuiteError(f"{description}: backbone produced NaN/inf features (first at sample {bad}); "
                                 "check the weights, or rerun with --precision fp32")
        overflow = self.overflow[:filled].numpy()
        if overflow.any():
            first = int(np.flatnonzero(overflow)[0]) + offset
            raise EvalsuiteError(f"{description}: {int(overflow.sum())} feature values exceed the float16 range (|x| > "
                                 f"{FLOAT16_MAX:.0f}) from sample {first} on and would become inf in the float16 "
                                 "cache; this backbone's features need normalising before caching")
        return self.features[:filled].numpy()
