"""What makes a test item that item, as a string: the reader contract's `item_ids(split)` (readers/base.py).

Two runs are paired item by item (`evalsuite leaderboard --compare`, rank intervals) only when their test items are
the same items in the same order; labels and clusters alone pass two runs whose items were reordered within the
same label sequence. Each reader names its items by what identifies them on disk, never by where the data root
is, so the same data under another root pairs: a file path relative to the root, a row of an array file, a tile's
origin in its image, a slide or patient id, a spot's barcode. The predictions file stores a hash of each string
(results/predictions.py), so no path is written beside the run.
"""

from pathlib import Path


def relative_name(path, root) -> str:
    """`path` relative to the data root, with / separators; a file outside the root keeps its path as written (it
    is the same file whatever the root)."""
    path, root = Path(path), Path(root)
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def tile_name(source: str, top: int, left: int, size_px: int) -> str:
    """A square tile cut from `source` (a file, an array row): its origin and side name it among the source's."""
    return f"{source} tile {int(top)},{int(left)} {int(size_px)}px"
