"""One section under two sample ids, found by what its patch files hold rather than by their bytes.

Why: hest_folds.check_one_sample_per_file compares files by path, inode, and size plus first and last bytes
(slides/slide_identity.py). A section re-saved under a new id (the same spots and tiles written again: an HDF5
attribute added, other chunks or compression) has other bytes, so its train copy was scored again in test. A section
is its spots and its pixels: two patch files whose barcodes are the same set (a copy may list them in another order)
and whose tiles under the same barcodes are the same pixels hold one section, whatever their bytes.

Cost: PatchFile reads and decodes every barcode anyway, so the barcode sets cost nothing more. Pixels are read only for
samples whose barcode set another sample shares, and only a bounded sample of them: the tiles of COMPARED_TILES
barcodes evenly spaced in sorted barcode order (HEST's tiles are 224 x 224 x 3 bytes: at most ~2.4 MB per sample).
Counts are not compared: two patch files of one section already leak, whichever expression file each names.
"""

import hashlib
from collections import Counter

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.spots.hest_folds import listed_rows
from evalsuite.readers.spots.hest_h5ad import TASK

COMPARED_TILES = 16


def check_one_section_per_sample(fold_rows: list, fold_paths: list, patch_of) -> None:
    """No two sample ids of `fold_rows` (read from `fold_paths`) name patch files holding one section; `patch_of(row)`
    is the row's PatchFile. Runs after check_one_sample_per_file, so each sample id names one patch file."""
    first = {}  # sample id -> (its first row, the split file listing it)
    for row, split_file in listed_rows(fold_rows, fold_paths):
        first.setdefault(row.sample_id, (row, split_file))
    samples = list(first.values())
    patches = [patch_of(row) for row, _ in samples]
    same = first_same_section(patches)
    if same is None:
        return
    (earlier, _), (later, later_in) = samples[same[0]], samples[same[1]]
    compared = len(_compared_barcodes(patches[same[1]]))
    raise EvalsuiteError(f"{TASK}: sample '{later.sample_id}' ({later_in}) names the patch file of sample "
                         f"'{earlier.sample_id}' under other bytes: {later.patches_path} holds the same "
                         f"{len(patches[same[1]])} spot barcodes as {earlier.patches_path} and the same pixels in the "
                         f"{compared} tiles compared (a re-saved copy); one section under two ids is scored twice or "
                         "leaks between train and test: list each sample once")


def first_same_section(patches: list) -> tuple[int, int] | None:
    """(earlier index, later index) of the first PatchFile, in list order, holding the section an earlier one holds;
    None when each holds its own."""
    spots = [_spots_digest(patch) for patch in patches]
    shared = {digest for digest, count in Counter(spots).items() if count > 1}
    first_of = {}
    for index, (patch, digest) in enumerate(zip(patches, spots)):
        if digest not in shared:
            continue  # no other sample has these spots: its pixels need not be read
        earlier = first_of.setdefault((digest, _pixels_digest(patch)), index)
        if earlier != index:
            return earlier, index
    return None


def _spots_digest(patch) -> str:
    return hashlib.sha256("\n".join(sorted(patch.barcodes)).encode()).hexdigest()


def _compared_barcodes(patch) -> list:
    ordered = sorted(patch.barcodes)
    positions = np.unique(np.linspace(0, len(ordered) - 1, min(COMPARED_TILES, len(ordered))).round().astype(int))
    return [ordered[position] for position in positions]


def _pixels_digest(patch) -> str:
    """sha256 over the compared tiles, each with its barcode, shape and bytes, in sorted barcode order."""
    row_of = {barcode: row for row, barcode in enumerate(patch.barcodes)}
    digest = hashlib.sha256()
    for barcode in _compared_barcodes(patch):
        tile = np.ascontiguousarray(patch.tile(row_of[barcode]))
        digest.update(f"{barcode}\n{tile.shape}\n".encode())
        digest.update(tile.tobytes())
    return digest.hexdigest()
