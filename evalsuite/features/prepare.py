"""Features for a run: cache keys, the RAM budget plan, extraction of what is missing, and opening.

The plan is made before anything large is allocated. The row shape it needs comes from the
manifests when every split is cached, otherwise from one real forward pass on one sample.

A run extracts only the splits its probes read (`splits`, from probes.base.splits_read: a zero-shot run with one
prompt set reads test alone); planning, keys, extraction and the run JSON's `samples_extracted` cover those.
"""

import contextlib
import dataclasses
import functools
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.features.budget import (
    BudgetRefused,
    SplitPlan,
    cache_bytes,
    extraction_working_bytes,
    make_plan,
    model_bytes,
    probe_working_bytes,
)
from evalsuite.features.cache import FeatureCache
from evalsuite.features.extract import Preempted, extract_to_cache, place_on_device
from evalsuite.features.memory_limits import memory_sources
from evalsuite.features.slide_donors import copy_from_donor_caches
from evalsuite.features.slide_features import cache_layout, open_bags, slide_summary
from evalsuite.features.split_keys import (  # SPLITS and split_aliases are imported from here too
    SPLITS,
    datasets_and_keys,
    key_fields,
    label_bytes,
    split_aliases,
    splits_to_extract,
)
from evalsuite.features.throughput import (
    ForwardClock,
    device_name,
    load_split_record,
    save_split_record,
    split_record,
    summarise,
)
from evalsuite.models.transforms import build_transform
from evalsuite.runtime import stages
from evalsuite.runtime.distributed import Dist, shard_bounds
from evalsuite.runtime.precision import autocast_context, resolve_precision
from evalsuite.runtime.versions import library_versions
from evalsuite.tasks.cards import dense_layers
from evalsuite.tasks.kinds import KINDS


def feature_fn(backbone, card):
    features_of = getattr(backbone, f"{KINDS[card.kind].feature}_features")
    if KINDS[card.kind].dense:  # several blocks' tokens, concatenated: the card's `layers`
        return functools.partial(features_of, layers=dense_layers(card))
    return features_of
CHUNK_TARGET_BYTES = 256 * 1024**2
CHUNK_MAX_ROWS = 4096


@dataclass
class PreparedSplits:
    plan: object
    keys: dict
    key_fields: dict
    datasets: dict
    row_shape: tuple
    shape_probe_forwards: int
    cache: FeatureCache
    chunk_rows: int
    layouts: dict  # slide tasks: {split: SlideLayout}; empty otherwise


def used_precision(config, backbone, device) -> str:
    """The compute precision of the run's forward passes: --precision, or `auto` resolved for this device and model."""
    return resolve_precision(config.precision, device, backbone.precision)


def _row_shape(cache, keys, datasets, features_of, device, precision) -> tuple[tuple, int]:
    """(row shape, forward passes spent finding it)."""
    for key in keys.values():
        manifest = cache.manifest(key)
        if manifest:
            return tuple(manifest["shape"][1:]), 0
    image, _ = next(iter(datasets.values()))[0]
    with torch.inference_mode(), autocast_context(device, precision):
        output = features_of(image.unsqueeze(0).to(device))
    return tuple(output.shape[1:]), 1


def chunk_rows_for(row_shape, batch_size: int, requested: int | None) -> int:
    if requested:
        return requested
    rows = min(CHUNK_MAX_ROWS, CHUNK_TARGET_BYTES // max(cache_bytes(1, row_shape), 1))
    return max(batch_size, rows // batch_size * batch_size)


def plan_splits(config, card, reader, backbone, device, splits=SPLITS, before_forward=None) -> PreparedSplits:
    """The budget plan, keys and datasets of `splits` (default: all three; a run passes the splits its probes read).
    `before_forward(layouts)` checks a slide task's layouts before the first forward, the row-shape pass."""
    config = config.for_device(device.type)  # API callers may leave the device's defaults (workers) unset
    cache = FeatureCache(Path(config.out_dir) / "cache")
    transform = build_transform(backbone.data_config)
    precision = used_precision(config, backbone, device)
    splits = splits_to_extract(reader, splits)
    fields = {split: key_fields(config, card, reader, backbone, split, precision) for split in splits}
    datasets, keys, layouts, fields = datasets_and_keys(config, card, reader, cache, transform, fields, splits)
    for split, dataset in datasets.items():
        if len(dataset) == 0:
            raise EvalsuiteError(f"task card {card.path}: split '{split}' has no samples")
    if before_forward is not None:
        before_forward(layouts)
    place_on_device(backbone, device)  # before the row-shape pass, the run's first forward
    row_shape, forwards = _row_shape(cache, keys, datasets, feature_fn(backbone, card), device, precision)
    # Segmentation datasets give one mask's shape (uint8); class-id datasets have none (int64 ids).
    label_shape = tuple(getattr(next(iter(datasets.values())), "label_shape", ()))
    aliases = split_aliases(reader)  # an alias holds no cache of its own
    split_plans = [SplitPlan(split, len(datasets[split]), list(row_shape),
                             0 if split in aliases else cache_bytes(len(datasets[split]), row_shape),
                             cache.is_complete(keys[split]),
                             0 if split in aliases else label_bytes(datasets[split], label_shape))
                   for split in splits]
    chunk_rows = chunk_rows_for(row_shape, config.batch_size, config.chunk_rows)
    plan = make_plan(
        split_plans, memory_sources(config.mem), model_bytes(backbone.model),
        probe_working_bytes(row_shape, label_shape, card.num_classes),
        extraction_working_bytes(backbone.data_config["input_size"], config.batch_size, config.num_workers,
                                 chunk_rows, row_shape),
        cache.root, requested=config.cache)
    return PreparedSplits(plan, keys, fields, datasets, row_shape, forwards, cache, chunk_rows, layouts)


@dataclass
class ExtractionJob:
    """What every split's extraction shares, built once per run."""
    config: object
    card: object
    backbone: object
    device: torch.device
    dist: Dist
    cache: FeatureCache
    precision: str
    features_of: object
    chunk_rows: int
    # Whether a failure before the first chunk removes the cache: not when other processes (shards) fill it too.
    owns_cache: bool = True


@dataclass
class PreparedFeatures:
    plan: object  # the budget decision all ranks follow
    splits: dict  # {split: (features, labels)} on rank 0; empty on the other ranks
    extracted_per_rank: dict  # {split: [samples each rank forwarded]}
    shape_probe_forwards: int
    slides: dict  # slide tasks: {split: slide and tile counts, skipped slides}; empty otherwise
    throughput: dict  # rates and device-hours (evalsuite.features.throughput.summarise); empty off rank 0
    keys: dict = dataclasses.field(default_factory=dict)  # {split: cache key}, for the run's provenance
    layouts: dict = dataclasses.field(default_factory=dict)  # slide tasks: {split: SlideLayout}; empty otherwise


def extract_chunks(job: ExtractionJob, writer, dataset, split: str, chunks) -> int:
    try:
        return extract_to_cache(job.backbone, dataset, writer, job.device, batch_size=job.config.batch_size,
                                num_workers=job.config.num_workers, precision=job.precision,
                                description=f"{job.card.name}/{split}", features_of=job.features_of, chunks=chunks,
                                finish=False, show_progress=job.dist.is_main,
                                pad_to_batch=not KINDS[job.card.kind].bags)
    except Preempted:
        raise
    except BaseException:
        # A cache that failed before its first chunk holds nothing worth resuming: leave no trace. The cache may be
        # gone (a scratch purge): then the error being raised says so, and a failing reload must not replace it.
        with contextlib.suppress(EvalsuiteError, OSError, ValueError):
            writer.reload()
            if job.dist.is_main and job.owns_cache and not any(chunk["done"] for chunk in writer.manifest["chunks"]):
                shutil.rmtree(writer.folder, ignore_errors=True)
        raise


def _extract_split(job: ExtractionJob, split: str, prepared: PreparedSplits) -> list[int]:
    """Fill one split's cache across ranks; returns the samples each rank forwarded."""
    key, dataset, dist = prepared.keys[split], prepared.datasets[split], job.dist
    writer = None
    if dist.is_main and not job.cache.is_complete(key):
        layout = cache_layout(prepared.layouts[split], job.chunk_rows) if prepared.layouts else None
        writer = job.cache.start_or_resume(key, (len(dataset), *prepared.row_shape), dataset.labels,
                                           prepared.key_fields[split], job.chunk_rows, library_versions(), layout)
        if prepared.layouts:  # a slide another cache holds (an earlier fold, another split) is copied, not forwarded
            copy_from_donor_caches(job.cache, key, prepared.key_fields[split], prepared.layouts[split], writer)
    # Every rank shards rank 0's list of pending chunks. A rank reading the chunk log itself could see chunks rank 0
    # had already written (it starts at once), shard a shorter list, and leave some chunks to no rank.
    pending = dist.broadcast(writer.pending_chunks() if writer is not None else None)
    if pending is None:
        return [0] * dist.world_size
    writer = writer or job.cache.attach(key)
    first, last = shard_bounds(len(pending), dist.rank, dist.world_size)
    clock = ForwardClock(job.features_of, job.device)
    started = time.perf_counter()
    forwarded = extract_chunks(dataclasses.replace(job, features_of=clock), writer, dataset, split, pending[first:last])
    extract_s = time.perf_counter() - started
    dist.barrier()
    if dist.is_main:
        writer.finish()
        if forwarded:
            save_split_record(writer.folder, split_record(forwarded, extract_s, clock.seconds,
                                                          device_name(job.device), dist.world_size))
    return dist.all_gather(forwarded)


def prepare_features(config, card, reader, backbone, device, dist=Dist(), splits=SPLITS,
                     before_extraction=None) -> PreparedFeatures:
    """Plan, extract what is not cached, and open the caches of `splits` (and of the splits their aliases stand
    for); the other splits are neither read nor opened, and are absent from the result.

    Rank 0 plans and its decision holds for all ranks; every rank extracts its shard of the
    pending chunks; only rank 0 opens the finished caches. `before_extraction(layouts)`: a check of the slide
    layouts before the first forward (plan_splits) (a slide-encoder run refuses a slide too large for its forward).
    """
    config = config.for_device(device.type)
    prepared = plan_splits(config, card, reader, backbone, device, splits, before_extraction)
    prepared.plan = dist.broadcast(prepared.plan)
    if prepared.plan.decision == "refuse":
        raise BudgetRefused(f"budget: {prepared.plan.reason}")  # RAM or disk: the plan says which
    stages.say(stages.features_line(prepared.plan))
    job = ExtractionJob(config, card, backbone, device, dist, prepared.cache, used_precision(config, backbone, device),
                        feature_fn(backbone, card), prepared.chunk_rows)
    extracted, opened, aliases = {}, {}, split_aliases(reader)
    for split in prepared.keys:  # SPLITS order: an alias's split comes before it
        key = prepared.keys[split]
        if split in aliases:  # the cache of another split, extracted and opened under that split
            extracted[split] = [0] * dist.world_size
            opened.update({split: opened[aliases[split]]} if dist.is_main else {})
            continue
        # Rank 0 holds the key's lock for the group until the cache is open (its reads then hold the files): a
        # `cache rm` or an unrelated run asking for the key waits, and cannot remove the cache before it is opened.
        with job.cache.lock(key) if dist.is_main else contextlib.nullcontext():
            extracted[split] = _extract_split(job, split, prepared)
            if dist.is_main:
                opened[split] = open_bags(job.cache, key, prepared.plan.decision, reader, split,
                                          prepared.layouts[split]) if prepared.layouts \
                    else job.cache.open(key, prepared.plan.decision)
    slides = {split: slide_summary(layout) for split, layout in prepared.layouts.items()}
    own = [split for split in prepared.keys if split not in aliases]
    throughput = summarise({split: load_split_record(job.cache.folder(prepared.keys[split])) for split in own},
                           sum(len(prepared.datasets[split]) for split in own)) if dist.is_main else {}
    return PreparedFeatures(prepared.plan, opened, extracted, prepared.shape_probe_forwards, slides, throughput,
                            dict(prepared.keys), dict(prepared.layouts))
