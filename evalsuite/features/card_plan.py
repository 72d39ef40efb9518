"""The RAM budget plan of a task whose data is not on disk yet, from its card's official split sizes.

A user sizes a job (`evalsuite budget --task pannuke --mem 8G`) before downloading the data.
Sizes are those the readers' count checks assert on the complete dataset; the row shape comes
from one forward pass of a blank image at the backbone's input size, the pass a run makes on a
real sample. No cache can be known without the data, so every split counts as to be extracted.
"""

from pathlib import Path

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
from evalsuite.features.prepare import SPLITS, chunk_rows_for, feature_fn, used_precision
from evalsuite.readers.card_facts import SIZED_READERS, OfficialSizes, missing_data_message, official_sizes
from evalsuite.runtime.precision import autocast_context
from evalsuite.tasks.kinds import KINDS


def _blank_row_shape(config, card, backbone, device) -> tuple:
    place_on_device(backbone, device)
    blank = torch.zeros(1, *backbone.data_config["input_size"], device=device)
    with torch.inference_mode(), autocast_context(device, used_precision(config, backbone, device)):
        return tuple(feature_fn(backbone, card)(blank).shape[1:])


def card_sizes(card) -> OfficialSizes:
    """The card's official split sizes; checked before the backbone is built (it may download weights)."""
    sizes = official_sizes(card) if not KINDS[card.kind].bags else None
    if sizes is None:
        raise EvalsuiteError(f"{missing_data_message(card)}; without data `budget` plans only tasks whose official "
                             f"counts fix every split ({', '.join(SIZED_READERS)})")
    return sizes


def plan_from_card(config, card, sizes: OfficialSizes, backbone, device):
    """The Plan of `config` with the card's official sizes."""
    config = config.for_device(device.type)
    row_shape = _blank_row_shape(config, card, backbone, device)
    labels = int(torch.tensor(sizes.label_shape).prod()) if sizes.label_shape else None
    splits = [SplitPlan(split, sizes.samples[split], list(row_shape), cache_bytes(sizes.samples[split], row_shape),
                        False, sizes.samples[split] * labels if labels else None) for split in SPLITS]
    chunk_rows = chunk_rows_for(row_shape, config.batch_size, config.chunk_rows)
    plan = make_plan(
        splits, memory_sources(config.mem), model_bytes(backbone.model),
        probe_working_bytes(row_shape, sizes.label_shape, card.num_classes),
        extraction_working_bytes(backbone.data_config["input_size"], config.batch_size, config.num_workers,
                                 chunk_rows, row_shape),
        Path(config.out_dir) / "cache", requested=config.cache)
    plan.notes.append(f"planned from task card {card.name} without its data: {sizes.source} "
                      f"({', '.join(f'{s} {sizes.samples[s]}' for s in SPLITS)}); pass --data-root to plan "
                      f"from the files and see which caches exist")
    return plan
