"""One shard of a task's extraction: several processes (Slurm array elements) fill one content-addressed cache.

Shard i of K takes every chunk whose index is i modulo K, in every split: a fixed, disjoint assignment, so no claim
file decides who does what and no lock survives a dead job. A chunk's bytes do not depend on who writes it (batches
never straddle chunks and partial batches are padded: features/extract.py), so the cache the shards fill is byte
for byte the one a single process writes. What a shard finds done on disk (its checksum verified on resume) it does
not redo: a preempted or failed shard is resubmitted as it was. The per-key flock is held only to create or attach
to a split's cache and to mark it complete, never across extraction; the kernel drops it when a process dies.
Whichever shard writes the last chunk of a split marks it complete; the cell's probes run after all shards.
"""

import dataclasses
import time

from evalsuite.features.prepare import SPLITS, ExtractionJob, extract_chunks, feature_fn, plan_splits, used_precision
from evalsuite.features.slide_features import cache_layout
from evalsuite.features.throughput import ForwardClock, device_name, save_split_record, split_record
from evalsuite.runtime.distributed import Dist
from evalsuite.runtime.versions import library_versions


def shard_chunks(pending: list, shard_index: int, shard_count: int) -> list:
    """The pending chunks (index, start, stop) that are this shard's: index modulo the shard count."""
    return [chunk for chunk in pending if chunk[0] % shard_count == shard_index]


def extract_shard(config, card, reader, backbone, device, shard_index: int, shard_count: int) -> dict:
    """Extract this shard's chunks of every split; returns {split: samples forwarded}. No budget gate: a shard holds
    one chunk at a time, never a whole cache (the cell's probe step plans and opens the caches)."""
    config = config.for_device(device.type)
    prepared = plan_splits(config, card, reader, backbone, device)
    job = ExtractionJob(config, card, backbone, device, Dist(), prepared.cache,
                        used_precision(config, backbone, device), feature_fn(backbone, card), prepared.chunk_rows,
                        owns_cache=False)
    return {split: _extract_split_shard(job, prepared, split, shard_index, shard_count) for split in SPLITS}


def _extract_split_shard(job: ExtractionJob, prepared, split: str, shard_index: int, shard_count: int) -> int:
    key, dataset = prepared.keys[split], prepared.datasets[split]
    with job.cache.lock(key):
        if job.cache.is_complete(key):
            return 0
        layout = cache_layout(prepared.layouts[split], job.chunk_rows) if prepared.layouts else None
        writer = job.cache.start_or_resume(key, (len(dataset), *prepared.row_shape), dataset.labels,
                                           prepared.key_fields[split], job.chunk_rows, library_versions(), layout)
    mine = shard_chunks(writer.pending_chunks(), shard_index, shard_count)
    clock = ForwardClock(job.features_of, job.device)
    started = time.perf_counter()
    forwarded = extract_chunks(dataclasses.replace(job, features_of=clock), writer, dataset,
                               f"{split} shard {shard_index + 1}/{shard_count}", mine)
    extract_s = time.perf_counter() - started
    with job.cache.lock(key):
        writer.reload()
        if not writer.pending_chunks() and not writer.manifest.get("complete"):
            writer.finish()
            if forwarded:  # the rates this shard measured stand for the cache (a rate, not a total)
                save_split_record(writer.folder, split_record(forwarded, extract_s, clock.seconds,
                                                              device_name(job.device), 1))
    return forwarded
