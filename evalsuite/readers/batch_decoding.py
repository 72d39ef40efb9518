"""Image datasets fetched a batch at a time: pixels decoded on threads, converted to model inputs once per batch.

The DataLoader fetches whole batches through `__getitems__`. With a model transform as models/transforms.py builds
it (PIL steps, ToTensor, Normalize), a batch's items are uint8 [H, W, 3] arrays after the PIL steps, and
`prepare_batch` turns the collated batch into exactly what the transform gives, float32 [B, 3, H, W] (the same
float32 ops in the same order), in channels-last memory, on the batch's device (a GPU converts the uint8 itself).
A worker process then ships a quarter of the bytes, and the conversion runs once per batch on the main process's
threads instead of once per image on one thread.

Without worker processes (the CPU forward on 2 or fewer cores: runtime/cpus.py default_num_workers) the main
process decodes a batch on as many threads as torch's intra-op threads, then runs the forward: one phase at a time,
each with every core. Pillow and OpenSlide release the GIL while they decode. Decoding beside a running
forward instead would put three busy threads on two cores: a 400-photo BACH extraction took 4.5-5.0 s in phases,
5.8 s with a thread decoding one batch ahead (benchmarks/eva_side_by_side.py, docs/compute.md).
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torchvision import transforms as T

_POOL = {"pid": None, "threads": 0, "pool": None}


class BatchDecoding:
    """Mixin of a torch Dataset with `image(index)` (a PIL image), `label(index)` and `transform`: call
    `init_batch_decoding(transform, native_size_px)` in the constructor. `native_size_px`: the side every image
    already has, when known (a Resize to it is then skipped: torchvision returns such an image untouched)."""

    def init_batch_decoding(self, transform, native_size_px: int | None = None) -> None:
        self._pil_steps, self._normalise = split_transform(transform, native_size_px)

    def __getitem__(self, index: int):
        return self.transform(self.image(index)), self.label(index)

    def __getitems__(self, indices: list) -> list:
        """A batch's items: on one thread in a worker process (its siblings and the forward use the other cores),
        on torch's intra-op threads in the main process (module docstring)."""
        in_worker = torch.utils.data.get_worker_info() is not None
        threads = 1 if in_worker else min(torch.get_num_threads(), len(indices))
        item = self.__getitem__ if self._normalise is None else self._pixels
        if threads <= 1:
            return [item(index) for index in indices]
        return list(reading_pool(threads).map(item, indices))

    def prepare_batch(self, images: torch.Tensor) -> torch.Tensor:
        """A collated batch of `__getitems__` -> the model's input, on the batch's device."""
        if self._normalise is None or images.dtype != torch.uint8:
            return images
        mean, std = (torch.as_tensor(values, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
                     for values in self._normalise)
        # As ToTensor then Normalize: to float32, / 255, - mean, / std; the permuted view is channels-last.
        return images.permute(0, 3, 1, 2).float().div_(255).sub_(mean).div_(std)

    def _pixels(self, index: int):
        image = self.image(index)
        for step in self._pil_steps:
            image = step(image)
        if image.mode != "RGB":  # what ToTensor would give a 3-channel model's Normalize
            image = image.convert("RGB")
        return torch.from_numpy(np.array(image)), self.label(index)  # np.array: a writable copy torch may own


def reading_pool(threads: int) -> ThreadPoolExecutor:
    """This process's decoding threads (a forked process gets its own: threads do not survive a fork)."""
    if _POOL["pid"] != os.getpid() or _POOL["threads"] != threads:
        if _POOL["pid"] == os.getpid():
            _POOL["pool"].shutdown(wait=False)
        _POOL.update(pid=os.getpid(), threads=threads,
                     pool=ThreadPoolExecutor(threads, thread_name_prefix="evalsuite-decode"))
    return _POOL["pool"]


def split_transform(transform, native_size_px: int | None = None):
    """(PIL steps before ToTensor, (mean, std) of the Normalize after it) of a Compose [PIL steps, ToTensor,
    Normalize]; ((), None) for any other transform. A Resize to `native_size_px` is dropped: it returns the image
    untouched (torchvision), so skipping it keeps the pixels and saves a PIL round trip per image."""
    steps = list(getattr(transform, "transforms", ()))
    if (not isinstance(transform, T.Compose) or len(steps) < 2 or not isinstance(steps[-2], T.ToTensor)
            or not isinstance(steps[-1], T.Normalize) or steps[-1].inplace):
        return (), None
    pil_steps = tuple(step for step in steps[:-2] if not _is_no_op_resize(step, native_size_px))
    return pil_steps, (tuple(steps[-1].mean), tuple(steps[-1].std))


def _is_no_op_resize(step, native_size_px: int | None) -> bool:
    if native_size_px is None or not isinstance(step, T.Resize):
        return False
    size = [step.size] if isinstance(step.size, int) else list(step.size)
    return size in ([native_size_px], [native_size_px, native_size_px])
