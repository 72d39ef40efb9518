"""The RAM budget plan of a task whose data is not on disk yet, from its card's official split sizes; and the plan of a
backbone built without its weights (models/meta_build.py), from the files or from the card.

A user sizes a job (`evalsuite budget --task pannuke --mem 8G`) before downloading the data.
Sizes are those the readers' count checks assert on the complete dataset; the row shape comes
from one forward pass of a blank image at the backbone's input size, the pass a run makes on a
real sample (on the meta device when the backbone has no weights: the same shape, no arithmetic).
No cache can be known without the data, or without the weights (their hash is in every cache key),
so then every split counts as to be extracted.
"""

from pathlib import Path

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.features.budget import (
    SplitPlan,
    cache_bytes,
    extraction_working_bytes,
    make_plan,
    model_bytes,
    probe_working_bytes,
)
from evalsuite.features.extract import place_on_device
from evalsuite.features.memory_limits import memory_sources
from evalsuite.features.prepare import SPLITS, chunk_rows_for, feature_fn, split_aliases, used_precision
from evalsuite.features.slide_features import slide_dataset
from evalsuite.models.meta_build import is_meta
from evalsuite.models.registry import IMAGE, of_kind
from evalsuite.models.transforms import build_transform
from evalsuite.readers import build_reader
from evalsuite.readers.card_facts import SIZED_READERS, OfficialSizes, missing_data_message, official_sizes
from evalsuite.runtime.precision import autocast_context
from evalsuite.tasks.cards import dense_layers
from evalsuite.tasks.kinds import KINDS


def _blank_row_shape(config, card, backbone, device) -> tuple:
    if is_meta(backbone):
        return meta_row_shape(card, backbone)
    place_on_device(backbone, device)
    blank = torch.zeros(1, *backbone.data_config["input_size"], device=device)
    with torch.inference_mode(), autocast_context(device, used_precision(config, backbone, device)):
        return tuple(feature_fn(backbone, card)(blank).shape[1:])


def meta_row_shape(card, backbone) -> tuple:
    """The feature row of one image through a meta backbone; the registry's widths where an op has no meta kernel."""
    blank = torch.zeros(1, *backbone.data_config["input_size"], device="meta")
    try:
        with torch.no_grad():
            return tuple(feature_fn(backbone, card)(blank).shape[1:])
    except (NotImplementedError, RuntimeError, TypeError, ValueError):
        spec = of_kind(IMAGE).get(backbone.name)  # the image entries say their token grid and widths
        if spec is None:
            raise
        if KINDS[card.kind].dense:
            return (*spec.grid_hw, spec.token_dim * len(dense_layers(card)))
        return (backbone.embed_dim,)


def card_sizes(card) -> OfficialSizes:
    """The card's official split sizes; checked before the backbone is built (it may download weights)."""
    sizes = official_sizes(card) if not KINDS[card.kind].bags else None
    if sizes is None:
        raise EvalsuiteError(f"{missing_data_message(card)}; without data `budget` plans only tasks whose official "
                             f"counts fix every split ({', '.join(SIZED_READERS)})")
    return sizes


def plan_from_card(config, card, sizes: OfficialSizes, backbone, device, row_shape: tuple | None = None):
    """The Plan of `config` with the card's official sizes (`row_shape`: known already, no blank pass)."""
    config = config.for_device(device.type)
    row_shape = row_shape or _blank_row_shape(config, card, backbone, device)
    labels = int(np.prod(sizes.label_shape)) if sizes.label_shape else None
    splits = [SplitPlan(split, sizes.samples[split], list(row_shape), cache_bytes(sizes.samples[split], row_shape),
                        False, sizes.samples[split] * labels if labels else None) for split in SPLITS]
    plan = _plan(config, card, splits, row_shape, sizes.label_shape, backbone)
    plan.notes.append(f"planned from task card {card.name} without its data: {sizes.source} "
                      f"({', '.join(f'{s} {sizes.samples[s]}' for s in SPLITS)}); pass --data-root to plan "
                      f"from the files and see which caches exist")
    return plan


def count_splits(config, card, data_config: dict) -> tuple[dict, tuple]:
    """({split: (samples, label bytes or None, is an alias)}, one mask's shape) from the files under the data root,
    as a run's datasets count them (slide tasks: the tiles of their tiling)."""
    reader = build_reader(card, config.data_root, config.check_counts)
    transform = build_transform(data_config)
    aliases = {} if KINDS[card.kind].bags else split_aliases(reader)
    wanted = KINDS[card.kind].required_splits  # a kind without a probe (consistency) extracts test alone
    if KINDS[card.kind].bags:
        datasets = {split: slide_dataset(reader.tile(split, config.skip_bad_slides, config.num_workers), transform)
                    for split in wanted}
    else:
        datasets = {split: reader.dataset(split, transform) for split in wanted if split not in aliases}
        datasets.update({split: datasets[alias] for split, alias in aliases.items()})
    for split, dataset in datasets.items():
        if len(dataset) == 0:
            raise EvalsuiteError(f"task card {card.path}: split '{split}' has no samples")
    label_shape = tuple(getattr(datasets[wanted[0]], "label_shape", ()))
    return {split: (len(dataset), _label_bytes(dataset, label_shape), split in aliases)
            for split, dataset in datasets.items()}, label_shape


def plan_from_files(config, card, backbone, counted: tuple | None = None, row_shape: tuple | None = None):
    """The Plan of a backbone without weights (meta) on the files under the data root: every split to extract.
    `counted` and `row_shape`: known already (a sweep counts each task once, passes each model once per kind)."""
    config = config.for_device("cpu")
    counts, label_shape = counted or count_splits(config, card, backbone.data_config)
    row_shape = row_shape or meta_row_shape(card, backbone)
    splits = [SplitPlan(split, samples, list(row_shape), 0 if alias else cache_bytes(samples, row_shape), False,
                        0 if alias else label_bytes) for split, (samples, label_bytes, alias) in counts.items()]
    return _plan(config, card, splits, row_shape, label_shape, backbone)


def _label_bytes(dataset, label_shape: tuple) -> int | None:
    """As features/prepare.py counts them: masks (a byte a pixel), float targets, or None (one int64 class id)."""
    if label_shape:
        return len(dataset) * int(np.prod(label_shape))
    labels = getattr(dataset, "labels", None)
    return int(labels.nbytes) if isinstance(labels, np.ndarray) and labels.ndim == 2 else None


def _plan(config, card, splits: list, row_shape: tuple, label_shape: tuple, backbone):
    chunk_rows = chunk_rows_for(row_shape, config.batch_size, config.chunk_rows)
    return make_plan(
        splits, memory_sources(config.mem), model_bytes(backbone.model),
        probe_working_bytes(row_shape, label_shape, card.num_classes),
        extraction_working_bytes(backbone.data_config["input_size"], config.batch_size, config.num_workers,
                                 chunk_rows, row_shape),
        Path(config.out_dir) / "cache", requested=config.cache)
