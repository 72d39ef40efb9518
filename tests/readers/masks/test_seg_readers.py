"""Segmentation readers on fixtures in the exact PanNuke, CoNSeP and MoNuSAC layouts; demo_seg tiles; bad input."""

import json
import shutil

import numpy as np
import pytest
import scipy.io
import torch
from conftest import (
    MONUSAC_TEST,
    MONUSAC_TRAIN,
    assert_one_line_error,
    leaderboard_rows,
    make_consep,
    make_monusac,
    make_pannuke,
    pannuke_paths,
    run_cli,
    write_consep_mat,
)

from evalsuite.errors import EvalsuiteError
from evalsuite.features import prepare as features
from evalsuite.features import split_keys
from evalsuite.models.backbones import build_backbone
from evalsuite.readers import build_reader
from evalsuite.readers.demo.hgsc_tiles import split_of
from evalsuite.runner import RunConfig
from evalsuite.tasks.cards import load_card

FAST = ["--model", "test_vit", "--random-init", "--num-workers", "0", "--no-count-check", "--batch-size", "16"]


def _reader(task, root, check_counts=False):
    return build_reader(load_card(task), str(root), check_counts)


def _identity(image):
    return np.asarray(image)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("seg_data")
    return {"pannuke": make_pannuke(root / "pannuke"), "consep": make_consep(root / "consep"),
            "monusac": make_monusac(root / "monusac")}


# ---------------------------------------------------------------- readers in process

def test_pannuke_class_map_from_the_instance_channels(data):
    reader = _reader("pannuke", data["pannuke"])
    sizes = {split: len(reader.dataset(split, _identity)) for split in ("train", "val", "test")}
    assert sizes == {"train": 3, "val": 2, "test": 2}
    dataset = reader.dataset("val", _identity)
    masks = np.load(pannuke_paths(data["pannuke"], 2)["masks"])
    images = np.load(pannuke_paths(data["pannuke"], 2)["images"])
    expected = np.where((masks[..., :5] > 0).any(-1), (masks[..., :5] > 0).argmax(-1) + 1, 0)
    assert dataset.labels.dtype == np.uint8 and dataset.labels.shape == (2, 256, 256)
    assert np.array_equal(dataset.labels, expected) and set(np.unique(expected)) == {0, 1, 2, 3, 4, 5}
    image, index = dataset[1]
    assert index == 1 and np.array_equal(image, images[1].astype(np.uint8))


@pytest.mark.parametrize("task", ["pannuke", "consep"])
def test_seg_tiles_reach_the_device_as_uint8_and_convert_there_bit_for_bit(data, task):
    """Issue 39: workers hand over uint8 tiles and `prepare_batch` converts the batch; the model input equals the
    per-tile transform exactly, and each item still names its tile."""
    from evalsuite.models.transforms import build_transform

    transform = build_transform(build_backbone("test_vit", random_init=True).data_config)
    dataset = _reader(task, data[task]).dataset("train", transform)
    indices = list(range(len(dataset)))
    items = dataset.__getitems__(indices)
    batch = torch.utils.data.default_collate(items)
    assert batch[0].dtype == torch.uint8 and batch[1].tolist() == indices
    reference = torch.stack([transform(dataset.image(i)) for i in indices])
    assert torch.equal(dataset.prepare_batch(batch[0]), reference)


def test_pannuke_count_check_uses_the_released_fold_sizes(data):
    with pytest.raises(EvalsuiteError, match="fold 1 has 3 images but the official dataset has 2656"):
        _reader("pannuke", data["pannuke"], check_counts=True)


def test_consep_merges_types_and_carves_val_by_whole_image(data):
    reader = _reader("consep", data["consep"])
    tiles = {split: reader.tiles[split] for split in ("train", "val", "test")}
    assert {s: len(t) for s, t in tiles.items()} == {"train": 32, "val": 16, "test": 32}  # 16 tiles per image
    train_images, val_images = set(tiles["train"][:, 0]), set(tiles["val"][:, 0])
    assert len(val_images) == 1 and not train_images & val_images
    dataset = reader.dataset("test", _identity)
    types = scipy.io.loadmat(data["consep"] / "Test" / "Labels" / "test_1.mat")["type_map"]
    merged = np.array([0, 1, 2, 3, 3, 4, 4, 4])[types.astype(int)]
    assert dataset.labels.shape == (32, 250, 250) and np.array_equal(dataset.labels[5], merged[250:500, 250:500])
    image, _ = dataset[5]
    assert image.shape == (250, 250, 3)


def test_monusac_polygons_ambiguous_ignored_padding_ignored_val_by_patient(data):
    reader = _reader("monusac", data["monusac"])
    source = reader.source
    owners = {split: {source.images[i].parent.name for i in reader.tiles[split][:, 0]} for split in reader.tiles}
    assert len(owners["val"]) == 1 and not owners["val"] & owners["train"] and len(owners["train"]) == 3
    assert {source.images[i].parent.parent.name for i in reader.tiles["test"][:, 0]} == {MONUSAC_TEST}
    test = reader.dataset("test", _identity)
    assert len(test) == 3 and test.labels.shape == (3, 256, 256)  # 280x150 -> 2 tiles, 113x81 -> 1 tile
    small = test.labels[2]
    assert (small[81:, :] == 255).all() and (small[:, 113:] == 255).all()  # padding past the 113x81 image
    assert small[81 // 2, 113 // 2] == 255  # the Ambiguous polygon at the centre
    assert set(np.unique(small[:81, :113])) - {255} <= {0, 1, 2, 3, 4} and (small[:81, :113] > 0).any()
    image, _ = test[2]
    assert image.shape == (256, 256, 3) and (image[100:, :] == 255).all()  # white padding


def _centre_fill(shape, vertices) -> np.ndarray:
    """Reference rasterisation, independent of the reader: matplotlib's interior test at pixel centres (X = column,
    Y = row), plus vertices that sit on a centre (the fixture's octagons have no other centre on an edge)."""
    from matplotlib.path import Path as PolygonPath

    rows, columns = np.mgrid[:shape[0], :shape[1]]
    centres = np.column_stack([columns.ravel(), rows.ravel()]).astype(np.float64)
    inside = PolygonPath(np.asarray(vertices)).contains_points(centres).reshape(shape)
    for x, y in vertices:
        if float(x).is_integer() and float(y).is_integer() and 0 <= y < shape[0] and 0 <= x < shape[1]:
            inside[int(y), int(x)] = True
    return inside


def test_fill_polygon_sets_exactly_the_pixels_whose_centres_are_inside_or_on_it():
    from evalsuite.readers.masks.monusac import fill_polygon

    # A diamond with fractional centre and radius: |x - 5.3| + |y - 4.6| <= 2.5 holds for 12 centres.
    canvas = np.zeros((10, 12), dtype=np.uint8)
    fill_polygon(canvas, [(7.8, 4.6), (5.3, 7.1), (2.8, 4.6), (5.3, 2.1)], 3)
    rows, columns = np.mgrid[:10, :12]
    expected = np.abs(columns - 5.3) + np.abs(rows - 4.6) <= 2.5
    assert expected.sum() == 12 and np.array_equal(canvas == 3, expected) and set(np.unique(canvas)) == {0, 3}
    # Integer corners: the centres on the boundary count (skimage.draw.polygon's closed rule): 4 x 3 pixels.
    canvas = np.zeros((6, 7), dtype=np.uint8)
    fill_polygon(canvas, [(1, 1), (4, 1), (4, 3), (1, 3)], 1)
    assert np.argwhere(canvas).tolist() == [[r, c] for r in (1, 2, 3) for c in (1, 2, 3, 4)]
    # Past the canvas edge: clipped, and a polygon wholly outside draws nothing.
    canvas = np.zeros((4, 4), dtype=np.uint8)
    fill_polygon(canvas, [(-2.5, -2.5), (1.5, -2.5), (1.5, 1.5), (-2.5, 1.5)], 1)
    fill_polygon(canvas, [(9, 9), (12, 9), (12, 12)], 2)
    assert np.argwhere(canvas).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


@pytest.mark.parametrize("radius", [2.5, 3.0, 4.0, 6.0])
def test_a_small_nucleus_is_not_dilated(radius):
    from evalsuite.readers.masks.monusac import fill_polygon

    angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    vertices = [(15.3 + radius * np.cos(a), 14.8 + radius * np.sin(a)) for a in angles]
    canvas = np.zeros((30, 30), dtype=np.uint8)
    fill_polygon(canvas, vertices, 1)
    xs, ys = np.array(vertices).T
    area = 0.5 * abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1)))
    assert np.array_equal(canvas == 1, _centre_fill(canvas.shape, vertices))
    # Centre sampling is unbiased: the pixel count stays near the area (an outline fill adds a ring of ~1 px).
    assert abs(canvas.sum() / area - 1) < 0.15


def test_monusac_masks_are_the_centre_fill_of_the_xml_polygons(data):
    from evalsuite.readers.masks.monusac import read_polygons

    reader = _reader("monusac", data["monusac"])
    test = reader.dataset("test", _identity)
    index, top, left = reader.tiles["test"][2]  # the 113x81 image, one tile
    xml = reader.source.annotations[index]
    expected = np.zeros((81, 113), dtype=np.uint8)
    for value, vertices in read_polygons(xml):  # file order, Ambiguous last
        expected[_centre_fill(expected.shape, vertices)] = value
    assert (top, left) == (0, 0) and np.array_equal(test.labels[2][:81, :113], expected)


def test_demo_seg_tiles_sit_inside_blocks_of_one_split():
    reader = build_reader(load_card("demo_seg"))
    counts = {split: len(t) for split, t in reader.tiles.items()}
    assert counts == {"train": 135, "val": 45, "test": 45}
    for split, tiles in reader.tiles.items():
        for _, top, left in tiles:
            assert top // 300 == (top + 99) // 300 and left // 300 == (left + 99) // 300  # never crosses a block
            assert split_of(top, left, 300) == split
    labels = reader.dataset("train", _identity).labels
    assert labels.dtype == np.uint8 and labels.shape == (135, 100, 100) and set(np.unique(labels)) == {0, 1, 2, 3}


# ---------------------------------------------------------------- bad input through the CLI: one line naming the file

def test_wrong_layout_names_the_expected_pattern(tmp_path):
    (tmp_path / "somewhere").mkdir()
    result = run_cli("run", "--task", "pannuke", "--data-root", tmp_path / "somewhere", "--out", tmp_path / "out",
                     *FAST)
    assert_one_line_error(result, "Fold 1/images/fold1/images.npy", "'Fold N/images/foldN/images.npy'")
    for task, fragments in [("consep", ["Train/Images", "{Train,Test}/Images/*.png"]),
                            ("monusac", [MONUSAC_TRAIN, "<patient>/<image>.{tif,xml}"])]:
        with pytest.raises(EvalsuiteError) as caught:
            _reader(task, tmp_path / "somewhere")
        assert "\n" not in str(caught.value) and all(f in str(caught.value) for f in fragments), caught.value


def test_pannuke_masks_whose_shape_disagrees_with_the_images(data, tmp_path):
    root = shutil.copytree(data["pannuke"], tmp_path / "pannuke")
    masks = pannuke_paths(root, 2)["masks"]
    np.save(masks, np.zeros((2, 128, 128, 6)))
    result = run_cli("run", "--task", "pannuke", "--data-root", root, "--out", tmp_path / "out", *FAST)
    assert_one_line_error(result, str(masks), "(2, 128, 128, 6)", "(2, 256, 256, 3)")


def test_consep_type_map_class_id_out_of_range(data, tmp_path):
    root = shutil.copytree(data["consep"], tmp_path / "consep")
    label = root / "Train" / "Labels" / "train_2.mat"
    content = scipy.io.loadmat(label)
    content["type_map"][10, 10] = 9
    scipy.io.savemat(label, {k: v for k, v in content.items() if not k.startswith("__")})
    result = run_cli("run", "--task", "consep", "--data-root", root, "--out", tmp_path / "out", *FAST)
    assert_one_line_error(result, str(label), "class id 9 outside 0..7")
    assert leaderboard_rows(tmp_path / "out") == []


def test_consep_mat_without_type_map(data, tmp_path):
    root = shutil.copytree(data["consep"], tmp_path / "consep")
    label = root / "Test" / "Labels" / "test_2.mat"
    types = scipy.io.loadmat(label)["type_map"]
    write_consep_mat(label, types, types, [], keys={"inst_map"})
    result = run_cli("run", "--task", "consep", "--data-root", root, "--out", tmp_path / "out", *FAST)
    assert_one_line_error(result, str(label), "has no 'type_map'", "found inst_map")


def test_monusac_xml_without_polygons(data, tmp_path):
    root = shutil.copytree(data["monusac"], tmp_path / "monusac")
    annotation = next((root / MONUSAC_TRAIN).glob("*/*.xml"))
    annotation.write_text('<?xml version="1.0"?>\n<Annotations MicronsPerPixel="0.252100">\n<Annotation Id="1">\n'
                          '<Attributes><Attribute Name="Epithelial" Id="0" Value=""/></Attributes>\n'
                          '<Regions><RegionAttributeHeaders/></Regions>\n</Annotation>\n</Annotations>\n')
    result = run_cli("run", "--task", "monusac", "--data-root", root, "--out", tmp_path / "out", *FAST)
    assert_one_line_error(result, str(annotation), "has no polygons")


# ---------------------------------------------------------------- end to end through the CLI

def _tiny_recipes(tmp_path) -> str:
    """The two heads with few epochs (format tests check the plumbing; demo_seg runs the shipped recipes)."""
    linear, masktransformer = tmp_path / "linear_tiny.yaml", tmp_path / "mt_tiny.yaml"
    linear.write_text("name: seg_linear\nprobe: seg_linear\nparams: {epochs: 3, batch_size: 8}\n")
    masktransformer.write_text("name: seg_masktransformer_tiny\nprobe: seg_masktransformer\n"
                               "params: {d_model: 32, n_layers: 1, n_heads: 4, d_ff: 64, epochs: 2, batch_size: 8}\n")
    return f"{linear},{masktransformer}"


@pytest.mark.slow
@pytest.mark.parametrize("task, sizes, label_px", [
    ("pannuke", {"train": 3, "val": 2, "test": 2}, 256),
    ("consep", {"train": 32, "val": 16, "test": 32}, 250),
    ("monusac", {"train": 8, "val": 2, "test": 3}, 256),
])
def test_card_runs_end_to_end_on_its_layout(data, tmp_path, task, sizes, label_px):
    out = tmp_path / "out"
    probes = _tiny_recipes(tmp_path) if task == "pannuke" else _tiny_recipes(tmp_path).split(",")[0]
    result = run_cli("run", "--task", task, "--data-root", data[task], "--out", out, "--probes", probes, *FAST)
    assert result.returncode == 0, result.stderr
    rows = leaderboard_rows(out)
    classes = load_card(task).classes
    expected = {"dice_fg_mean", "iou_fg_mean", "dice_mean", "iou_mean"} | {f"{m}_{c}" for m in ("dice", "iou")
                                                                          for c in classes}
    assert {row["metric"] for row in rows} == expected
    assert {row["split"]: int(row["n_samples"]) for row in rows} == sizes
    assert {row["headline_metric"] for row in rows} == {"dice_fg_mean"}
    values = [float(row["value"]) for row in rows if row["metric"] == "dice_fg_mean"]
    assert all(0 <= v <= 1 for v in values)
    if task == "pannuke":
        assert {row["probe"] for row in rows} == {"seg_linear", "seg_masktransformer_tiny"}
    for manifest in (out / "cache").glob("*/manifest.json"):
        fields = json.loads(manifest.read_text())
        features = np.load(manifest.parent / "features.npy", mmap_mode="r")
        labels = np.load(manifest.parent / "labels.npy", mmap_mode="r")
        assert features.dtype == np.float16 and features.shape[1:] == (10, 10, 64)  # test_vit: 160 px / 16, width 64
        assert labels.dtype == np.uint8 and labels.shape == (len(features), label_px, label_px)
        assert fields["fields"]["feature"] == "dense" and fields["fields"]["layers"] == [-1]


def test_card_layers_concatenate_blocks_and_enter_the_cache_key(tmp_path):
    card_path = tmp_path / "pannuke_layers.yaml"
    card_path.write_text(load_card("pannuke").path.read_text().replace("layers: [-1]", "layers: [-4, -1]"))
    card, default = load_card(str(card_path)), load_card("pannuke")
    backbone = build_backbone("test_vit", random_init=True)
    images = torch.randn(2, 3, 160, 160)
    with torch.inference_mode():
        last = features.feature_fn(backbone, default)(images)
        both = features.feature_fn(backbone, card)(images)
    assert tuple(last.shape) == (2, 10, 10, 64) and tuple(both.shape) == (2, 10, 10, 128)
    assert torch.allclose(both[..., 64:], last, atol=1e-5)  # block -1 through the final norm = forward_features
    config = RunConfig(task=str(card_path), data_root=str(tmp_path))
    fields = split_keys.key_fields(config, card, None, backbone, "train", "fp32")
    assert fields["layers"] == [-4, -1]
    assert split_keys.key_fields(config, default, None, backbone, "train", "fp32")["layers"] == [-1]


def test_budget_counts_masks_at_their_size_and_a_small_dense_probe_batch(data, tmp_path):
    result = run_cli("budget", "--task", "pannuke", "--data-root", data["pannuke"], "--out", tmp_path / "out",
                     "--mem", "8G", "--json", *FAST)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    masks_bytes = sum(split["samples"] for split in plan["splits"]) * 256 * 256  # uint8 256 x 256 per tile
    assert [split["label_bytes"] for split in plan["splits"]] == [s["samples"] * 256 * 256 for s in plan["splits"]]
    assert plan["memmap_needed_bytes"] == (masks_bytes + plan["model_bytes"]
                                           + max(plan["probe_working_bytes"], plan["extraction_working_bytes"]))
    tokens, classes = 10 * 10 * 64, len(load_card("pannuke").classes)  # test_vit: 10 x 10 tokens of width 64
    assert plan["probe_working_bytes"] == 32 * (tokens + classes * 256 * 256) * 4 * 4
