"""Freed memory kept during extraction (runtime/allocator.py): no page faults for a reused block inside the block,
the memory handed back and Pillow's setting restored after it."""

import resource

import pytest
import torch
from PIL import Image

from evalsuite.runtime import allocator
from evalsuite.runtime.allocator import glibc, reuse_freed_memory

BLOCK_BYTES = 96 << 20  # above glibc's largest adaptive mmap threshold (32 MiB): mmapped by default
PAGE_BYTES = resource.getpagesize()

needs_glibc = pytest.mark.skipif(glibc() is None, reason="mallopt and malloc_trim are glibc's (CI runs on Debian)")


def _minor_faults_of_cycles(cycles: int = 4) -> int:
    """Page faults of allocating, writing and freeing one large block `cycles` times (as a forward does per batch)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(cycles):
        block = torch.empty(BLOCK_BYTES // 4, dtype=torch.float32)
        block.fill_(1.0)
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE_BYTES


@needs_glibc
def test_a_block_freed_inside_is_reused_without_page_faults_and_handed_back_after():
    # Start from the thresholds the block leaves behind: in the whole suite an earlier test in this pytest worker
    # left glibc keeping 96 MiB blocks (not found which; alone, and with every tests/runtime file, it passes).
    allocator._set_thresholds(glibc(), allocator.ADAPTED_MMAP_THRESHOLD_BYTES, allocator.ADAPTED_TRIM_THRESHOLD_BYTES)
    glibc().malloc_trim(0)
    pages = BLOCK_BYTES // PAGE_BYTES
    assert _minor_faults_of_cycles() >= pages  # outside: the kernel faults the block in again
    with reuse_freed_memory() as kept:
        assert kept
        # torch's 64-byte-aligned blocks leave glibc's heap a few blocks of slack before freed ones fit again.
        _minor_faults_of_cycles(12)
        assert _minor_faults_of_cycles() < pages // 10
        resident_inside = _resident_bytes()
    assert resident_inside - _resident_bytes() > BLOCK_BYTES // 2  # malloc_trim on the way out
    assert _minor_faults_of_cycles() >= pages


def test_without_glibc_malloc_is_left_alone_and_pillows_blocks_are_restored():
    before = Image.core.get_blocks_max()
    with reuse_freed_memory(libc=None) as kept:
        assert kept is False
        assert Image.core.get_blocks_max() > before
    assert Image.core.get_blocks_max() == before


def test_a_glibc_refusing_the_thresholds_changes_nothing():
    class Refusing:
        calls = []

        def mallopt(self, *args):
            self.calls.append(args)
            return 0

        def malloc_trim(self, *args):
            raise AssertionError("nothing was kept, nothing to hand back")

    with reuse_freed_memory(libc=Refusing()) as kept:
        assert kept is False
    assert len(Refusing.calls) == 1
