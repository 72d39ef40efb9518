"""Slide embeddings: a slide encoder run once per slide (or patient) over the tile cache, into a float16 cache.

A slide-encoder run (`--model titan`) first fills the ordinary tile cache with its tile encoder at its tiling, the
same cache an ABMIL or mean-pool run of that tile encoder and tiling reads (the key names the tile encoder, not the
slide encoder, so no tile is extracted twice). Then each split's items go through the slide encoder once, one item
at a time, into a second cache of the same kind (features/cache.py): float16 [items, embed_dim], content-addressed
by the tile cache's key, the slide encoder and its weights, the fusion rule and the precision; written in chunks of
ITEMS_PER_CHUNK items, each checksummed and logged after its bytes are on disk, so a killed run resumes at the first
unfinished chunk and the finished cache is byte for byte the one an uninterrupted run writes.

Items: slides, or, where the task scores patients (survival), patients with the card's `fusion`:
- early (Patho-Bench's combine_slides_per_patient=True; the default for encoders that ignore positions): all tiles
  of a patient's slides, features and level-0 coordinates concatenated in cache order, in one slide-encoder forward;
- late (combine_slides_per_patient=False; the default, and the only rule, for encoders that read positions): each
  slide embedded alone, then the mean of the patient's slide embeddings (float32 mean, stored float16).
The probes then read [items, embed_dim] vectors like any pooled tile cache (probes/pooled/).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import PatientBags
from evalsuite.features.cache import FeatureCache, cache_key
from evalsuite.runtime.precision import autocast_context
from evalsuite.runtime.progress import Progress
from evalsuite.runtime.versions import library_versions

ITEMS_PER_CHUNK = 4  # a chunk's fsync is cheap beside four slide-encoder forwards; a kill loses at most three
ENCODER_TISSUE_FRACTION = 0.0  # a slide-encoder run keeps every tile touching tissue (card_for_encoder)
EARLY, LATE = "early", "late"
FUSIONS = (EARLY, LATE)


@dataclass(frozen=True)
class Item:
    """One slide-encoder input, or for late fusion the several inputs whose embeddings are averaged."""
    parts: tuple  # ((first_row, stop_row) of the split's tile array, ...) per forward: one part per slide
    early: bool  # True: the parts' tiles go through one forward together


def card_for_encoder(card, spec):
    """The card a slide-encoder run reads: a slide task, tiled at the encoder's own tiling (its tile size and
    magnification) with TRIDENT's tissue rule, every tile touching tissue (min_tissue_proportion 0: TRIDENT is the
    pipeline that runs all six published encoders, mahmoodlab/TRIDENT trident/wsi_objects/WSIPatcher.py at a91fa84);
    the card's tile cap stays."""
    import dataclasses

    from evalsuite.tasks.kinds import KINDS

    if not KINDS[card.kind].bags:
        slide_kinds = ", ".join(name for name, kind in KINDS.items() if kind.bags)
        raise EvalsuiteError(f"--model {spec.name} is a slide encoder: it needs a slide task ({slide_kinds}), but "
                             f"task '{card.name}' ({card.path}) is {card.kind}; use its tile encoder "
                             f"--model {spec.tile_encoder} for tile tasks")
    if KINDS[card.kind].per_patient:
        fusion_of(card, spec)  # a fusion the encoder cannot take is refused before the reader scans a slide
    tiling = {**(card.extra.get("tiling") or {}), "min_tissue_fraction": ENCODER_TISSUE_FRACTION, **spec.tiling}
    return dataclasses.replace(card, extra={**card.extra, "tiling": tiling})


def fusion_of(card, spec) -> str:
    """The card's `fusion`, else early for a set model and late for one that reads tile positions: a patient's
    slides share no coordinate frame, so their tiles cannot be placed on one grid (Patho-Bench's README runs TITAN
    with combine_slides_per_patient=False). Early fusion with a positional encoder is refused."""
    fusion = card.extra.get("fusion", LATE if spec.uses_coords else EARLY)
    if fusion not in FUSIONS:
        raise EvalsuiteError(f"task card {card.path}: fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if fusion == EARLY and spec.uses_coords:
        raise EvalsuiteError(f"task card {card.path}: fusion early puts a patient's slides on one grid, but "
                             f"{spec.name} reads tile positions and the slides share no coordinate frame; use fusion: "
                             "late (the mean of the slides' embeddings)")
    return fusion


def split_items(bags, fusion: str) -> list[Item]:
    """The items of one split in the order of its targets: one per slide, or one per patient (PatientBags)."""
    if isinstance(bags, PatientBags):
        slides = bags.slides
        return [Item(tuple(slides.tile_rows(int(s)) for s in members), fusion == EARLY) for members in bags.slides_of]
    return [Item((bags.tile_rows(i),), True) for i in range(len(bags))]


def item_tiles(item: Item) -> int:
    """Tiles in the largest single forward of the item (what its peak memory grows with)."""
    sizes = [stop - first for first, stop in item.parts]
    return sum(sizes) if item.early else max(sizes)


def sides_level0_px(layout) -> np.ndarray:
    """Each tile row's side in level-0 pixels, from the layout's per-slide sides (or read size x level downsample)."""
    sides = layout.sides_level0_px
    if sides is None:
        from evalsuite.readers.slides.wsi import cached_slide

        sides = [read * cached_slide(Path(path)).level_downsamples[level]
                 for path, level, read in zip(layout.paths, layout.levels, layout.read_sizes_px)]
    return np.repeat(np.asarray(sides, dtype=np.float64), np.diff(layout.offsets))


class SlideForward:
    """One item's embedding: its tile rows (upcast to float32 on the device) and coordinates through the encoder."""

    def __init__(self, encoder, features, layout, device, precision: str):
        self.encoder, self.features, self.device, self.precision = encoder, features, device, precision
        self.coords = np.asarray(layout.coords_level0, dtype=np.float32)
        self.sides = sides_level0_px(layout)

    @torch.inference_mode()
    def __call__(self, item: Item) -> np.ndarray:
        if item.early:
            return self._forward(item.parts)
        return np.mean([self._forward((part,)) for part in item.parts], axis=0, dtype=np.float32)

    def _forward(self, parts: tuple) -> np.ndarray:
        rows = np.concatenate([np.arange(first, stop) for first, stop in parts])
        tiles = torch.from_numpy(np.asarray(self.features[rows], dtype=np.float32)).to(self.device)
        coords = torch.from_numpy(self.coords[rows]).to(self.device)
        side = int(round(self.sides[parts[0][0]]))  # a patient's slides: the first slide's tile side (docs)
        with autocast_context(self.device, self.precision):
            embedding = self.encoder.model(tiles, coords, side)
        return embedding.float().reshape(-1).cpu().numpy()


def embedding_fields(encoder, tiles_key: str, fusion: str | None, precision: str) -> dict:
    return {"slide_encoder": encoder.spec.name, "weights_id": encoder.weights_id, "tiles_key": tiles_key,
            "fusion": fusion, "precision": precision, "dtype": "float16", "feature": "slide_embedding"}


def embed_split(cache: FeatureCache, encoder, bags, targets, layout, tiles_key: str, fusion: str | None, device,
                precision: str, description: str) -> tuple[str, np.ndarray]:
    """(key, float16 [items, embed_dim]) of one split, computed where its cache is missing or unfinished."""
    items = split_items(bags, fusion or EARLY)
    fields = embedding_fields(encoder, tiles_key, fusion, precision)
    key = cache_key(fields)
    with cache.lock(key):
        if not cache.is_complete(key):
            writer = cache.start_or_resume(key, (len(items), encoder.embed_dim), np.asarray(targets), fields,
                                           ITEMS_PER_CHUNK, library_versions())
            _fill(writer, items, SlideForward(encoder, bags_features(bags), layout, device, precision), description,
                  encoder.embed_dim)
            writer.finish()
        embeddings, _ = cache.open(key, "ram")
    return key, embeddings


def bags_features(bags):
    return bags.slides.features if isinstance(bags, PatientBags) else bags.features


def _fill(writer, items: list, forward: SlideForward, description: str, width: int) -> None:
    pending = writer.pending_chunks()
    done = len(items) - sum(stop - start for _, start, stop in pending)
    progress = Progress(description, len(items), unit="slide", initial=done)
    for index, start, stop in pending:
        rows = np.stack([forward(item) for item in items[start:stop]])
        if rows.shape[1:] != (width,):
            raise EvalsuiteError(f"slide encoder {forward.encoder.spec.name} returned embeddings of shape "
                                 f"{rows.shape[1:]}, its entry says ({width},): the module and its entry disagree")
        if not np.isfinite(rows).all() or np.abs(rows).max() > np.finfo(np.float16).max:
            raise EvalsuiteError(f"slide encoder {forward.encoder.spec.name}: a non-finite or float16-overflowing "
                                 f"slide embedding in items {start}-{stop - 1} of {description}; check --weights")
        writer.write_chunk(index, rows.astype(np.float16))
        done += stop - start
        progress.update(done)
    progress.close()


def embed_slides(config, card, reader, backbone, features, device, precision: str,
                 limit: tuple[int, str]) -> tuple[dict, dict]:
    """({split: (float16 [items, embed_dim], targets)}, {split: slide-embedding cache key}) of a slide-encoder run,
    from its opened tile bags (features.prepare.PreparedFeatures); `limit`: memory_limit's (bytes, source), which
    an early-fused patient's forward must fit as each slide's did."""
    from evalsuite.tasks.kinds import KINDS

    encoder = backbone.slide_encoder
    fusion = fusion_of(card, encoder.spec) if KINDS[card.kind].per_patient else None
    cache = FeatureCache(Path(config.out_dir) / "cache")
    embedded, keys = {}, {}
    for split, (bags, targets) in features.splits.items():
        items = split_items(bags, fusion or EARLY)
        check_item_memory(encoder, zip(reader.item_ids(split), map(item_tiles, items)), split, *limit)
        keys[split], embeddings = embed_split(cache, encoder, bags, targets, features.layouts[split],
                                              features.keys[split], fusion, device, precision,
                                              f"{encoder.spec.name} {card.name}/{split}")
        embedded[split] = (embeddings, targets)
    return embedded, keys


def memory_limit(config, device) -> tuple[int, str]:
    """(bytes, where the figure comes from) one forward may hold: the GPU's memory, or the host's RAM limit."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory), f"{torch.cuda.get_device_name(device)}"
    from evalsuite.features.memory_limits import memory_sources

    sources = memory_sources(config.mem)
    source = min(sources, key=sources.get)
    return int(sources[source]), source


def check_layout_memory(encoder, layouts: dict, limit: tuple[int, str]) -> None:
    """Before the tile encoder's first forward: every slide alone must fit (check_item_memory)."""
    for split, layout in layouts.items():
        check_item_memory(encoder, zip((f"slide {s}" for s in layout.slide_ids), np.diff(layout.offsets).tolist()),
                          split, *limit)


def check_item_memory(encoder, named_tiles, split: str, limit_bytes: int, limit_source: str) -> None:
    """Refuse, before any forward, an item (slide, or early-fused patient) whose slide-encoder forward cannot fit in
    `limit_bytes`: one line naming the item, its tiles, the estimate and the fix."""
    from evalsuite.features.budget import BudgetRefused, human_bytes, model_bytes
    from evalsuite.models.slide.memory import forward_bytes

    named_tiles = list(named_tiles)
    if not named_tiles:
        return
    name, tiles = max(named_tiles, key=lambda pair: pair[1])
    needed = forward_bytes(encoder.spec, int(tiles)) + model_bytes(encoder.model)
    if needed > limit_bytes:
        raise BudgetRefused(
            f"budget: {name} ({split}) has {tiles} tiles; {encoder.spec.name}'s forward on it needs about "
            f"{human_bytes(needed)} but the limit is {human_bytes(limit_bytes)} ({limit_source}); raise --mem or run "
            "on a larger host, or cap the tiles per slide with the card's tiling.max_tiles")
