"""Freed memory kept for reuse during extraction, instead of being handed back to the kernel after every batch.

A CPU forward allocates and frees the same large activations at every batch (EfficientNet-Lite0 at batch 16: a
77 MB expansion tensor). glibc's malloc serves blocks above its mmap threshold (at most 32 MiB when it adapts) with
mmap and returns them with munmap, so every batch pays the kernel to fault in and zero those pages again: 4.4 million
page faults and 6.9 s of system time in a 6.4 s forward (2 threads) over 400 tiles at batch 32 on 2 cores, 2.1 s once
the memory is reused (benchmarks/forward_memory.py; ViT-S/16 gains 6-11 %). Pillow does the same with its image blocks (none cached by default).
Inside `reuse_freed_memory()` both keep what they free, up to `KEEP_BYTES` per block; the peak is unchanged (only
memory that was in use is kept), and on the way out the kept memory is handed back (malloc_trim) and glibc's
thresholds are set to the values its adaptive scheme reaches once large blocks have been freed.
"""

import contextlib
import ctypes
import functools

KEEP_BYTES = 1 << 30  # served from the reusable heap below this size; kept at the heap's top below this size
# glibc's mallopt parameters (malloc.h) and the values its dynamic threshold tops out at on 64-bit (mallopt(3)).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
ADAPTED_MMAP_THRESHOLD_BYTES = 32 << 20
ADAPTED_TRIM_THRESHOLD_BYTES = 2 * ADAPTED_MMAP_THRESHOLD_BYTES
PILLOW_BLOCKS_KEPT = 32  # Pillow's blocks are 16 MiB: a few images in flight on each decoding thread


@functools.lru_cache(maxsize=1)
def glibc():
    """The process's C library when it is glibc (mallopt and malloc_trim as documented in mallopt(3)), else None."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # TypeError: Windows has no handle for the running process
        return None
    if not all(hasattr(libc, name) for name in ("gnu_get_libc_version", "mallopt", "malloc_trim")):
        return None
    return libc


@contextlib.contextmanager
def reuse_freed_memory(libc="auto"):
    """Inside the block, freed memory stays with the process for the next batch (module docstring). `libc`: glibc
    as `glibc()` finds it (default), or None where there is none (no effect on malloc then, e.g. macOS, musl)."""
    libc = glibc() if libc == "auto" else libc
    malloc_kept = libc is not None and _set_thresholds(libc, KEEP_BYTES, KEEP_BYTES)
    pillow_blocks_before = _keep_pillow_blocks(PILLOW_BLOCKS_KEPT)
    try:
        yield malloc_kept
    finally:
        _keep_pillow_blocks(pillow_blocks_before)
        if malloc_kept:
            _set_thresholds(libc, ADAPTED_MMAP_THRESHOLD_BYTES, ADAPTED_TRIM_THRESHOLD_BYTES)
            libc.malloc_trim(0)


def _set_thresholds(libc, mmap_bytes: int, trim_bytes: int) -> bool:
    # mallopt returns 1 on success; a glibc that refuses a threshold this high keeps its own (and its speed).
    return bool(libc.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(mmap_bytes))) and \
        bool(libc.mallopt(M_TRIM_THRESHOLD, ctypes.c_int(trim_bytes)))


def _keep_pillow_blocks(count: int) -> int:
    """Let Pillow cache `count` freed image blocks; returns the previous count. Lowering it frees the extra blocks."""
    from PIL import Image

    before = Image.core.get_blocks_max()
    Image.core.set_blocks_max(count)
    if count < before:
        Image.core.clear_cache()
    return before
