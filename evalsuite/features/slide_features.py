"""Slide tasks' side of feature preparation: tile layouts, their cache layout, and opening bags.

A slide split is cached like any split (one float16 [tiles, D] file, chunked, checksummed,
resumable), with three additions stored beside it: the slide table (ids, paths, each slide's
tile rows, pyramid level and read size, the slides skipped and why) in the manifest, each
tile's level-0 coordinates in `coords_level0.npy`, and chunk bounds that never cross a slide,
so a killed extraction resumes at a slide's unfinished part and ranks share slides.
"""

import hashlib
import json

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import PatientBags, SlideBags
from evalsuite.features.cache import CacheLayout
from evalsuite.readers.slides.base import SlideLayout, SlideTiles, tiling_of

COORDS = "coords_level0"


def slide_key_fields(config, card, reader, split: str) -> dict:
    """What a slide split adds to the cache key: the tiling and the exact slide list."""
    listing = json.dumps(reader.slides_fingerprint(split), sort_keys=True).encode()
    return {"tiling": tiling_of(card), "slides_sha256": hashlib.sha256(listing).hexdigest(),
            **({"skip_bad_slides": True} if config.skip_bad_slides else {})}


def slide_layout(cache, key: str, reader, split: str, config) -> SlideLayout:
    """The split's layout from its cache when one was started (never tiled twice), else tiled now."""
    manifest = cache.manifest(key)
    if manifest and "slides" in manifest:
        try:
            coords = np.load(cache.folder(key) / f"{COORDS}.npy")
        except (OSError, ValueError) as exc:
            raise EvalsuiteError(f"feature cache {cache.folder(key)} has unreadable tile coordinates ({exc}); remove "
                                 f"it with `evalsuite cache rm {key}` and rerun") from None
        return SlideLayout.from_manifest(manifest, coords)
    return reader.tile(split, config.skip_bad_slides, config.num_workers)


def slide_dataset(layout: SlideLayout, transform) -> SlideTiles:
    return SlideTiles(layout, transform)


def cache_layout(layout: SlideLayout, chunk_rows: int) -> CacheLayout:
    """Chunks of at most `chunk_rows` tiles, each within one slide."""
    bounds = [(start, min(start + chunk_rows, int(stop)))
              for first, stop in zip(layout.offsets[:-1], layout.offsets[1:])
              for start in range(int(first), int(stop), chunk_rows)]
    return CacheLayout(bounds=bounds, manifest=layout.to_manifest(), arrays={COORDS: layout.coords_level0})


def open_bags(cache, key: str, mode: str, reader, split: str, layout: SlideLayout) -> tuple:
    """(bags, targets) of a complete slide cache laid out as `layout` (the one it was started with); the
    reader's targets follow the cached slides. Bags are SlideBags, or PatientBags when the reader scores
    patients (`patient_of_slide` is not None): then targets have one row per patient."""
    features, _slide_of_tile = cache.open(key, mode)
    reader.keep(split, layout.slide_ids)
    bags = SlideBags(features, layout.offsets)
    patient_of_slide = reader.patient_of_slide(split)
    return (bags if patient_of_slide is None else PatientBags(bags, patient_of_slide)), reader.targets(split)


def slide_summary(layout: SlideLayout) -> dict:
    """What the run JSON records of a slide split."""
    counts = np.diff(layout.offsets)
    return {"slides": len(layout.slide_ids), "tiles": layout.tiles, "tiles_per_slide_min": int(counts.min()),
            "tiles_per_slide_median": float(np.median(counts)), "tiles_per_slide_max": int(counts.max()),
            "skipped": layout.skipped}
