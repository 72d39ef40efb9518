"""`evalsuite robustness` (issue 17): transformations, HED jitter, cosine statistics, and the command end to end."""

import json

import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, leaderboard_rows, run_cli
from PIL import Image
from sklearn.metrics.pairwise import cosine_similarity

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.invariance import cosine_similarities, cosine_summary
from evalsuite.robustness import DEFAULT_TRANSFORMS, TRANSFORM_NAMES, parse_transforms
from evalsuite.robustness.perturbations import PERTURBATIONS, perturb
from evalsuite.robustness.stain import RGB_FROM_HED, hed_jitter, hed_to_rgb, rgb_to_hed

RANDOM = ("hed", "jpeg", "rotflip", "scale")  # transformations that draw parameters


def _tile(seed: int = 0, size=(48, 48)) -> Image.Image:
    """A smooth pink-purple tile with some texture (H&E-like colours, not noise, so JPEG and blur behave)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[: size[1], : size[0]]
    base = np.stack([200 + 30 * np.sin(xx / 5), 120 + 40 * np.cos(yy / 7), 190 + 20 * np.sin((xx + yy) / 9)], -1)
    return Image.fromarray(np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8))


# ---- cosine statistics

def test_cosines_match_scikit_learn_and_handle_zero_rows():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 5)).astype(np.float16), rng.normal(size=(7, 5)).astype(np.float16)
    expected = np.diag(cosine_similarity(a.astype(np.float64), b.astype(np.float64)))
    np.testing.assert_allclose(cosine_similarities(a, b), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cosine_similarities(a, a), 1.0, atol=1e-12)
    np.testing.assert_allclose(cosine_similarities(a, -a), -1.0, atol=1e-12)
    zero = np.zeros((2, 5))
    assert cosine_similarities(zero, zero).tolist() == [1.0, 1.0]  # identical, both zero
    assert cosine_similarities(zero, np.ones((2, 5))).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="one shape"):
        cosine_similarities(a, b[:3])


def test_cosine_summary_is_numpys_statistics():
    values = np.array([1.0, 0.5, 0.9, 0.2])
    summary = cosine_summary(values)
    assert summary == {"mean": pytest.approx(0.65), "median": pytest.approx(0.7), "std": pytest.approx(np.std(values)),
                       "min": 0.2}
    with pytest.raises(ValueError):
        cosine_summary(np.array([]))


# ---- HED stain jitter

def test_hed_with_no_jitter_gives_the_image_back_byte_for_byte():
    pixels = np.random.default_rng(1).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    pixels[0, :3] = [[0, 0, 0], [255, 255, 255], [255, 0, 128]]  # extremes survive the round trip
    out = hed_jitter(Image.fromarray(pixels), alpha=[1, 1, 1], beta=[0, 0, 0])
    assert np.array_equal(np.asarray(out), pixels)


def test_pure_haematoxylin_deconvolves_to_h_only_and_jitter_scales_its_density():
    """Hand-worked: a pixel of optical density 0.5 x the haematoxylin row of M has concentrations (0.5, 0, 0);
    doubling H doubles its optical density, i.e. squares its transmitted fraction."""
    optical_density = 0.5 * RGB_FROM_HED[0]
    transmitted = np.exp(-optical_density)  # fraction of light per channel
    rgb = 256 * transmitted - 1  # the +1 / 256 convention of stain.py, kept unrounded here
    np.testing.assert_allclose(rgb_to_hed(rgb), [0.5, 0, 0], atol=1e-12)
    doubled = hed_to_rgb(np.array([1.0, 0, 0]))
    np.testing.assert_array_equal(doubled, np.rint(256 * transmitted**2 - 1).astype(np.uint8))


def test_stain_matrix_is_scikit_images_ruifrok_johnston_matrix():
    color = pytest.importorskip("skimage.color")
    np.testing.assert_allclose(RGB_FROM_HED, color.rgb_from_hed)


# ---- the transformation registry

def test_registry_and_cli_names_agree():
    assert list(PERTURBATIONS) == list(TRANSFORM_NAMES)
    assert parse_transforms("all") == list(DEFAULT_TRANSFORMS)
    assert parse_transforms(" blur , jpeg") == ["blur", "jpeg"]
    assert parse_transforms("all,identity") == [*DEFAULT_TRANSFORMS, "identity"]
    for bad, message in [("blurr", "unknown transformation 'blurr'"), ("", "needs names"),
                         ("blur,blur", "twice")]:
        with pytest.raises(EvalsuiteError, match=message):
            parse_transforms(bad)


@pytest.mark.parametrize("name", TRANSFORM_NAMES)
def test_each_transformation_is_the_same_bytes_for_a_seed_and_index(name):
    tile = _tile()
    first = np.asarray(perturb(tile, name, seed=3, index=7))
    perturb(tile, name, seed=3, index=8)  # another sample in between changes nothing (no shared RNG state)
    again = np.asarray(perturb(tile, name, seed=3, index=7))
    assert np.array_equal(first, again)
    assert first.shape == np.asarray(tile).shape and first.dtype == np.uint8
    assert np.array_equal(np.asarray(tile), np.asarray(_tile()))  # the input is not modified in place
    others = [np.asarray(perturb(tile, name, seed=s, index=i)) for s, i in [(4, 7), (3, 9), (5, 1), (6, 2)]]
    changed = [not np.array_equal(first, other) for other in others]
    if name in RANDOM:
        assert any(changed), f"{name}: other seeds and samples drew the same parameters"
    else:
        assert not any(changed)
    if name != "identity":
        assert not np.array_equal(first, np.asarray(tile)), f"{name} left the tile unchanged"


def test_rotflip_is_an_exact_non_identity_symmetry_of_the_square():
    pixels = np.asarray(_tile(size=(32, 32)))
    symmetries = [np.rot90(p, k) for p in (pixels, pixels[:, ::-1]) for k in range(4)][1:]
    seen = set()
    for index in range(40):
        out = np.asarray(perturb(Image.fromarray(pixels), "rotflip", seed=0, index=index))
        matches = [k for k, s in enumerate(symmetries) if np.array_equal(out, s)]
        assert len(matches) == 1
        seen.add(matches[0])
    assert len(seen) >= 5  # 40 draws over 7 outcomes: all but a few show up


def test_small_tiles_and_non_square_tiles_keep_their_size():
    for size in [(8, 8), (60, 40), (3, 5)]:
        tile = _tile(size=size)
        for name in TRANSFORM_NAMES:
            out = perturb(tile, name, seed=0, index=0)
            if name != "rotflip":
                assert out.size == size, (name, size)


# ---- the command

def test_unknown_transformation_is_a_one_line_error(tmp_path):
    result = run_cli("robustness", "--task", "demo", "--transforms", "hed,sharpen", "--out", tmp_path)
    assert result.returncode == 2
    assert_one_line_error(result, "unknown transformation 'sharpen'", "rotflip")


def test_a_segmentation_task_is_a_one_line_error_naming_its_kind(tmp_path):
    result = run_cli("robustness", "--task", "demo_seg", "--out", tmp_path)
    assert result.returncode == 2
    assert_one_line_error(result, "'demo_seg' is a segmentation task", "classification")
    assert not (tmp_path / "leaderboard.csv").exists()


@pytest.mark.slow  # four CLI processes, about 35 s on 2 shared cores
def test_demo_run_prints_the_table_and_appends_invariance_rows(tmp_path):
    out = tmp_path / "out"
    tiny = ["--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0", "--out", out]
    result = run_cli("robustness", *tiny, "--transforms", "all,identity")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("transformation"))
    assert "cosine mean" in header and "balanced_accuracy clean" in header and "delta" in header
    table = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in TRANSFORM_NAMES}
    assert list(table) == [*DEFAULT_TRANSFORMS, "identity"]

    record = json.loads(next((out / "runs").glob("*.json")).read_text())
    scores = record["robustness"]["transforms"]
    # identity: the same pixels through the same batches as the clean cache give the cached rows back
    assert scores["identity"]["cosine"]["min"] == pytest.approx(1.0, abs=1e-6)
    assert scores["identity"]["delta"] == 0.0
    for name in DEFAULT_TRANSFORMS:
        assert -1 <= scores[name]["cosine"]["mean"] < 1
        assert scores[name]["delta"] == pytest.approx(scores[name]["metric_transformed"] - scores[name]["metric_clean"])
    # the clean metric is that of `run --probes linear` with the same seed
    linear = run_cli("run", *tiny, "--probes", "linear", "--seed", "0")
    assert linear.returncode == 0, linear.stderr
    run_rows = [r for r in leaderboard_rows(out) if r["probe"] == "linear" and r["split"] == "test"
                and r["metric"] == "balanced_accuracy"]
    assert float(run_rows[0]["value"]) == pytest.approx(scores["blur"]["metric_clean"], abs=1e-6)

    rows = [r for r in leaderboard_rows(out) if r["probe"] == "invariance"]
    assert {r["split"] for r in rows} == {"test"} and {r["n_samples"] for r in rows} == {"112"}
    assert {r["metric"] for r in rows} == {f"{kind}_{name}" for name in (*DEFAULT_TRANSFORMS, "identity")
                                           for kind in ("cosine", "cosine_median", "balanced_accuracy_delta")}
    by_metric = {r["metric"]: float(r["value"]) for r in rows}
    assert by_metric["cosine_blur"] == pytest.approx(scores["blur"]["cosine"]["mean"], abs=1e-6)

    again = run_cli("robustness", *tiny, "--transforms", "jpeg")  # a rerun: same transformed bytes, same numbers
    assert again.returncode == 0, again.stderr
    records = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    jpeg = [r["robustness"]["transforms"]["jpeg"] for r in records if "robustness" in r]
    assert len(jpeg) == 2 and jpeg[0] == jpeg[1]

    # the latest invariance run (jpeg only) is the one the wide table shows: docs/robustness.md says so
    board = run_cli("leaderboard", "--out", out, "--metric", "cosine_jpeg")
    assert board.returncode == 0, board.stderr
    assert "invariance" in board.stdout


class _Tiles:
    """A classification dataset's surface as PerturbedImages reads it: labels, transform, image(index)."""

    def __init__(self, transform, count=5):
        rng = np.random.default_rng(0)
        self.pixels = rng.integers(0, 256, (count, 60, 60, 3), dtype=np.uint8)
        self.labels, self.transform = np.arange(count) % 2, transform

    def __len__(self):
        return len(self.labels)

    def image(self, index):
        return Image.fromarray(self.pixels[index])


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_perturbed_batches_reach_the_device_as_uint8_and_convert_there_bit_for_bit(name):
    """Issue 39: a perturbed batch is uint8 from the workers; `prepare_batch` gives the per-image transform exactly."""
    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.transforms import build_transform
    from evalsuite.robustness.invariance import PerturbedImages

    tiles = _Tiles(build_transform(build_backbone("test_vit", random_init=True).data_config))
    dataset = PerturbedImages(tiles, name, seed=3)
    images, labels = torch.utils.data.default_collate(dataset.__getitems__(list(range(len(tiles)))))
    assert images.dtype == torch.uint8 and labels.tolist() == tiles.labels.tolist()
    reference = torch.stack([tiles.transform(perturb(tiles.image(i), name, 3, i)) for i in range(len(tiles))])
    assert torch.equal(dataset.prepare_batch(images), reference)
