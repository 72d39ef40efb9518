"""The next batch decoded on a thread while the forward runs, for extraction without DataLoader workers.

Without workers (the CPU forward on 2 or fewer cores: runtime/cpus.py default_num_workers) the main process decodes,
and a decode between forwards leaves both cores to one job at a time. Decoding on a thread, one batch ahead, lets it
fill the gaps the forward's threads leave: Pillow and the slide readers release the GIL while they decode and resize.
On 2 cores this took a 400-photo BACH extraction from 30.7 to 24.7 ms a photo (benchmarks/eva_side_by_side.py,
docs/compute.md). Only one thread and one batch ahead: a second decoding thread would take a core from the forward.
The thread runs torch on one intra-op thread (one_thread): a per-image transform is too small to share, and its own
OpenMP team beside the forward's would put three threads on two cores.
"""

from concurrent.futures import ThreadPoolExecutor

from evalsuite.runtime.cpus import one_thread


class PrefetchedBatches:
    """Iterate `batches` with the next one already being fetched on a thread; `close()` waits for that thread."""

    def __init__(self, batches):
        self._batches = batches
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsuite-decode")
        self._next = self._pool.submit(self._fetch)

    def _fetch(self):
        with one_thread():
            return next(self._batches)

    def __iter__(self):
        return self

    def __next__(self):
        # A decode error or the end of the batches comes out here, in the caller's thread, as it would unwrapped.
        batch = self._next.result()
        self._next = self._pool.submit(self._fetch)
        return batch

    def close(self) -> None:
        # The batch being decoded is not wanted (error, signal or the end); it is at most one batch of work.
        self._next.cancel()
        self._pool.shutdown(wait=True)
