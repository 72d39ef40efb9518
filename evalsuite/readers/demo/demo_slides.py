"""The offline demo slides: small whole-slide images built from two real H&E images shipped with evalsuite.

How the slides are made (a Camelyon-like task: does this slide contain tumour?):
- Sources: `evalsuite/data/hgsc_nest/hgsc_nest.jpg` (1500x1500, a tumour nest of a high-grade serous ovarian
  carcinoma with lymphocytes and stroma; its nucleus-type mask picks the crops) and
  `evalsuite/data/hgsc_stromal/hgsc_stromal_he.jpg` (1500x1500, stroma); both are declared SOURCE_MPP = 0.5 um/px
  (their source states no scan resolution).
- A slide is a 2048 x 1536 px level-0 canvas at 0.5 um/px of glass-like background, RGB (240, 238, 242) plus
  uniform integer noise in [-3, 3] per channel, one 512x512 block repeated (so tissue detection sees real
  background, not a flat colour), on which 10-14 pieces of 224x224 px are pasted on the 224-px grid in 1-3
  clusters, each piece rotated by a random multiple of 90 degrees and flipped left-right with p = 0.5.
  Which pieces, cut from where, how coloured, and how splits stay disjoint: readers/demo/demo_slide_pieces.py. In
  short, 2-4 pieces per slide come from the nest image (tumour crops on `tumour` slides, lymphocyte-rich crops on
  `stroma` slides), the rest from the stromal image; every nest piece is moved to one shared per-channel colour
  mean and spread (so colour statistics do not give the label away), then all pieces of a slide get that slide's
  stain and scanner (haematoxylin/eosin amounts, brightness, contrast), drawn independently of the class.
- Counts: SLIDES_PER_CLASS per split and class (train 12, val 6, test 8), one patient per slide.
- Files: a pyramid at downsamples 1, 2, 4 (each level a 2x2 box average of the previous; a further level only
  while its long side exceeds 256 px), 256x256 tiles, each JPEG quality 90, YCbCr 4:2:0, encoded by Pillow
  (so no optional codec package is needed and every install writes the same bytes). Even-numbered slides are
  Aperio-SVS-like (`.svs`, ImageDescription "Aperio Image Library ...|MPP = 0.5|AppMag = 20"), odd-numbered ones
  generic tiled TIFFs (`.tif`, mpp in XResolution/YResolution, unit centimeter), so both OpenSlide paths run.
- `slides.csv`: slide_path (relative to the folder), label, split, patient, mpp (empty: the files state it);
  `pieces.csv`: every piece's slide, level-0 place, source, crop position, quarter turns and flip;
  `stains.csv`: every slide's stain and scanner parameters.
- Determinism: one numpy Generator per slide seeded with (SEED, split, label, index), drawing the pieces' cells,
  sources, crops and turns, then the stain, then the noise, in a fixed order: the same sources, numpy and Pillow
  give the same pixels.

Licence of the sources: BSD 3-Clause, copyright (c) 2024-2025 HautaniemiLab, from the `histolytics` 0.3.0 wheel
(`histolytics/data/`); the licence text is in the LICENSE files beside each source image and is copied into
every built folder, since the slides are derived copies.
"""

import csv
import dataclasses
import errno
import io
import os
import shutil
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.demo.demo_slide_pieces import (
    PIECE_COLUMNS,
    PIECE_PX,
    STAIN_COLUMNS,
    Piece,
    Stain,
    nest_colour_matched,
    nest_crops,
    slide_pieces,
    slide_stain,
    stained,
)
from evalsuite.runtime import stages
from evalsuite.storage.fsio import exclusive_lock, fsync_dir
from evalsuite.tasks.resources import shipped_data_dir

FOLDER_NAME = "demo_slide-v3"  # v3: nest pieces colour-matched, a stain per slide
SEED = 16
SOURCE_MPP = 0.5
SOURCE_PX = 1500
CANVAS_W_PX, CANVAS_H_PX = 2048, 1536
BACKGROUND_RGB = (240, 238, 242)
NOISE_AMPLITUDE = 3
NOISE_BLOCK_PX = 512  # the noise is one block repeated: drawing 9 M values per slide took half the build time
SLIDES_PER_CLASS = {"train": 12, "val": 6, "test": 8}
LABELS = ("stroma", "tumour")  # the negative class first
TIFF_TILE_PX = 256
MIN_LEVEL_LONG_PX = 256
JPEG_QUALITY = 90
TIFF_JPEG, TIFF_YCBCR, YCBCR_SUBSAMPLING_TAG = 7, 6, 530  # TIFF tag values and the YCbCrSubSampling tag code
CSV_COLUMNS = ("slide_path", "label", "split", "patient", "mpp")
IMAGES = {"stroma": ("hgsc_stromal", "hgsc_stromal_he.jpg"), "nest": ("hgsc_nest", "hgsc_nest.jpg")}
NEST_TYPE_MASK = ("hgsc_nest", "hgsc_nest_type_mask.npz")
BUILD_MB = 30  # the built slides take 28 MB (v3)


def data_home() -> Path:
    return Path(os.environ.get("EVALSUITE_DATA_HOME") or Path.home() / ".cache" / "evalsuite")


def demo_slides_folder() -> Path:
    """The built demo slides under the data home, built once (under a lock: parallel jobs wait, not race)."""
    folder = data_home() / FOLDER_NAME
    if (folder / "slides.csv").is_file():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(folder.parent / f".{FOLDER_NAME}.lock"):
            if not (folder / "slides.csv").is_file():
                _remove_stale_builds(folder)
                # Said once, on the build: where the 28 MB go, and how to move them (a run reads them from there).
                stages.say(f"building the demo slides once, into {folder} (about {BUILD_MB} MB; EVALSUITE_DATA_HOME "
                           "sets another folder)")
                build_demo_slides(folder)
    except OSError as exc:
        raise _build_error(folder, exc) from None
    return folder


def _build_error(folder: Path, exc: OSError) -> EvalsuiteError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a writable folder would not help: the disk is full
        return EvalsuiteError(f"cannot build the demo slides in {folder}: {exc.strerror} (the build needs about "
                              f"{BUILD_MB} MB there); free space on that disk or set EVALSUITE_DATA_HOME to a folder "
                              "on a disk with room")
    return EvalsuiteError(f"cannot build the demo slides in {folder}: {exc.strerror or exc}; set "
                          f"EVALSUITE_DATA_HOME to a writable folder")


def _remove_stale_builds(folder: Path) -> None:
    """Staging folders of builds that were killed; under the lock no other build is running."""
    for stale in sorted(folder.parent.glob(f".{folder.name}.*.tmp")):
        shutil.rmtree(stale, ignore_errors=True)


def build_demo_slides(folder: Path) -> Path:
    """Write the demo slides, slides.csv and the sources' LICENSE into `folder`, which appears whole or not at
    all: everything is written into a staging folder beside it that is renamed into place at the end."""
    folder = Path(folder)
    if folder.exists():
        raise EvalsuiteError(f"{folder} already exists; move it aside (or remove it) and build again")
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        _write_build(staging)
        os.rename(staging, folder)
        fsync_dir(folder.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _write_build(staging: Path) -> None:
    images = {name: _load_source(*parts) for name, parts in IMAGES.items()}
    sources = {"stroma": images["stroma"], "tumour": images["nest"], "inflammation": images["nest"]}
    crops = nest_crops(_load_type_mask())
    slide_rows, piece_rows, stain_rows = [], [], []
    for split_index, (split, count) in enumerate(SLIDES_PER_CLASS.items()):
        for label_index, label in enumerate(LABELS):
            for index in range(count):
                rng = np.random.default_rng([SEED, split_index, label_index, index])
                pieces = slide_pieces(rng, split, label, crops, SOURCE_PX)
                stain = slide_stain(rng)
                name = f"{split}-{label}-{index:02d}" + (".svs" if index % 2 == 0 else ".tif")
                write_pyramid_tiff(staging / name, slide_canvas(rng, sources, pieces, stain), aperio=index % 2 == 0)
                slide_rows.append((name, label, split, f"{split}-{label}-{index:02d}", ""))
                piece_rows += [(name, *dataclasses.astuple(piece)) for piece in pieces]
                stain_rows.append((name, *(f"{value:.6f}" for value in dataclasses.astuple(stain))))
    _write_csv(staging / "slides.csv", CSV_COLUMNS, slide_rows)
    _write_csv(staging / "pieces.csv", ("slide_path", *PIECE_COLUMNS), piece_rows)
    _write_csv(staging / "stains.csv", ("slide_path", *STAIN_COLUMNS), stain_rows)
    shutil.copyfile(shipped_data_dir() / "hgsc_nest" / "LICENSE", staging / "LICENSE")
    (staging / "README.txt").write_text(
        "Demo whole-slide images made by evalsuite.readers.demo.demo_slides (its docstring says how) from H&E images\n"
        "of the histolytics 0.3.0 wheel, BSD 3-Clause, copyright (c) 2024-2025 HautaniemiLab: see LICENSE.\n"
        "pieces.csv lists every pasted piece: where it sits (level 0), its source image, crop and orientation;\n"
        "stains.csv each slide's stain and scanner (readers/demo/demo_slide_pieces.py says how they colour a piece).\n")


def _write_csv(path: Path, columns, rows) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def _load_type_mask() -> np.ndarray:
    path = shipped_data_dir() / NEST_TYPE_MASK[0] / NEST_TYPE_MASK[1]
    try:
        with np.load(path) as archive:
            return archive["nuc_raster"]
    except (OSError, KeyError, ValueError) as exc:
        raise EvalsuiteError(f"cannot read the shipped mask {path} ({exc}); reinstall evalsuite") from None


def _load_source(folder_name: str, file_name: str) -> np.ndarray:
    path = shipped_data_dir() / folder_name / file_name
    try:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"))
    except OSError as exc:
        raise EvalsuiteError(f"cannot read the shipped image {path} ({exc}); reinstall evalsuite") from None
    if pixels.shape[:2] != (SOURCE_PX, SOURCE_PX):
        raise EvalsuiteError(f"shipped image {path} is {pixels.shape[1]}x{pixels.shape[0]} px, expected "
                             f"{SOURCE_PX}x{SOURCE_PX}; reinstall evalsuite")
    return pixels


def piece_pixels(source_pixels: np.ndarray, piece: Piece) -> np.ndarray:
    crop = source_pixels[piece.crop_top_px:piece.crop_top_px + PIECE_PX,
                         piece.crop_left_px:piece.crop_left_px + PIECE_PX]
    turned = np.rot90(crop, k=piece.quarter_turns)
    return turned[:, ::-1] if piece.flipped else turned


def coloured_piece_pixels(source_pixels: np.ndarray, piece: Piece, stain: Stain) -> np.ndarray:
    """The piece as pasted: nest pieces colour-matched, then every piece in its slide's stain."""
    pixels = piece_pixels(source_pixels, piece)
    return stained(pixels if piece.source == "stroma" else nest_colour_matched(pixels), stain)


def slide_canvas(rng: np.random.Generator, sources: dict, pieces: list[Piece], stain: Stain) -> np.ndarray:
    """One slide's level-0 RGB pixels [CANVAS_H_PX, CANVAS_W_PX, 3]: noisy glass with the pieces pasted on."""
    block = rng.integers(-NOISE_AMPLITUDE, NOISE_AMPLITUDE + 1, size=(NOISE_BLOCK_PX, NOISE_BLOCK_PX, 3),
                         dtype=np.int16) + np.array(BACKGROUND_RGB, dtype=np.int16)
    repeats = (-(-CANVAS_H_PX // NOISE_BLOCK_PX), -(-CANVAS_W_PX // NOISE_BLOCK_PX), 1)
    canvas = np.tile(block.astype(np.uint8), repeats)[:CANVAS_H_PX, :CANVAS_W_PX].copy()
    for piece in pieces:
        canvas[piece.top_level0_px:piece.top_level0_px + PIECE_PX,
               piece.left_level0_px:piece.left_level0_px + PIECE_PX] = coloured_piece_pixels(
                   sources[piece.source], piece, stain)
    return canvas


def pyramid_levels(canvas: np.ndarray) -> list[np.ndarray]:
    """Level 0 and its 2x2 box-averaged halvings while the next one's long side exceeds MIN_LEVEL_LONG_PX."""
    levels = [canvas]
    while max(levels[-1].shape[:2]) // 2 > MIN_LEVEL_LONG_PX:
        levels.append(np.asarray(Image.fromarray(levels[-1]).reduce(2)))
    return levels


def write_pyramid_tiff(path: Path, canvas: np.ndarray, aperio: bool, mpp: float = SOURCE_MPP) -> None:
    """A tiled pyramidal JPEG TIFF OpenSlide reads: Aperio-SVS-like (mpp in the description) or generic (mpp in
    the resolution tags). `metadata=None`: tifffile's own JSON description would hide the Aperio one."""
    height, width = canvas.shape[:2]
    with tifffile.TiffWriter(path) as tiff:
        for index, level in enumerate(pyramid_levels(canvas)):
            options = {"shape": level.shape, "dtype": np.uint8, "tile": (TIFF_TILE_PX, TIFF_TILE_PX),
                       "photometric": "rgb", "metadata": None, "subfiletype": 1 if index else 0,
                       "extratags": [(YCBCR_SUBSAMPLING_TAG, "H", 2, (2, 2), True)]}
            if aperio and index == 0:
                options["description"] = (f"Aperio Image Library (evalsuite demo slide) \r\n{width}x{height} "
                                          f"({TIFF_TILE_PX}x{TIFF_TILE_PX}) JPEG/RGB Q={JPEG_QUALITY}"
                                          f"|MPP = {mpp:g}|AppMag = 20")
            elif not aperio:
                pixels_per_cm = 1e4 / (mpp * 2 ** index)
                options.update(resolution=(pixels_per_cm, pixels_per_cm), resolutionunit="CENTIMETER")
            tiff.write(_jpeg_tiles(level), **options)
    _label_as_jpeg(path)


def _jpeg_tiles(level: np.ndarray):
    """The level's tiles, row-major, each a Pillow JPEG stream (YCbCr 4:2:0); edge tiles padded by repetition."""
    height, width = level.shape[:2]
    padded = np.pad(level, ((0, -height % TIFF_TILE_PX), (0, -width % TIFF_TILE_PX), (0, 0)), mode="edge")
    for top in range(0, height, TIFF_TILE_PX):
        for left in range(0, width, TIFF_TILE_PX):
            buffer = io.BytesIO()
            Image.fromarray(padded[top:top + TIFF_TILE_PX, left:left + TIFF_TILE_PX]).save(
                buffer, "JPEG", quality=JPEG_QUALITY, subsampling=2)  # 2: 4:2:0, as the tag says
            yield buffer.getvalue()


def _label_as_jpeg(path: Path) -> None:
    """tifffile encodes JPEG only through imagecodecs, which evalsuite does not require (without it, deflate made
    a 324 MB, 72 s build): the tiles are Pillow's JPEG streams written as stored bytes, and the tags are then set
    to what the tiles hold, JPEG-compressed YCbCr."""
    with tifffile.TiffFile(path, mode="r+b") as tiff:
        for page in tiff.pages:
            page.tags["Compression"].overwrite(TIFF_JPEG)
            page.tags["PhotometricInterpretation"].overwrite(TIFF_YCBCR)
