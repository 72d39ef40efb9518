"""A slide's tiles already extracted in another slide cache are copied, not forwarded again.

A slide cache is keyed by its split's slide list (features/slide_features.py), so the folds of a cross-validated
slide task (Patho-Bench's split files: five folds, each slide in four trains and one test) would forward every slide
once per fold, and a slide encoder's run on a Patho-Bench card would pay that five times. Before a slide split is
extracted, each of its slides is looked up in the complete slide caches under the same --out whose features are made
the same way (the fields in SAME_FEATURES: model, weights, transform, precision, tiling, ...): a slide read from the
same file at the same pyramid level and read size, with exactly the same tile coordinates, has its rows copied chunk
by chunk into the new cache (each chunk written, checksummed and logged as a forwarded one, so a killed run resumes
the same way). What no donor holds is forwarded as before.

The copied rows are those an earlier forward of the same model gave; a fresh forward could differ in the last bits
where the batch's composition changes the kernels' blocking (CPU matmuls), never more. A donor removed or damaged
while it is read is skipped: its slides are forwarded.
"""

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.features.slide_features import COORDS
from evalsuite.readers.slides.base import SlideLayout
from evalsuite.runtime import stages

# Key fields that decide a tile's features besides the slide and the tile's place in it.
SAME_FEATURES = ("model", "weights_id", "transform", "feature", "dtype", "precision", "pooling", "probe_features",
                 "layers", "tiling")


def _slide_identity(layout, index: int) -> tuple:
    return str(layout.paths[index]), int(layout.levels[index]), int(layout.read_sizes_px[index])


def _donor_slides(cache, key: str, fields: dict, layout) -> dict:
    """{slide index in `layout`: (donor key, the donor's first row of that slide)} over the complete slide caches."""
    wanted = {_slide_identity(layout, i): i for i in range(len(layout.slide_ids))}
    found = {}
    for other in cache.keys():
        if other == key or len(found) == len(wanted):
            continue
        try:
            manifest = cache.manifest(other)
            if not (manifest and manifest.get("complete") and "slides" in manifest) or \
                    any(manifest["fields"].get(name) != fields.get(name) for name in SAME_FEATURES):
                continue
            donor = SlideLayout.from_manifest(manifest, np.load(cache.folder(other) / f"{COORDS}.npy"))
        except (EvalsuiteError, OSError, ValueError, KeyError):
            continue  # an unreadable or foreign cache donates nothing
        for d in range(len(donor.slide_ids)):
            mine = wanted.get(_slide_identity(donor, d))
            if mine is None or mine in found:
                continue
            ours = layout.coords_level0[layout.offsets[mine]:layout.offsets[mine + 1]]
            theirs = donor.coords_level0[donor.offsets[d]:donor.offsets[d + 1]]
            if ours.shape == theirs.shape and np.array_equal(ours, theirs):
                found[mine] = (other, int(donor.offsets[d]))
    return found


def copy_from_donor_caches(cache, key: str, fields: dict, layout, writer) -> int:
    """Write every pending chunk of `writer` whose slide another complete cache holds; returns the tiles copied."""
    pending = writer.pending_chunks()
    donors = _donor_slides(cache, key, fields, layout) if pending else {}
    copied, opened = 0, {}
    for index, start, stop in pending:
        slide = int(np.searchsorted(layout.offsets, start, side="right") - 1)
        if slide not in donors:
            continue
        donor_key, donor_first = donors[slide]
        try:
            features = opened.get(donor_key)
            if features is None:
                features = opened[donor_key] = cache.open(donor_key, "memmap")[0]
            first = donor_first + start - int(layout.offsets[slide])
            writer.write_chunk(index, np.asarray(features[first:first + stop - start]))
        except (EvalsuiteError, OSError, ValueError):
            continue  # the donor went away or is damaged: this chunk is forwarded
        copied += stop - start
    if copied:
        stages.say(f"features: {copied} tile(s) of {len(donors)} slide(s) copied from slide caches that hold them "
                   "(same model, weights, tiling and tiles); the rest is extracted")
    return copied
