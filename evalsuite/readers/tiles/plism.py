"""PLISM tiles as plismbench downloads them: one HDF5 file per slide, one dataset per tile.

Layout under --data-root (`plismbench download`, i.e. the files of the Hugging Face dataset owkin/plism-dataset
matching `*_to_GMH_S60.tif.h5`): `{staining}_{scanner}_to_GMH_S60.tif.h5`, 91 slides (13 stainings x 7 scanners),
every slide registered to GMH_S60 so that a tile id names the same tissue in every slide. Each file holds 16,278
datasets named by tile id, each a tile's RGB pixels as a numpy array; a tile id's last three `_`-separated fields are
integers (deepzoom level, x, y). Tiles are put in plismbench's order, sorted by (x, y) (save_features' sort_coords),
so a row index means the same tile in every slide and plismbench's tile subsets index them.

`tiles_subset` (reader arg, a .npy file under --data-root, or null for every tile): the row indices of the tiles
scored. plismbench's reference is 8,139 tiles, its assets/tiles_subset_8139.npy; only those tiles are embedded.

The one split is `test`: every slide's tiles, slide after slide; a tile's label is its slide's index in `slides`.

Facts from owkin/plism-benchmark at b4f32b7c233e0f5ba8340da89ef65803cfc2ce49: plismbench/engine/cli.py (download
pattern), plismbench/engine/extract/extract_from_h5.py (one dataset per tile id, 16,278 per file, 91 files),
plismbench/engine/extract/utils.py (tile id fields, sort by x then y), plismbench/engine/evaluate.py (STAININGS,
SCANNERS), plismbench/utils/evaluate.py (staining and scanner from the file name, tile subsets); the dataset card
of owkin/plism-dataset (the three fields are deepzoom level, x and y). Not confirmed: the pixel arrays' shape and
dtype (read as uint8 RGB, as plismbench hands them to PIL-based transforms).
"""

from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import LabelledImages, Reader
from evalsuite.readers.files import check_count, layout_error
from evalsuite.readers.tiles.pcam import LazyH5

TASK = "plism"
SUFFIX = "_to_GMH_S60.tif.h5"
LAYOUT = "{staining}_{scanner}_to_GMH_S60.tif.h5 (plismbench download)"
OFFICIAL_SLIDES = 91
OFFICIAL_TILES_PER_SLIDE = 16_278
SPLIT = "test"


def tile_order(tile_ids, path: Path) -> list[str]:
    """`tile_ids` sorted by (x, y), the last two of their three integer fields (plismbench's row order)."""
    coordinates = {}
    for tile_id in tile_ids:
        fields = tile_id.split("_")[1:]
        if len(fields) != 3 or not all(f.lstrip("-").isdigit() for f in fields):
            raise EvalsuiteError(f"{TASK}: {path} has a dataset '{tile_id}' that is not a PLISM tile id "
                                 "(NAME_LEVEL_X_Y); re-download the file with `plismbench download`")
        coordinates[tile_id] = (int(fields[1]), int(fields[2]))
    return sorted(coordinates, key=coordinates.get)


def slide_facts(path: Path) -> tuple[str, str]:
    """(staining, scanner) of a slide file, the first two `_` fields of its name, as plismbench reads them."""
    fields = path.name[: -len(SUFFIX)].split("_")
    if len(fields) != 2 or not all(fields):
        raise layout_error(TASK, f"cannot read a staining and a scanner from {path.name}", LAYOUT)
    return fields[0], fields[1]


def _load_subset(root: Path, name: str | None, tiles: int) -> np.ndarray:
    if name is None:
        return np.arange(tiles)
    path = root / name
    if not path.is_file():
        raise layout_error(TASK, f"missing tile subset {path} (plismbench's assets/{name}; or set the card's "
                                 "reader.args.tiles_subset to null for every tile)", LAYOUT)
    try:
        subset = np.load(path)
    except (OSError, ValueError) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} as a .npy array ({exc}); re-download it") from None
    if subset.ndim != 1 or not np.issubdtype(subset.dtype, np.integer) or len(subset) == 0 \
            or len(set(subset.tolist())) != len(subset) or subset.min() < 0 or subset.max() >= tiles:
        raise EvalsuiteError(f"{TASK}: {path} must be distinct row indices below {tiles} (the slides' tiles); "
                             "re-download it from plismbench's assets")
    return subset.astype(np.int64)


class PlismTiles(LabelledImages):
    """Every slide's chosen tiles, slide after slide; label = the slide's index."""

    def __init__(self, files: list, tile_ids: list, transform):
        super().__init__(np.repeat(np.arange(len(files)), len(tile_ids)), transform)
        self.files, self.tile_ids = files, tile_ids

    def image(self, index: int) -> Image.Image:
        slide, tile = divmod(index, len(self.tile_ids))
        pixels = np.asarray(self.files[slide].file()[self.tile_ids[tile]][()])
        if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
            raise EvalsuiteError(f"{TASK}: {self.files[slide].path} tile {self.tile_ids[tile]} is {pixels.dtype} "
                                 f"{pixels.shape}, not uint8 RGB [H, W, 3]; re-download it with `plismbench download`")
        return Image.fromarray(pixels)


class PlismReader(Reader):
    interval_unit = "tile"
    scored_unit = "tile"

    def __init__(self, card, data_root: Path, check_counts: bool = True,
                 tiles_subset: str | None = "tiles_subset_8139.npy"):
        self.card, root = card, Path(data_root)
        paths = sorted(root.glob(f"*{SUFFIX}"))
        if not paths:
            raise layout_error(TASK, f"no *{SUFFIX} file in {root}", LAYOUT)
        check_count(TASK, "the data root", len(paths), OFFICIAL_SLIDES, check_counts)
        self.slides = [{"name": path.name[: -len(".h5")], "staining": s, "scanner": c}
                       for path in paths for s, c in [slide_facts(path)]]
        self._files = [LazyH5(path, "") for path in paths]
        all_tiles = self._same_tiles(paths)
        check_count(TASK, f"slide {paths[0].name}", len(all_tiles), OFFICIAL_TILES_PER_SLIDE, check_counts)
        self.tile_ids = [all_tiles[i] for i in _load_subset(root, tiles_subset, len(all_tiles))]

    def _same_tiles(self, paths: list) -> list[str]:
        """The tile ids every slide shares, in plismbench's order; a slide with other tiles is an error."""
        first = None
        for path, lazy in zip(paths, self._files):
            tiles = tile_order(list(lazy.file().keys()), path)
            if first is None:
                first = tiles
            elif tiles != first:
                raise EvalsuiteError(f"{TASK}: {path.name} does not hold the same tiles as {paths[0].name} "
                                     f"({len(tiles)} vs {len(first)}); re-download it with `plismbench download`")
        return first

    def dataset(self, split: str, transform) -> PlismTiles:
        self.check_split(split, [SPLIT])
        return PlismTiles(self._files, self.tile_ids, transform)

    def item_ids(self, split: str) -> list[str]:
        self.check_split(split, [SPLIT])
        return [f"{slide['name']}/{tile}" for slide in self.slides for tile in self.tile_ids]

