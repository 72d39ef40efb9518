"""Whole-slide images on OpenSlide: opening (one-line errors naming the file), pyramid levels, microns per pixel.

`open_slide(path)` gives a `Slide` (also a context manager); `cached_slide(path)` gives a shared one from a small
per-process LRU of open handles, because DataLoader workers read many tiles of few slides and opening a slide
(parsing its TIFF directories, hashing its smallest level) costs far more than reading one tile.

What OpenSlide 4.0.1 (openslide-bin) does with the two TIFF flavours the demo slides use, checked on files
written by tifffile:
- An Aperio SVS is recognised (vendor `aperio`) when the first directory's ImageDescription starts with
  "Aperio"; `MPP = 0.5` in its `|key = value` list becomes `openslide.mpp-x/-y`; every tiled directory is a level.
  tifffile adds its own JSON ImageDescription unless written with `metadata=None`, and then the file is read as
  a one-level generic TIFF.
- A generic tiled TIFF (vendor `generic-tiff`): the first directory and every later tiled one marked
  NewSubfileType = 1 (reduced resolution) are the levels; unmarked, only the first is. `openslide.mpp-x/-y` come
  from XResolution/YResolution when ResolutionUnit is centimeter or inch (none with unit "none" or no tags).
  A stripped (untiled) TIFF is refused as unsupported.
- Compression, both flavours: JPEG (YCbCr, as tifffile+imagecodecs and Pillow write it), deflate/zlib, LZW and
  none are read; WebP and JPEG 2000 as tifffile writes them (codes 50001, 34712) are refused at open with
  "Unsupported TIFF compression".
- A path that is not a regular file (a FIFO, a socket, a device) is refused before it is opened: opening a FIFO
  waits for a writer forever, whatever `--skip-bad-slides` says.
- A missing file and a text file are both `OpenSlideUnsupportedFormatError` ("Unsupported or missing image
  file"); a truncated file is that or, when the directories survive, `OpenSlideError` ("Cannot hash TIFF tiles:
  Short read ..."). A zeroed level-0 tile opens (only the smallest level is hashed) and fails at its read
  (`OpenSlideError`, "Not a JPEG file" / "ZIPDecode: Decoding error"); after that every read of the handle
  fails, so a failed handle is marked broken and the cache reopens it.
"""

import numbers
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

import openslide
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.fsio import fs_errors

LEVEL_TOLERANCE = 0.01  # real pyramids have downsamples like 4.0005 (level sizes are rounded): 4.0005 counts as 4
MPP_AGREEMENT = 0.01  # mpp-x and mpp-y closer than this are one value written twice (rounding)
MAX_OPEN_SLIDES = 8  # per process: a worker reads tiles of one slide at a time, a few in flight at most
WHITE = (255, 255, 255)


class Slide:
    """One open whole-slide image. Sizes are (width, height) in pixels; locations are level-0 (x, y)."""

    def __init__(self, path: Path, handle: openslide.OpenSlide):
        self.path = Path(path)
        self._handle = handle
        self.broken = False  # an OpenSlide handle that failed once fails forever: the cache reopens it
        self.dimensions = handle.dimensions
        self.level_count = handle.level_count
        self.level_dimensions = handle.level_dimensions
        self.level_downsamples = handle.level_downsamples
        self.vendor = handle.properties.get(openslide.PROPERTY_NAME_VENDOR)
        self.mpp = _metadata_mpp(handle.properties)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def read_region(self, location_level0_xy, level: int, size_wh) -> Image.Image:
        """RGB pixels of `size_wh` at `level`, top-left at level-0 `location_level0_xy`; where nothing was scanned
        (outside the slide or its scanned area) the pixels are white, as glass looks, not black."""
        rgba = self._read_rgba(location_level0_xy, level, size_wh)
        # The alpha band's extrema alone: getextrema() would scan all four bands (~0.1 ms more a 224-px tile).
        return rgba.convert("RGB") if _opaque(rgba) else _on_white(rgba)

    def _read_rgba(self, location_level0_xy, level: int, size_wh) -> Image.Image:
        try:
            return self._handle.read_region(tuple(int(v) for v in location_level0_xy), int(level),
                                            tuple(int(v) for v in size_wh))
        except openslide.OpenSlideError as exc:
            self.broken = True
            raise damaged_error(self.path, exc) from None

    def thumbnail_level_for(self, min_long_px: int) -> int:
        """The lowest-resolution level whose long side is still >= `min_long_px` (level 0 if none is)."""
        for level in range(self.level_count - 1, -1, -1):
            if max(self.level_dimensions[level]) >= min_long_px:
                return level
        return 0

    def best_level_for_downsample(self, downsample: float) -> int:
        """The lowest-resolution level whose downsample is <= `downsample` (within LEVEL_TOLERANCE): a tile read
        there is shrunk to the target size, never enlarged."""
        fitting = [level for level, level_ds in enumerate(self.level_downsamples)
                   if level_ds <= downsample * (1 + LEVEL_TOLERANCE)]
        return max(fitting, default=0)


def _opaque(rgba: Image.Image) -> bool:
    return rgba.getchannel("A").getextrema() == (255, 255)


def _on_white(rgba: Image.Image) -> Image.Image:
    canvas = Image.new("RGB", rgba.size, WHITE)
    canvas.paste(rgba, mask=rgba.getchannel("A"))  # OpenSlide's RGBA is not premultiplied: a plain blend
    return canvas


def _metadata_mpp(properties) -> float | None:
    """Microns per level-0 pixel from OpenSlide's normalised properties; None when the slide states none."""
    values = []
    for key in (openslide.PROPERTY_NAME_MPP_X, openslide.PROPERTY_NAME_MPP_Y):
        try:
            value = float(properties.get(key, ""))
        except ValueError:
            continue
        if value > 0:
            values.append(value)
    if not values:
        return None
    if len(values) == 2 and abs(values[0] - values[1]) > MPP_AGREEMENT * min(values):
        # Tiles are square at one resolution, so one number must stand for both axes; the mean keeps the scale
        # error on each axis at half the difference (some scanners report slightly anisotropic calibrations).
        return (values[0] + values[1]) / 2
    return values[0]


def slide_mpp(slide: Slide, override_mpp: float | None = None) -> float:
    """The card's (or manifest's) mpp when given, else the slide's metadata; an error when neither exists."""
    if override_mpp is not None:
        if not isinstance(override_mpp, numbers.Real) or isinstance(override_mpp, bool) or override_mpp <= 0:
            raise EvalsuiteError(f"slide {slide.path}: mpp must be a positive number of microns per pixel, "
                                 f"got {override_mpp!r}; fix `mpp:` in the task card (or the manifest's mpp column)")
        return float(override_mpp)
    if slide.mpp is None:
        raise EvalsuiteError(f"slide {slide.path} has no microns-per-pixel in its metadata; set `mpp:` in the "
                             f"task card (or the manifest's mpp column)")
    return slide.mpp


def damaged_error(path, exc: Exception) -> EvalsuiteError:
    reason = " ".join(str(exc).split())  # one line whatever OpenSlide says
    return EvalsuiteError(f"slide {path} is damaged or truncated ({reason}); copy it again from its source")


def open_slide(path) -> Slide:
    """A new handle on the slide at `path`; every failure is a one-line EvalsuiteError naming the file."""
    path = Path(path)
    if not path.exists():
        raise EvalsuiteError(f"slide file not found: {path}; check the path (or the manifest's slide_path column)")
    if path.is_dir():
        raise EvalsuiteError(f"slide {path} is a folder, not a slide file; point at the slide file itself")
    with fs_errors("read slide", path):
        mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        # Opening a FIFO blocks until something writes to it, and a device never ends: refuse before opening.
        raise EvalsuiteError(f"slide {path} is not a regular file but a {_file_kind(mode)}; point slide_path at the "
                             "slide file itself")
    with fs_errors("read slide", path):
        open(path, "rb").close()  # a permission problem is named as such, not as an unsupported format
    try:
        return Slide(path, openslide.OpenSlide(path))
    except openslide.OpenSlideUnsupportedFormatError:
        raise EvalsuiteError(f"slide {path} is not a whole-slide image OpenSlide can read (unsupported format, or "
                             "truncated); check the copy is complete or convert it to a tiled pyramidal TIFF") from None
    except openslide.OpenSlideError as exc:
        raise damaged_error(path, exc) from None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"))
    return next((name for test, name in kinds if test(mode)), "special file")


class _SlideCache:
    """Open handles of this process by path, the least recently used dropped first. A dropped handle is closed
    when its last user lets go of it (openslide closes on garbage collection), never under a caller's feet."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.lock = threading.Lock()
        self.owner_pid = os.getpid()
        self.slides: OrderedDict[str, Slide] = OrderedDict()

    def get(self, path) -> Slide:
        key = str(Path(path).resolve())
        with self.lock:
            if self.owner_pid != os.getpid():
                # A forked DataLoader worker inherits the parent's handles and their file offsets: sharing them
                # would interleave reads, so the child forgets them and opens its own.
                self.slides, self.owner_pid = OrderedDict(), os.getpid()
            slide = self.slides.get(key)
            if slide is not None and not slide.broken:
                self.slides.move_to_end(key)
                return slide
            self.slides.pop(key, None)
            slide = self.slides[key] = open_slide(path)
            while len(self.slides) > self.capacity:
                self.slides.popitem(last=False)
            return slide

    def clear(self) -> None:
        with self.lock:
            self.slides.clear()


_CACHE = _SlideCache(MAX_OPEN_SLIDES)


def cached_slide(path) -> Slide:
    """A shared open `Slide` for `path` from this process's LRU; do not close it (other callers share it)."""
    return _CACHE.get(path)


def forget_cached_slides() -> None:
    """Drop this process's shared handles (each closes once nobody holds it): before a slide file is replaced."""
    _CACHE.clear()
