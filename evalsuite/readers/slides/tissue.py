"""Tissue detection and the tile grid of a whole-slide image at a target resolution.

Tissue mask: a low-resolution view of the slide (the lowest-resolution level whose long side is at least
MASK_MIN_LONG_PX, shrunk by an integer factor, strip by strip, to at most MASK_MAX_LONG_PX when the pyramid has
nothing that small) is turned into HSV saturation S = (max - min) / max * 255 per pixel. Stained tissue is
coloured and glass is grey-white, so saturation separates them: Otsu's threshold on the 256-bin histogram of S
(`otsu_threshold`, numpy, the rule of skimage.filters.threshold_otsu) splits the two, and a pixel is tissue
when S is above max(Otsu, SATURATION_FLOOR), background otherwise (white holes in tissue too).

Otsu measures the classes on log(1 + S), not on S: glass is a narrow peak at S ~ 5 and covers most of a slide,
while tissue spreads from pale stroma (S ~ 25-60) to dense nuclei (S > 120). On S itself the widest split is
then pale versus dense tissue: on the demo slides Otsu landed at S = 45-69, the least-covered piece was 31 %
tissue and at min_tissue_fraction 0.5 one slide lost half its pieces. Stain density is multiplicative (optical
density is a log), and on the log scale the glass-to-tissue gap is the widest: Otsu falls at S = 19-22,
every piece is >= 73 % tissue and no glass-only tile is above 2 %.

The floor, 20 of 255 (~0.08): Otsu always splits a histogram in two, so on a blank slide (glass only) it
would cut through the background's noise and call half of the glass tissue. Glass in brightfield scans sits
typically below ~15 (the demo slides' noisy background peaks at ~11), while stained tissue, even pale stroma, is mostly
above 25; 20 lies between, so a blank slide yields no tissue instead of noise.

Tile grid: regular, non-overlapping tiles of `tile_size_px` at `target_mpp`, i.e. a side of
tile_size_px * target_mpp / slide_mpp level-0 pixels, from the slide's top-left corner, whole tiles only; a tile
is kept when the mask's tissue fraction inside it is >= `min_tissue_fraction`. Tiles are read at the
lowest-resolution level whose downsample does not exceed target_mpp / slide_mpp and shrunk to `tile_size_px`.
"""

from dataclasses import dataclass

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.slides.wsi import Slide

MASK_MIN_LONG_PX = 1024  # finer than tiles: a 224-px tile at 0.5 um/px spans >= 2 mask px even on a 50 mm scan
MASK_MAX_LONG_PX = 4096  # a mask image stays a few MB
SATURATION_FLOOR = 20  # of 255: see the module docstring
STRIP_PX = 16 * 2**20  # a level larger than the mask is read in strips of this many pixels (64 MB of RGBA)
UPSAMPLE_TOLERANCE = 0.1  # "20x" scanners report 0.49-0.52 um/px for a nominal 0.5: not a real upsampling
# BILINEAR, not LANCZOS: when shrinking, PIL widens the filter with the factor, so bilinear is an antialiased
# area-weighted average (what a scanner at the coarser resolution would record), and having no negative lobes it
# does not ring (dark halos, overshoot) around nuclei on pale background as Lanczos does. The shrink factor stays
# below one pyramid step (2 or 4), where Lanczos's extra sharpness is small.
RESAMPLE = Image.Resampling.BILINEAR


@dataclass
class TileGrid:
    coords_level0: np.ndarray  # int64 [n, 2]: (x, y) of each tile's top-left at level 0, row-major
    level: int  # the pyramid level tiles are read from
    read_size_px: int  # tile side read at `level`
    tile_size_px: int  # tile side handed out (after the resize)
    tissue_fraction: np.ndarray  # float32 [n]: the mask's tissue share inside each tile
    side_level0_px: float  # tile side in level-0 pixels

    def __len__(self) -> int:
        return len(self.coords_level0)


def otsu_threshold(values_u8: np.ndarray, scale=None) -> int:
    """Otsu's threshold of uint8 values from their 256-bin histogram: the t maximising the between-class variance
    of (<= t, > t), the rule of skimage.filters.threshold_otsu. With `scale` (a function of the bin values, e.g.
    np.log1p) the class means and variances are measured on scale(value) instead; t stays a raw value."""
    hist = np.bincount(np.asarray(values_u8, dtype=np.uint8).ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256, dtype=np.float64)
    levels = levels if scale is None else scale(levels)
    weight_low = np.cumsum(hist)[:-1]
    weight_high = hist.sum() - weight_low
    mass_low = np.cumsum(hist * levels)[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_low = mass_low / weight_low
        mean_high = ((hist * levels).sum() - mass_low) / weight_high
        between = weight_low * weight_high * (mean_low - mean_high) ** 2
    between = np.nan_to_num(between, nan=-1.0)  # an empty class is no split at all
    return int(np.argmax(between))  # the first maximum: the lowest t of a gap between the classes


def saturation_u8(image: Image.Image) -> np.ndarray:
    """HSV saturation, floor((max - min) * 255 / max) per pixel (PIL's HSV: 4x faster than the numpy formula)."""
    return np.asarray(image.convert("RGB").convert("HSV").getchannel("S"))


def saturation_threshold(saturation: np.ndarray) -> int:
    """Pixels above this saturation are tissue: Otsu on log saturation, at least SATURATION_FLOOR."""
    return max(otsu_threshold(saturation, scale=np.log1p), SATURATION_FLOOR)


def tissue_mask(slide: Slide) -> np.ndarray:
    """Boolean [h, w] mask over the whole slide at low resolution: True where there is tissue."""
    saturation = saturation_u8(_mask_image(slide))
    return saturation > saturation_threshold(saturation)


def _mask_image(slide: Slide) -> Image.Image:
    level = slide.thumbnail_level_for(MASK_MIN_LONG_PX)
    width, height = slide.level_dimensions[level]
    shrink = -(-max(width, height) // MASK_MAX_LONG_PX)  # ceil: an integer factor keeps strips aligned
    if shrink == 1:
        return slide.read_region((0, 0), level, (width, height))
    level_ds = slide.level_downsamples[level]
    rows_px = max(1, STRIP_PX // width // shrink) * shrink
    out = Image.new("RGB", (-(-width // shrink), -(-height // shrink)))
    for top in range(0, height, rows_px):
        strip = slide.read_region((0, round(top * level_ds)), level, (width, min(rows_px, height - top)))
        small = strip.reduce(shrink)  # box average: a mask needs colour, not sharpness
        out.paste(small, (0, top // shrink))
    return out


def tile_grid(slide: Slide, slide_mpp: float, target_mpp: float, tile_size_px: int,
              min_tissue_fraction: float) -> TileGrid:
    """The tissue tiles of `slide` at `target_mpp`; an error naming the slide when there is none."""
    if target_mpp < slide_mpp * (1 - UPSAMPLE_TOLERANCE):
        raise EvalsuiteError(f"slide {slide.path} is scanned at {slide_mpp:g} um/px, coarser than the card's "
                             f"target_mpp {target_mpp:g}: tiles would be enlarged; use a target_mpp >= "
                             f"{slide_mpp:g} or slides scanned at a higher resolution")
    downsample = target_mpp / slide_mpp
    side_level0 = tile_size_px * downsample
    width, height = slide.dimensions
    xs = np.round(np.arange(int(width // side_level0)) * side_level0).astype(np.int64)
    ys = np.round(np.arange(int(height // side_level0)) * side_level0).astype(np.int64)
    grid_y, grid_x = np.meshgrid(ys, xs, indexing="ij")  # row-major: y outer, x inner
    coords = np.stack([grid_x.ravel(), grid_y.ravel()], axis=1)
    if not len(coords):
        raise EvalsuiteError(f"slide {slide.path} ({width}x{height} px) is smaller than one {tile_size_px}-px tile "
                             f"at {target_mpp:g} um/px ({side_level0:.0f} level-0 px); lower tile_size_px or "
                             f"target_mpp in the card")
    fraction = _tissue_fractions(tissue_mask(slide), slide.dimensions, coords, side_level0)
    # 0 keeps every tile that touches tissue (TRIDENT's default, min_tissue_proportion=0, slide-encoder runs' rule).
    keep = fraction > 0 if min_tissue_fraction == 0 else fraction >= min_tissue_fraction
    if not keep.any():
        raise EvalsuiteError(f"slide {slide.path}: no tissue found (no {tile_size_px}-px tile at {target_mpp:g} "
                             f"um/px has a tissue fraction >= {min_tissue_fraction:g}); check the slide or lower "
                             f"min_tissue_fraction in the card")
    level = slide.best_level_for_downsample(downsample)
    return TileGrid(coords_level0=coords[keep], level=level,
                    read_size_px=max(1, round(side_level0 / slide.level_downsamples[level])),
                    tile_size_px=tile_size_px, tissue_fraction=fraction[keep].astype(np.float32),
                    side_level0_px=side_level0)


def _tissue_fractions(mask: np.ndarray, dimensions_level0, coords: np.ndarray, side_level0: float) -> np.ndarray:
    """The mask's mean over each tile's footprint, from a summed-area table (one pass whatever the tile count)."""
    mask_h, mask_w = mask.shape
    scale_x, scale_y = mask_w / dimensions_level0[0], mask_h / dimensions_level0[1]
    x0 = np.clip(np.round(coords[:, 0] * scale_x).astype(np.int64), 0, mask_w - 1)
    y0 = np.clip(np.round(coords[:, 1] * scale_y).astype(np.int64), 0, mask_h - 1)
    x1 = np.clip(np.round((coords[:, 0] + side_level0) * scale_x).astype(np.int64), x0 + 1, mask_w)
    y1 = np.clip(np.round((coords[:, 1] + side_level0) * scale_y).astype(np.int64), y0 + 1, mask_h)
    table = np.zeros((mask_h + 1, mask_w + 1), dtype=np.int32)  # <= 4096^2 px: fits
    table[1:, 1:] = mask.cumsum(axis=0, dtype=np.int32).cumsum(axis=1, dtype=np.int32)
    inside = table[y1, x1] - table[y0, x1] - table[y1, x0] + table[y0, x0]
    return inside / ((x1 - x0) * (y1 - y0))


def read_tile(slide: Slide, grid: TileGrid, index: int) -> Image.Image:
    """Tile `index` of `grid` as an RGB image of tile_size_px x tile_size_px."""
    return read_tile_at(slide, grid.coords_level0[index], grid.level, grid.read_size_px, grid.tile_size_px)


def read_tile_at(slide: Slide, location_level0_xy, level: int, read_size_px: int, tile_size_px: int) -> Image.Image:
    """A `read_size_px` square at `level` from level-0 `location_level0_xy`, shrunk to `tile_size_px` if it differs
    (a tiling stored without its TileGrid, e.g. in a feature cache's layout)."""
    tile = slide.read_region(location_level0_xy, level, (read_size_px, read_size_px))
    if read_size_px != tile_size_px:
        tile = tile.resize((tile_size_px, tile_size_px), RESAMPLE)
    return tile
