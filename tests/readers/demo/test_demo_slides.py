"""The offline demo slides (issue 16): deterministic, split without leakage, readable, with tissue where pasted."""

import csv
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.demo import demo_slides
from evalsuite.readers.demo.demo_slide_pieces import (
    NEST_BLOCK_PX,
    NEST_MEAN_RGB,
    NEST_STD_RGB,
    PIECE_COLUMNS,
    PIECE_PX,
    STAIN_COLUMNS,
    STROMA_ROWS,
    Piece,
    Stain,
    nest_colour_matched,
    stained,
)
from evalsuite.readers.demo.demo_slides import FOLDER_NAME, SLIDES_PER_CLASS, coloured_piece_pixels
from evalsuite.readers.demo.hgsc_tiles import split_of
from evalsuite.readers.slides.tissue import tile_grid
from evalsuite.readers.slides.wsi import open_slide, slide_mpp


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def pieces_by_slide(folder: Path) -> dict:
    found = {}
    for row in rows(folder / "pieces.csv"):
        found.setdefault(row["slide_path"], []).append(
            Piece(*(row[name] if name == "source" else int(row[name]) for name in PIECE_COLUMNS)))
    return found


def stains_by_slide(folder: Path) -> dict:
    return {row["slide_path"]: Stain(*(float(row[name]) for name in STAIN_COLUMNS))
            for row in rows(folder / "stains.csv")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    home = tmp_path_factory.mktemp("data_home")
    stale = home / f".{FOLDER_NAME}.12345.tmp"  # left by a build that was killed
    stale.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALSUITE_DATA_HOME", str(home))
        folder = demo_slides.demo_slides_folder()
    assert folder == home / FOLDER_NAME and not stale.exists()
    return folder


def test_the_build_is_deterministic(built, tmp_path):
    again = demo_slides.build_demo_slides(tmp_path / "again")
    names = sorted(path.name for path in built.iterdir())
    assert names == sorted(path.name for path in again.iterdir())
    for name in names:  # byte for byte: slides.csv, pieces.csv and every slide file
        assert (again / name).read_bytes() == (built / name).read_bytes(), name
    for name in ("train-stroma-00.svs", "train-stroma-01.tif", "test-tumour-00.svs", "test-tumour-01.tif"):
        with open_slide(built / name) as first, open_slide(again / name) as second:
            size = first.dimensions  # decoded: a full level-0 read takes 0.15 s, so four slides, not all
            assert np.array_equal(np.asarray(first.read_region((0, 0), 0, size)),
                                  np.asarray(second.read_region((0, 0), 0, size)))


def test_counts_per_split_and_class_and_one_patient_per_slide(built):
    slides = rows(built / "slides.csv")
    assert list(slides[0]) == ["slide_path", "label", "split", "patient", "mpp"]
    counts = Counter((row["split"], row["label"]) for row in slides)
    assert counts == {(split, label): count for split, count in SLIDES_PER_CLASS.items()
                      for label in ("stroma", "tumour")}
    assert len({row["patient"] for row in slides}) == len(slides)
    assert all(row["mpp"] == "" for row in slides)
    assert {Path(row["slide_path"]).suffix for row in slides} == {".svs", ".tif"}
    assert (built / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_every_slide_opens_and_its_tissue_tiles_are_its_pieces(built):
    all_pieces = pieces_by_slide(built)
    for row in rows(built / "slides.csv"):
        pieces = all_pieces[row["slide_path"]]
        with open_slide(built / row["slide_path"]) as slide:
            assert slide.vendor == ("aperio" if row["slide_path"].endswith(".svs") else "generic-tiff")
            assert slide.dimensions == (2048, 1536) and slide.level_downsamples == (1.0, 2.0, 4.0)
            grid = tile_grid(slide, slide_mpp(slide), 0.5, PIECE_PX, 0.5)
        assert 10 <= len(pieces) <= 14
        assert sorted(map(tuple, grid.coords_level0.tolist())) == sorted(
            (piece.left_level0_px, piece.top_level0_px) for piece in pieces)


def test_tumour_pieces_only_on_tumour_slides_and_every_crop_inside_its_split(built):
    labels = {row["slide_path"]: (row["label"], row["split"]) for row in rows(built / "slides.csv")}
    type_mask = demo_slides._load_type_mask()
    for slide_path, pieces in pieces_by_slide(built).items():
        label, split = labels[slide_path]
        nest_kind = "tumour" if label == "tumour" else "inflammation"
        assert 2 <= sum(piece.source == nest_kind for piece in pieces) <= 4
        assert all(piece.source in ("stroma", nest_kind) for piece in pieces)
        top, bottom = STROMA_ROWS[split]
        for piece in pieces:  # no crop reaches another split's pixels: no leakage
            if piece.source == "stroma":
                assert top <= piece.crop_top_px and piece.crop_top_px + PIECE_PX <= bottom
                continue
            block_top = piece.crop_top_px // NEST_BLOCK_PX * NEST_BLOCK_PX
            block_left = piece.crop_left_px // NEST_BLOCK_PX * NEST_BLOCK_PX
            assert piece.crop_top_px + PIECE_PX <= block_top + NEST_BLOCK_PX
            assert piece.crop_left_px + PIECE_PX <= block_left + NEST_BLOCK_PX
            assert split_of(block_top, block_left, NEST_BLOCK_PX) == split
            crop = type_mask[piece.crop_top_px:piece.crop_top_px + PIECE_PX,
                             piece.crop_left_px:piece.crop_left_px + PIECE_PX]
            neoplastic = (crop == 3).mean()
            assert neoplastic >= 0.15 if piece.source == "tumour" else neoplastic < 0.005


def test_the_nest_pieces_are_on_the_slides_in_their_slides_stain(built):
    images = {name: demo_slides._load_source(*parts) for name, parts in demo_slides.IMAGES.items()}
    stains = stains_by_slide(built)
    checked = 0
    for slide_path, pieces in pieces_by_slide(built).items():
        with open_slide(built / slide_path) as slide:
            for piece in pieces:
                if piece.source == "stroma":
                    continue
                read = np.asarray(slide.read_region((piece.left_level0_px, piece.top_level0_px), 0,
                                                    (PIECE_PX, PIECE_PX))).astype(int)
                pasted = coloured_piece_pixels(images["nest"], piece, stains[slide_path]).astype(int)
                assert np.abs(read - pasted).mean() < 5  # JPEG q90
                assert np.abs(read - coloured_piece_pixels(images["stroma"], piece, stains[slide_path])).mean() > 20
                checked += 1
    assert checked >= 2 * 2 * sum(SLIDES_PER_CLASS.values())


def test_one_stain_per_slide_in_its_ranges_and_not_the_same_on_any_two(built):
    stains = stains_by_slide(built)
    assert sorted(stains) == sorted(row["slide_path"] for row in rows(built / "slides.csv"))
    for stain in stains.values():
        assert 0.8 <= stain.haematoxylin_scale <= 1.2 and 0.8 <= stain.eosin_scale <= 1.2
        assert abs(stain.haematoxylin_shift) <= 0.03 and abs(stain.eosin_shift) <= 0.03
        assert abs(stain.brightness) <= 0.04 and 0.9 <= stain.contrast <= 1.1
    assert len({stain.haematoxylin_scale for stain in stains.values()}) == len(stains)


def test_nest_pieces_of_both_classes_share_their_colour_statistics(built):
    """Before the slide's stain, nest pieces have the same per-channel mean and spread whatever their class.
    Uncorrected, lymphocyte crops average 17 levels higher in green and 20-26 more spread than tumour crops;
    matched, only clipping at 0 and 255 leaves tumour pieces' spread up to 3 levels short."""
    nest = demo_slides._load_source(*demo_slides.IMAGES["nest"])
    stats = {"tumour": [], "inflammation": []}
    for pieces in pieces_by_slide(built).values():
        for piece in pieces:
            if piece.source != "stroma":
                flat = nest_colour_matched(demo_slides.piece_pixels(nest, piece)).reshape(-1, 3).astype(float)
                stats[piece.source].append((flat.mean(axis=0), flat.std(axis=0)))
    for kind, found in stats.items():
        means, spreads = np.array(found).mean(axis=0)
        assert np.allclose(means, NEST_MEAN_RGB, atol=1.5), (kind, means)
        assert np.allclose(spreads, NEST_STD_RGB, atol=3.0), (kind, spreads)


def test_the_identity_stain_keeps_pixels_and_brightness_adds_levels():
    pixels = np.random.default_rng(0).integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    identity = Stain(1.0, 0.0, 1.0, 0.0, 0.0, 1.0)
    assert np.abs(stained(pixels, identity).astype(int) - pixels).max() <= 1  # the OD round trip, rounded
    grey = np.full((2, 2, 3), 100, dtype=np.uint8)
    assert (stained(grey, Stain(1.0, 0.0, 1.0, 0.0, 0.04, 1.0)) == 110).all()  # 0.04 x 255 = 10.2
    darker = stained(grey, Stain(1.5, 0.0, 1.0, 0.0, 0.0, 1.0)).astype(int)  # more haematoxylin: darker
    assert (darker < 100).all() and darker[0, 0, 1] < darker[0, 0, 2]  # haematoxylin absorbs green most


def test_the_built_folder_is_reused_not_rebuilt(built, monkeypatch):
    monkeypatch.setenv("EVALSUITE_DATA_HOME", str(built.parent))
    monkeypatch.setattr(demo_slides, "build_demo_slides", lambda folder: pytest.fail("rebuilt"))
    assert demo_slides.demo_slides_folder() == built


def test_a_failed_build_leaves_nothing(tmp_path, monkeypatch):
    written = []

    def fail_on_the_third(path, canvas, aperio):
        written.append(path)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        path.write_bytes(b"")

    monkeypatch.setattr(demo_slides, "write_pyramid_tiff", fail_on_the_third)
    monkeypatch.setenv("EVALSUITE_DATA_HOME", str(tmp_path))
    with pytest.raises(EvalsuiteError) as raised:
        demo_slides.demo_slides_folder()
    message = str(raised.value)
    assert str(tmp_path / FOLDER_NAME) in message and "EVALSUITE_DATA_HOME" in message and "\n" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{FOLDER_NAME}.lock"]


def test_a_data_home_that_is_a_file_is_a_one_line_error(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("")
    monkeypatch.setenv("EVALSUITE_DATA_HOME", str(home))
    with pytest.raises(EvalsuiteError) as raised:
        demo_slides.demo_slides_folder()
    message = str(raised.value)
    assert str(home / FOLDER_NAME) in message and "EVALSUITE_DATA_HOME" in message and "\n" not in message


def test_building_onto_an_existing_folder_is_refused(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(EvalsuiteError, match="already exists"):
        demo_slides.build_demo_slides(tmp_path / "taken")
