"""Feature extraction: a frozen backbone over a dataset into a chunked float16 cache.

Batches never straddle a chunk, so the batches of a resumed run, or of a torchrun rank, are exactly
those of an uninterrupted single process. A chunk's last, partial batch is padded to the batch
size (its last image repeated, the extra rows dropped), so every forward of a tile cache has one
shape: CPU kernels chosen by batch shape and thread count gave a partial batch other float16
values under torchrun's 1-thread ranks than in a 2-thread process. Slide caches are not padded
(a chunk is one slide's tiles, often fewer than a batch). Each finished chunk is written and
recorded durably before the next starts, and the host waits for the device once per chunk, when the chunk's rows
are complete (host_rows.py); SIGTERM or SIGUSR1 (Slurm preemption) stops the run
after the current chunk, the split's last one included, with EXIT_PREEMPTED, and the same
command resumes it.
"""

import contextlib
import signal
import threading

import torch

from evalsuite.errors import EXIT_PREEMPTED, EvalsuiteError
from evalsuite.features.host_rows import ChunkRows
from evalsuite.runtime.allocator import reuse_freed_memory
from evalsuite.runtime.devices import loader_kwargs
from evalsuite.runtime.precision import autocast_context
from evalsuite.runtime.progress import Progress

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Preempted(EvalsuiteError):
    exit_code = EXIT_PREEMPTED


class _StopRequest:
    def __init__(self):
        self.signal_name = None

    def __call__(self, signum, _frame):
        self.signal_name = signal.Signals(signum).name


@contextlib.contextmanager
def stop_after_chunk_on_signals():
    """Turn SIGTERM/SIGUSR1 into a request honoured at the next chunk boundary."""
    request = _StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.signal(sig, request) for sig in _STOP_SIGNALS}
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _workers_ignore_stop_signals(_worker_id: int) -> None:
    # Slurm and torchrun signal the whole process group; only the main process decides when
    # to stop (after the chunk), so a worker must not die on SIGTERM/SIGUSR1 mid-chunk.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def batches_of(loader):
    """The loader's batches; its worker processes are ended however the loop is left (error, signal, return).
    Without workers the main process decodes each batch on threads before its forward (readers/batch_decoding.py)."""
    batches = iter(loader)
    try:
        yield batches
    finally:
        _end_workers(batches)


def _end_workers(batches) -> None:
    # Workers ignore SIGTERM (above), and the DataLoader's last resort at interpreter exit is to
    # SIGTERM its workers and join them: an error that leaves the loop would then hang the process
    # forever. Ask them to stop now, and kill any that is still busy (e.g. decoding a huge image).
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is None:  # num_workers=0: no processes
        return
    shutdown()
    for worker in getattr(batches, "_workers", []):
        if worker.is_alive():
            worker.kill()
            worker.join()


def chunk_aligned_batches(pending_chunks, batch_size: int) -> list[list[int]]:
    return [list(range(start, min(start + batch_size, stop)))
            for _, chunk_start, stop in pending_chunks for start in range(chunk_start, stop, batch_size)]


def extract_to_cache(backbone, dataset, writer, device: torch.device, *, batch_size: int = 64, num_workers: int = 2,
                     precision: str = "fp32", description: str = "extract", features_of=None, chunks=None,
                     finish: bool = True, show_progress: bool = True, pad_to_batch: bool = True) -> int:
    """Fill the writer's unfinished chunks with `features_of(images)` rows (default backbone.pooled_features).

    `chunks` limits the work to some pending chunks (a rank's shard); `finish=False` leaves marking
    the cache complete to the caller (rank 0, once every rank is done); `pad_to_batch` pads partial batches
    (module docstring). Returns how many samples went through the backbone (padding not counted)."""
    features_of = features_of or backbone.pooled_features
    pending = writer.pending_chunks() if chunks is None else chunks
    if not pending:
        if finish:
            writer.finish()
        return 0
    memory_format = place_on_device(backbone, device)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=chunk_aligned_batches(pending, batch_size),
                                         worker_init_fn=_workers_ignore_stop_signals,
                                         **loader_kwargs(device, num_workers))
    # A dataset may hand out raw pixels and convert whole batches here (readers/batch_decoding.py: uint8 images);
    # a dataset without prepare_batch gives model inputs already.
    prepare_batch = getattr(dataset, "prepare_batch", None) or (lambda images: images)
    # Rows reach the host with one wait for the device per chunk (host_rows.py), so the next batch's copy and
    # forward are queued while the device still works on this one.
    rows = ChunkRows(max(stop - start for _, start, stop in pending), writer.row_shape, device)
    forwarded = 0
    done_before = len(dataset) - sum(b - a for _, a, b in pending)
    # A bar on a terminal; plain lines at each tenth in a Slurm log or a pipe (runtime/progress.py).
    # Freed activations are kept for the next batch (runtime/allocator.py); entered before workers fork.
    with reuse_freed_memory(), batches_of(loader) as batches, stop_after_chunk_on_signals() as stop, \
            torch.inference_mode(), Progress(description, len(dataset), unit="img", initial=done_before,
                                             enabled=show_progress) as progress:
        for index, start, stop_row in pending:
            filled = 0
            while filled < stop_row - start:
                images, _ = next(batches)
                images = prepare_batch(images.to(device, non_blocking=True))
                wanted = len(images)
                images = _padded(images, batch_size) if pad_to_batch else images
                with autocast_context(device, precision):
                    output = features_of(images.contiguous(memory_format=memory_format))
                filled += rows.add(output[:wanted].float(), filled, description)
                progress.update(done_before + forwarded + filled)
            writer.write_chunk(index, rows.collect(filled, start, description))
            forwarded += filled
            if stop.signal_name:  # also after the split's last chunk: the next split would ignore the request
                raise Preempted(f"{description}: stopped on {stop.signal_name} after chunk {index + 1} of "
                                f"{len(writer.manifest['chunks'])}; rerun the same command to resume")
    if finish:
        writer.finish()
    return forwarded


def _padded(images: torch.Tensor, batch_size: int) -> torch.Tensor:
    missing = batch_size - len(images)
    if missing <= 0:
        return images
    return torch.cat([images, images[-1:].expand(missing, *images.shape[1:])])


def place_on_device(backbone, device: torch.device) -> torch.memory_format:
    """Move the backbone's weights to `device` in the memory format its forward prefers, and return that format:
    every forward of a run (the row-shape pass, the budget's blank pass, extraction) comes after this."""
    memory_format = _memory_format(backbone.model)
    backbone.model.to(device=device, memory_format=memory_format)
    return memory_format


def _memory_format(model) -> torch.memory_format:
    # Convolutions run on channels-last (NHWC) tensors without layout conversions in oneDNN and cuDNN:
    # EfficientNet-Lite0 extracts ~1.8x faster on 2 CPU cores (benchmarks/demo_wall_time.py). A ViT's only
    # convolution is its patch embedding, which gains nothing.
    is_vit = hasattr(model, "patch_embed")
    return torch.contiguous_format if is_vit else torch.channels_last
