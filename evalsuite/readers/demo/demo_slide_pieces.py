"""Where the demo slides' tissue pieces sit, where each is cut from and how it is coloured (readers/demo/demo_slides.py
writes the slides).

Every slide holds 10-14 pieces of 224x224 px on the 224-px grid of its 2048x1536 canvas, in 1-3
separate clusters. Most pieces are stroma (the stromal image). The 2-4 other pieces are cut
from the tumour-nest image, and they make the label: on `tumour` slides they are tumour-cell
crops, on `stroma` slides lymphocyte-rich crops of the same image. The nest image's nucleus-type
mask (hgsc_nest_type_mask.npz) picks the crops: tumour = neoplastic nucleus pixels >= 15 % of the
crop; inflammation = inflammatory pixels >= 8 % and neoplastic < 0.5 %.

Colour (so that what tells the classes apart is what the nuclei look like, not colour statistics):
- Uncorrected, the two kinds differ in colour statistics: tumour crops average RGB (142, 87, 177)
  with per-channel spread (42, 46, 26), lymphocyte crops (147, 104, 173) and (66, 72, 44). A
  randomly initialised CNN reads that alone: ABMIL on its features scored test balanced accuracy
  1.000, as with ImageNet weights (docs/slides.md). So every nest piece is moved to one shared
  per-channel mean and spread, NEST_MEAN_RGB and NEST_STD_RGB (about midway between the kinds), a
  Reinhard-style colour transfer (Reinhard et al. 2001, there in l-alpha-beta space, here per RGB channel).
- Then every piece of a slide gets that slide's stain and scanner: haematoxylin and eosin amounts
  (optical density in the Ruifrok-Johnston basis, skimage's rgb_from_hed) scaled and shifted, as in
  the HED augmentation of Tellez et al. 2018, then brightness and contrast, drawn once per slide and
  independent of the class (a site effect). The glass is not restained.

No pixel serves two splits. Stroma crops lie in a band of rows of the stromal image (train
0-899, val 900-1199, test 1200-1499). Nest crops lie inside one 300-px block of the nest image,
and the blocks go to the splits by the tile demo's Latin square (readers/demo/hgsc_tiles.py), which
gives every split tumour and lymphocyte blocks.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from evalsuite.readers.demo.hgsc_tiles import split_of

PIECE_PX = 224
GRID_COLS, GRID_ROWS = 2048 // PIECE_PX, 1536 // PIECE_PX
PIECES_PER_SLIDE = (10, 14)  # inclusive ranges
CLUSTERS_PER_SLIDE = (1, 3)
NEST_PIECES_PER_SLIDE = (2, 4)
NEST_SOURCE_OF_LABEL = {"tumour": "tumour", "stroma": "inflammation"}
STROMA_ROWS = {"train": (0, 900), "val": (900, 1200), "test": (1200, 1500)}
NEST_BLOCK_PX = 300
CROP_STEP_PX = 4
NEOPLASTIC, INFLAMMATORY = 3, 2  # values of the type mask
NEST_MEAN_RGB, NEST_STD_RGB = (144.0, 96.0, 176.0), (55.0, 60.0, 35.0)
STAIN_SCALE, STAIN_SHIFT = 0.2, 0.03  # haematoxylin and eosin: amount x U(1 -+ scale) + U(-+ shift), in OD units
BRIGHTNESS, CONTRAST = 0.04, 0.1  # + U(-+ brightness) x 255, contrast x U(1 -+ contrast) about mid-grey
# Stain optical-density vectors (rows: haematoxylin, eosin, DAB), Ruifrok & Johnston 2001, as skimage.color's
# rgb_from_hed, each row normalised to unit length.
RGB_FROM_HED = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])
RGB_FROM_HED = RGB_FROM_HED / np.linalg.norm(RGB_FROM_HED, axis=1, keepdims=True)
HED_FROM_RGB = np.linalg.inv(RGB_FROM_HED)
MIN_TUMOUR_SHARE = 0.15
MIN_INFLAMMATORY_SHARE, MAX_NEOPLASTIC_IN_INFLAMMATION = 0.08, 0.005
_NEIGHBOURS = ((-1, 0), (1, 0), (0, -1), (0, 1))


@dataclass(frozen=True)
class Piece:
    """One pasted piece: its place on the slide, where it was cut from which source, and how it was turned."""
    left_level0_px: int
    top_level0_px: int
    source: str  # "stroma" (stromal image), "tumour" or "inflammation" (nest image)
    crop_left_px: int
    crop_top_px: int
    quarter_turns: int  # np.rot90's k: counter-clockwise
    flipped: int  # 1: mirrored left-right after the turn


PIECE_COLUMNS = tuple(field.name for field in dataclasses.fields(Piece))


@dataclass(frozen=True)
class Stain:
    """One slide's stain and scanner, applied to every piece of it."""
    haematoxylin_scale: float
    haematoxylin_shift: float
    eosin_scale: float
    eosin_shift: float
    brightness: float  # a fraction of 255
    contrast: float


STAIN_COLUMNS = tuple(field.name for field in dataclasses.fields(Stain))


def slide_stain(rng: np.random.Generator) -> Stain:
    scales = rng.uniform(1 - STAIN_SCALE, 1 + STAIN_SCALE, size=2)
    shifts = rng.uniform(-STAIN_SHIFT, STAIN_SHIFT, size=2)
    return Stain(float(scales[0]), float(shifts[0]), float(scales[1]), float(shifts[1]),
                 float(rng.uniform(-BRIGHTNESS, BRIGHTNESS)), float(rng.uniform(1 - CONTRAST, 1 + CONTRAST)))


def nest_colour_matched(pixels: np.ndarray) -> np.ndarray:
    """uint8 pixels with each channel moved to NEST_MEAN_RGB and NEST_STD_RGB: no colour statistic of a nest
    piece tells tumour from lymphocytes."""
    values = pixels.astype(np.float64)
    flat = values.reshape(-1, 3)
    moved = (values - flat.mean(axis=0)) / np.maximum(flat.std(axis=0), 1.0) * NEST_STD_RGB + NEST_MEAN_RGB
    return np.clip(np.rint(moved), 0, 255).astype(np.uint8)


def stained(pixels: np.ndarray, stain: Stain) -> np.ndarray:
    """uint8 pixels with the slide's stain amounts (HED optical density) and scanner brightness/contrast."""
    density = -np.log((pixels.reshape(-1, 3).astype(np.float64) + 1) / 256)  # +1: no log(0) on black pixels
    amounts = density @ HED_FROM_RGB
    amounts[:, 0] = amounts[:, 0] * stain.haematoxylin_scale + stain.haematoxylin_shift
    amounts[:, 1] = amounts[:, 1] * stain.eosin_scale + stain.eosin_shift
    rgb = 256 * np.exp(-(amounts @ RGB_FROM_HED)) - 1
    rgb = (rgb - 127.5) * stain.contrast + 127.5 + 255 * stain.brightness
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8).reshape(pixels.shape)


def nest_crops(type_mask: np.ndarray) -> dict:
    """{(split, "tumour" | "inflammation"): [(top, left), ...]}: crops of the nest image by nucleus-type share."""
    shares = {kind: _window_sums(type_mask == value) / PIECE_PX**2
              for kind, value in (("neoplastic", NEOPLASTIC), ("inflammatory", INFLAMMATORY))}
    crops = {}
    rows, cols = type_mask.shape
    for block_top in range(0, rows, NEST_BLOCK_PX):
        for block_left in range(0, cols, NEST_BLOCK_PX):
            split = split_of(block_top, block_left, NEST_BLOCK_PX)
            for top in range(block_top, block_top + NEST_BLOCK_PX - PIECE_PX + 1, CROP_STEP_PX):
                for left in range(block_left, block_left + NEST_BLOCK_PX - PIECE_PX + 1, CROP_STEP_PX):
                    kind = _crop_kind(shares["neoplastic"][top, left], shares["inflammatory"][top, left])
                    if kind:
                        crops.setdefault((split, kind), []).append((top, left))
    return crops


def _crop_kind(neoplastic: float, inflammatory: float) -> str | None:
    if neoplastic >= MIN_TUMOUR_SHARE:
        return "tumour"
    if inflammatory >= MIN_INFLAMMATORY_SHARE and neoplastic < MAX_NEOPLASTIC_IN_INFLAMMATION:
        return "inflammation"
    return None


def _window_sums(mask: np.ndarray) -> np.ndarray:
    """[top, left] -> pixels set in the PIECE_PX square at (top, left), from an integral image."""
    integral = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), dtype=np.int64)
    integral[1:, 1:] = mask.cumsum(axis=0).cumsum(axis=1)
    p = PIECE_PX
    return integral[p:, p:] - integral[:-p, p:] - integral[p:, :-p] + integral[:-p, :-p]


def slide_pieces(rng: np.random.Generator, split: str, label: str, crops: dict, source_px: int) -> list[Piece]:
    """One slide's pieces in the order they were grown: stroma pieces and 2-4 nest pieces of the label's kind."""
    cells = piece_cells(rng)
    nest_count = int(rng.integers(NEST_PIECES_PER_SLIDE[0], NEST_PIECES_PER_SLIDE[1] + 1))
    nest_indices = rng.choice(len(cells), size=nest_count, replace=False).tolist()
    top, bottom = STROMA_ROWS[split]
    pieces = []
    for index, (row, col) in enumerate(cells):
        if index in nest_indices:
            source = NEST_SOURCE_OF_LABEL[label]
            candidates = crops[(split, source)]
            crop_top, crop_left = candidates[int(rng.integers(len(candidates)))]
        else:
            source = "stroma"
            crop_top = int(rng.integers(top, bottom - PIECE_PX + 1))
            crop_left = int(rng.integers(0, source_px - PIECE_PX + 1))
        pieces.append(Piece(col * PIECE_PX, row * PIECE_PX, source, int(crop_left), int(crop_top),
                            int(rng.integers(4)), int(rng.integers(2))))
    return pieces


def piece_cells(rng: np.random.Generator) -> list[tuple[int, int]]:
    """(row, col) grid cells of one slide's pieces, in the order they were grown: 1-3 separate clusters."""
    n_pieces = int(rng.integers(PIECES_PER_SLIDE[0], PIECES_PER_SLIDE[1] + 1))
    n_clusters = int(rng.integers(CLUSTERS_PER_SLIDE[0], CLUSTERS_PER_SLIDE[1] + 1))
    owner = np.full((GRID_ROWS, GRID_COLS), -1, dtype=np.int64)
    clusters = []
    for cluster in range(n_clusters):  # seeds in separate thirds (or halves) of the columns: clusters stay apart
        low, high = cluster * GRID_COLS // n_clusters, (cluster + 1) * GRID_COLS // n_clusters
        free = [(row, col) for row in range(GRID_ROWS) for col in range(low, high)
                if not _touches_other(owner, (row, col), cluster)]
        seed = free[int(rng.integers(len(free)))]
        owner[seed] = cluster
        clusters.append([seed])
    while sum(len(cells) for cells in clusters) < n_pieces:
        cluster = int(rng.integers(n_clusters))
        frontier = _frontier(owner, clusters[cluster], cluster, keep_apart=True)
        frontier = frontier or _frontier(owner, clusters[cluster], cluster, keep_apart=False)
        if not frontier:
            continue
        cell = frontier[int(rng.integers(len(frontier)))]
        owner[cell] = cluster
        clusters[cluster].append(cell)
    return [cell for cells in clusters for cell in cells]


def _frontier(owner: np.ndarray, cells: list, cluster: int, keep_apart: bool) -> list[tuple[int, int]]:
    """Free cells 4-adjacent to `cells`, sorted; with keep_apart, none touching another cluster."""
    return sorted({cell for grown in cells for cell in _neighbours(grown)
                   if owner[cell] == -1 and not (keep_apart and _touches_other(owner, cell, cluster))})


def _neighbours(cell) -> list[tuple[int, int]]:
    moved = [(cell[0] + d_row, cell[1] + d_col) for d_row, d_col in _NEIGHBOURS]
    return [(row, col) for row, col in moved if 0 <= row < GRID_ROWS and 0 <= col < GRID_COLS]


def _touches_other(owner: np.ndarray, cell, cluster: int) -> bool:
    return any(owner[neighbour] not in (-1, cluster) for neighbour in _neighbours(cell))
