"""Whole-slide opening on OpenSlide (issue 16): Aperio-SVS-like and generic tiled TIFF pyramids, mpp, errors."""

import socket
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.demo.demo_slides import write_pyramid_tiff
from evalsuite.readers.slides import wsi
from evalsuite.readers.slides.wsi import cached_slide, open_slide, slide_mpp
from evalsuite.tasks.resources import shipped_data_dir

WIDTH_PX, HEIGHT_PX = 1024, 768


@pytest.fixture(scope="module")
def levels():
    """Real H&E pixels, level 0 and its 2x2 box-averaged halvings (downsamples 1, 2, 4)."""
    nest = Image.open(shipped_data_dir() / "hgsc_nest" / "hgsc_nest.jpg").convert("RGB")
    level0 = nest.crop((0, 0, WIDTH_PX, HEIGHT_PX))
    return [np.asarray(level0), np.asarray(level0.reduce(2)), np.asarray(level0.reduce(4))]


def write_tiff(path, levels, aperio=False, resolution_px_per_cm=(20000.0, 20000.0)):
    """A deflate-compressed (lossless) pyramid written by tifffile directly: an Aperio-like description or the
    resolution tags of a generic TIFF (none when resolution_px_per_cm is None)."""
    with tifffile.TiffWriter(path) as tiff:
        for index, level in enumerate(levels):
            options = {"tile": (256, 256), "photometric": "rgb", "compression": "zlib", "metadata": None,
                       "subfiletype": 1 if index else 0}
            if aperio and index == 0:
                options["description"] = "Aperio Image Library v12.0.15 \r\n1024x768 (256x256) |AppMag = 20|MPP = 0.5"
            elif not aperio and resolution_px_per_cm is not None:
                x_res, y_res = (value / 2 ** index for value in resolution_px_per_cm)
                options.update(resolution=(x_res, y_res), resolutionunit="CENTIMETER")
            tiff.write(level, **options)
    return path


@pytest.mark.parametrize("aperio, suffix, vendor", [(True, ".svs", "aperio"), (False, ".tif", "generic-tiff")])
def test_a_pyramid_opens_with_its_levels_mpp_and_exact_pixels(tmp_path, levels, aperio, suffix, vendor):
    with open_slide(write_tiff(tmp_path / f"slide{suffix}", levels, aperio=aperio)) as slide:
        assert slide.vendor == vendor
        assert slide.dimensions == (WIDTH_PX, HEIGHT_PX)
        assert slide.level_count == 3
        assert slide.level_dimensions == ((1024, 768), (512, 384), (256, 192))
        assert slide.level_downsamples == pytest.approx((1.0, 2.0, 4.0))
        assert slide.mpp == pytest.approx(0.5)
        region = slide.read_region((100, 50), 0, (300, 200))
        assert region.mode == "RGB" and region.size == (300, 200)
        assert np.array_equal(np.asarray(region), levels[0][50:250, 100:400])
        at_level1 = slide.read_region((200, 100), 1, (64, 32))  # location in level-0 pixels
        assert np.array_equal(np.asarray(at_level1), levels[1][50:82, 100:164])


def test_a_jpeg_pyramid_reads_back_within_jpeg_error(tmp_path, levels):
    for aperio, name in ((True, "slide.svs"), (False, "slide.tif")):
        write_pyramid_tiff(tmp_path / name, levels[0], aperio=aperio)
        with open_slide(tmp_path / name) as slide:
            assert slide.mpp == pytest.approx(0.5) and slide.level_downsamples == (1.0, 2.0)  # 256 px: no 3rd
            read = np.asarray(slide.read_region((0, 0), 0, (WIDTH_PX, HEIGHT_PX))).astype(int)
            assert np.abs(read - levels[0]).mean() < 4  # quality 90 on real H&E: ~2.4 grey levels


def test_pixels_outside_the_slide_are_white_not_black(tmp_path, levels):
    with open_slide(write_tiff(tmp_path / "slide.tif", levels)) as slide:
        region = np.asarray(slide.read_region((WIDTH_PX - 40, HEIGHT_PX - 10), 0, (100, 30)))
    assert np.array_equal(region[:10, :40], levels[0][-10:, -40:])
    assert (region[:, 40:] == 255).all() and (region[10:] == 255).all()


def test_anisotropic_mpp_is_the_mean_and_a_rounding_difference_is_not(tmp_path, levels):
    with open_slide(write_tiff(tmp_path / "aniso.tif", levels, resolution_px_per_cm=(20000, 19000))) as slide:
        assert slide.mpp == pytest.approx((0.5 + 1e4 / 19000) / 2)
    with open_slide(write_tiff(tmp_path / "close.tif", levels, resolution_px_per_cm=(20000, 19990))) as slide:
        assert slide.mpp == pytest.approx(0.5)


def test_a_slide_without_mpp_needs_the_card_override(tmp_path, levels):
    path = write_tiff(tmp_path / "no_mpp.tif", levels, resolution_px_per_cm=None)
    with open_slide(path) as slide:
        assert slide.mpp is None
        with pytest.raises(EvalsuiteError) as raised:
            slide_mpp(slide)
        message = str(raised.value)
        assert str(path) in message and "set `mpp:` in the task card" in message and "\n" not in message
        assert slide_mpp(slide, 0.25) == 0.25
        with pytest.raises(EvalsuiteError, match="positive number"):
            slide_mpp(slide, 0)
    with open_slide(write_tiff(tmp_path / "with_mpp.tif", levels)) as slide:
        assert slide_mpp(slide) == pytest.approx(0.5) and slide_mpp(slide, 0.46) == 0.46  # the card wins


def _one_line_error(path) -> str:
    with pytest.raises(EvalsuiteError) as raised:
        open_slide(path)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message
    return message


def test_missing_unsupported_and_truncated_files_are_one_line_errors(tmp_path, levels):
    assert "not found" in _one_line_error(tmp_path / "missing.svs")
    text = tmp_path / "notes.svs"
    text.write_text("not a slide\n")
    assert "not a whole-slide image OpenSlide can read" in _one_line_error(text)
    assert "folder" in _one_line_error(tmp_path)
    whole = write_tiff(tmp_path / "whole.svs", levels, aperio=True).read_bytes()
    for kept in (0.5, 0.999):  # directories lost (unsupported) or the last tiles cut short (damaged)
        truncated = tmp_path / f"truncated_{kept}.svs"
        truncated.write_bytes(whole[:int(len(whole) * kept)])
        assert "truncated" in _one_line_error(truncated)


def test_special_files_are_refused_before_they_are_opened(tmp_path):
    """Issue 24 item 2: a socket and a character device (/dev/null) as slides are named as such; opening them (or a
    FIFO, tests/cli/test_slide_bad_input.py) was tried and gave a format error or a hang."""
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock.svs"))
        assert "is not a regular file but a socket" in _one_line_error(tmp_path / "sock.svs")
    assert "/dev/null is not a regular file but a character device" in _one_line_error(Path("/dev/null"))


def test_a_damaged_tile_fails_at_its_read_and_the_cache_reopens_the_slide(tmp_path, levels):
    path = write_tiff(tmp_path / "damaged.tif", levels)
    with tifffile.TiffFile(path) as tiff:
        offset, size = tiff.pages[0].dataoffsets[0], tiff.pages[0].databytecounts[0]
    data = bytearray(path.read_bytes())
    data[offset:offset + size] = bytes(size)  # the first level-0 tile zeroed: opening still succeeds
    path.write_bytes(bytes(data))
    slide = cached_slide(path)
    with pytest.raises(EvalsuiteError) as raised:
        slide.read_region((0, 0), 0, (64, 64))
    message = str(raised.value)
    assert str(path) in message and "damaged or truncated" in message and "\n" not in message
    assert slide.broken and cached_slide(path) is not slide


def test_best_level_never_upsamples_and_thumbnail_level_is_the_smallest_big_enough(tmp_path, levels):
    with open_slide(write_tiff(tmp_path / "slide.tif", levels)) as slide:
        picks = {ds: slide.best_level_for_downsample(ds) for ds in (0.5, 1, 1.5, 1.97, 1.995, 2, 3, 4, 4.02, 64)}
        assert picks == {0.5: 0, 1: 0, 1.5: 0, 1.97: 0, 1.995: 1, 2: 1, 3: 1, 4: 2, 4.02: 2, 64: 2}
        assert [slide.thumbnail_level_for(px) for px in (100, 256, 300, 512, 600, 5000)] == [2, 2, 1, 1, 0, 0]


def test_cached_slides_are_shared_bounded_and_reopened_when_broken_or_forked(tmp_path, levels, monkeypatch):
    monkeypatch.setattr(wsi, "_CACHE", wsi._SlideCache(capacity=2))
    paths = [write_tiff(tmp_path / f"s{i}.tif", levels) for i in range(3)]
    first = cached_slide(paths[0])
    assert cached_slide(paths[0]) is first and cached_slide(str(paths[0])) is first
    cached_slide(paths[1])
    cached_slide(paths[2])  # evicts the least recently used, paths[0]
    assert len(wsi._CACHE.slides) == 2
    assert np.asarray(first.read_region((0, 0), 0, (8, 8))).shape == (8, 8, 3)  # still usable by its holder
    assert cached_slide(paths[0]) is not first
    second = cached_slide(paths[1])
    second.broken = True
    assert cached_slide(paths[1]) is not second
    monkeypatch.setattr(wsi._CACHE, "owner_pid", -1)  # as seen from a forked DataLoader worker
    assert cached_slide(paths[2]) is not None and wsi._CACHE.slides.keys() == {str(paths[2].resolve())}
