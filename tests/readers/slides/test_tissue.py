"""Tissue detection (Otsu on HSV saturation) and the tile grid at a target MPP (issue 16)."""

import numpy as np
import pytest
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.demo.demo_slides import BACKGROUND_RGB, write_pyramid_tiff
from evalsuite.readers.slides import tissue
from evalsuite.readers.slides.tissue import otsu_threshold, read_tile, tile_grid, tissue_mask
from evalsuite.readers.slides.wsi import open_slide
from evalsuite.tasks.resources import shipped_data_dir

WIDTH_PX, HEIGHT_PX = 2048, 1536  # levels at downsample 1, 2, 4
REGION_LEFT_PX, REGION_TOP_PX, REGION_W_PX, REGION_H_PX = 448, 224, 896, 672  # 4 x 3 tiles of 224 px


def glass(seed: int = 0) -> np.ndarray:
    noise = np.random.default_rng(seed).integers(-3, 4, size=(HEIGHT_PX, WIDTH_PX, 3))
    return (noise + np.array(BACKGROUND_RGB)).astype(np.uint8)


@pytest.fixture(scope="module")
def tissue_slide(tmp_path_factory):
    """81 % noisy glass, 19 % real stroma in one known region; 0.5 um/px, generic TIFF."""
    pixels = glass()
    stroma = np.asarray(Image.open(shipped_data_dir() / "hgsc_stromal" / "hgsc_stromal_he.jpg").convert("RGB"))
    pixels[REGION_TOP_PX:REGION_TOP_PX + REGION_H_PX, REGION_LEFT_PX:REGION_LEFT_PX + REGION_W_PX] = \
        stroma[:REGION_H_PX, :REGION_W_PX]
    path = tmp_path_factory.mktemp("tissue") / "region.tif"
    write_pyramid_tiff(path, pixels, aperio=False)
    return path


def test_otsu_matches_a_worked_example_and_brute_force():
    # [2, 3, 3, 9, 10]: t=3 splits {2,3,3} (mean 2.67) from {9,10} (mean 9.5): 0.6 * 0.4 * 6.83^2 = 11.2, the
    # largest; every t in 3..8 gives it and the first is taken.
    assert otsu_threshold(np.array([2, 3, 3, 9, 10], dtype=np.uint8)) == 3
    rng = np.random.default_rng(0)
    values = np.clip(np.concatenate([rng.normal(60, 15, 3000), rng.normal(170, 25, 1000)]), 0, 255).astype(np.uint8)
    within = [values[values <= t].var() * (values <= t).sum() + values[values > t].var() * (values > t).sum()
              if 0 < (values <= t).sum() < len(values) else np.inf for t in range(255)]
    assert otsu_threshold(values) == int(np.argmin(within))  # max between-class = min within-class variance


def test_otsu_equals_skimage():
    filters = pytest.importorskip("skimage.filters")
    rng = np.random.default_rng(1)
    for _ in range(5):
        values = rng.choice(256, size=5000, p=rng.dirichlet(np.ones(256) * 0.3)).astype(np.uint8)
        assert otsu_threshold(values) == filters.threshold_otsu(values)


def test_log_scale_puts_the_threshold_between_glass_and_pale_tissue():
    values = np.repeat(np.array([5, 45, 150], dtype=np.uint8), [800, 70, 130])  # glass, pale stroma, nuclei
    assert otsu_threshold(values) == 45  # linear Otsu calls pale stroma glass
    assert otsu_threshold(values, scale=np.log1p) == 5


def test_tissue_tiles_lie_in_the_tissue_region_and_none_in_glass(tissue_slide):
    with open_slide(tissue_slide) as slide:
        grid = tile_grid(slide, 0.5, 0.5, 224, 0.5)
    expected = [(x, y) for y in range(REGION_TOP_PX, REGION_TOP_PX + REGION_H_PX, 224)
                for x in range(REGION_LEFT_PX, REGION_LEFT_PX + REGION_W_PX, 224)]  # row-major
    assert grid.coords_level0.dtype == np.int64 and grid.coords_level0.tolist() == [list(c) for c in expected]
    assert grid.tissue_fraction.dtype == np.float32 and (grid.tissue_fraction > 0.7).all()
    assert (grid.level, grid.read_size_px, grid.tile_size_px) == (0, 224, 224)


def test_a_blank_slide_has_no_tissue(tmp_path):
    path = tmp_path / "blank.svs"
    write_pyramid_tiff(path, glass(seed=3), aperio=True)
    with open_slide(path) as slide:
        assert not tissue_mask(slide).any()  # the floor: Otsu alone would split the glass's noise in two
        with pytest.raises(EvalsuiteError) as raised:
            tile_grid(slide, 0.5, 0.5, 224, 0.5)
    message = str(raised.value)
    assert str(path) in message and "no tissue found" in message and "min_tissue_fraction" in message
    assert "\n" not in message


def test_level_and_read_size_at_the_target_mpp(tissue_slide):
    with open_slide(tissue_slide) as slide:
        coarse = tile_grid(slide, 0.5, 1.0, 224, 0.5)  # 448 level-0 px per tile: level 1 (downsample 2) as is
        assert (coarse.level, coarse.read_size_px, coarse.tile_size_px, coarse.side_level0_px) == (1, 224, 224, 448)
        tile = read_tile(slide, coarse, 0)
        x, y = coarse.coords_level0[0]
        assert tile.size == (224, 224)
        assert np.array_equal(np.asarray(tile), np.asarray(slide.read_region((x, y), 1, (224, 224))))
        between = tile_grid(slide, 0.5, 0.75, 224, 0.5)  # downsample 1.5: level 0, 336 px shrunk to 224
        assert (between.level, between.read_size_px) == (0, 336)
        assert read_tile(slide, between, 0).size == (224, 224)
        with pytest.raises(EvalsuiteError, match="tiles would be enlarged"):
            tile_grid(slide, 0.5, 0.25, 224, 0.5)
        with pytest.raises(EvalsuiteError, match="smaller than one 224-px tile"):
            tile_grid(slide, 0.5, 8.0, 224, 0.5)  # 3584 level-0 px per tile


def test_a_large_level_is_shrunk_in_strips_like_a_whole_read(tissue_slide, monkeypatch):
    monkeypatch.setattr(tissue, "MASK_MIN_LONG_PX", 4096)  # only level 0 (2048 px) is "big enough"
    monkeypatch.setattr(tissue, "MASK_MAX_LONG_PX", 700)  # shrink by 3
    monkeypatch.setattr(tissue, "STRIP_PX", 2048 * 100)  # strips of 99 rows: 16 of them, the last one short
    with open_slide(tissue_slide) as slide:
        strips = tissue._mask_image(slide)
        whole = slide.read_region((0, 0), 0, slide.dimensions).reduce(3)
    assert strips.size == whole.size == (683, 512)
    assert np.array_equal(np.asarray(strips), np.asarray(whole))


def test_tissue_fractions_average_the_mask_over_each_tile():
    mask = np.zeros((40, 60), dtype=bool)  # a mask at a quarter of level 0 (240 x 160 px)
    mask[:20, :30] = True
    mask[20:30, 30:60] = True
    coords = np.array([[0, 0], [120, 0], [0, 80], [120, 80]])
    fractions = tissue._tissue_fractions(mask, (240, 160), coords, 120.0)
    assert fractions.tolist() == [pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0, 0.5]  # the last one clipped


def test_saturation_is_the_hsv_formula():
    rgb = np.random.default_rng(2).integers(0, 256, size=(64, 64, 3)).astype(np.uint8)
    high, low = rgb.max(axis=2).astype(int), rgb.min(axis=2).astype(int)
    expected = (high - low) * 255 // np.maximum(high, 1)
    assert np.array_equal(tissue.saturation_u8(Image.fromarray(rgb)), expected)


@pytest.mark.parametrize("input_px", [224, 160])  # the model takes the tile as it is / a resized one
def test_slide_tiles_batches_equal_the_model_transform_bit_for_bit(tissue_slide, input_px):
    import torch
    from torch.utils.data import default_collate

    from evalsuite.models.transforms import build_transform
    from evalsuite.readers.slides.base import SlideLayout, SlideTiles

    with open_slide(tissue_slide) as slide:
        grid = tile_grid(slide, 0.5, 0.5, 224, 0.5)
    # The grid's tissue tiles plus one hanging over the slide's right edge: white where nothing was scanned.
    coords = np.concatenate([grid.coords_level0, [[WIDTH_PX - 100, 0]]]).astype(np.int64)
    layout = SlideLayout(["region"], [str(tissue_slide)], np.array([0, len(coords)]), coords, [0], [224], 224)
    config = {"input_size": (3, input_px, input_px), "interpolation": "bicubic", "mean": (0.485, 0.456, 0.406),
              "std": (0.229, 0.224, 0.225)}
    transform = build_transform(config)
    tiles = SlideTiles(layout, transform)
    with open_slide(tissue_slide) as slide:
        expected = torch.stack([transform(slide.read_region(tuple(xy), 0, (224, 224))) for xy in coords])
    assert expected[-1, :, :, -1].min() > 2  # beyond the edge: white, (1 - mean) / std > 2 in every channel
    assert torch.equal(tiles[len(coords) - 1][0], expected[-1])  # one item: the transform's output, as before
    indices = list(range(len(coords)))
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):  # read on one thread, and on a pool of two (no DataLoader worker)
            torch.set_num_threads(threads)
            items = tiles.__getitems__(indices)
            assert items[0][0].dtype == torch.uint8 and tuple(items[0][0].shape) == (input_px, input_px, 3)
            batch = tiles.prepare_batch(default_collate(items)[0])
            assert batch.is_contiguous(memory_format=torch.channels_last)
            assert batch.dtype == torch.float32 and torch.equal(batch, expected)
    finally:
        torch.set_num_threads(previous)
    # Any other transform runs whole per tile, and prepare_batch leaves the batch alone.
    other = SlideTiles(layout, lambda tile: torch.from_numpy(np.asarray(tile, dtype=np.float32)))
    assert other.prepare_batch(expected) is expected
    with open_slide(tissue_slide) as slide:
        first = np.asarray(read_tile(slide, grid, 0), dtype=np.float32)
    assert torch.equal(other[0][0], torch.from_numpy(first))
