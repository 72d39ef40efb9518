"""The backbone input transform: Pillow's two-step downscale only where an image shrinks 2 x REDUCING_GAP or more."""

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from evalsuite.models.transforms import REDUCING_GAP, build_transform, describe_transform

CONFIG = {"input_size": (3, 224, 224), "interpolation": "bicubic", "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}


def _he_square(side: int) -> Image.Image:
    from conftest import REPO

    with Image.open(REPO / "evalsuite" / "data" / "hgsc_nest" / "hgsc_nest.jpg") as source:
        return source.convert("RGB").crop((100, 100, 900, 900)).resize((side, side), Image.Resampling.LANCZOS)


def _torchvision(image) -> torch.Tensor:
    return T.Compose([T.Resize((224, 224), interpolation=T.InterpolationMode.BICUBIC, antialias=True), T.ToTensor(),
                      T.Normalize(CONFIG["mean"], CONFIG["std"])])(image)


@pytest.mark.parametrize("side", [96, 224, 256, 700, 1024])
def test_an_image_shrunk_less_than_twice_the_gap_gets_torchvisions_pixels_exactly(side):
    image = _he_square(side)
    assert torch.equal(build_transform(CONFIG)(image), _torchvision(image))


def test_a_photo_sized_square_is_box_reduced_first_and_stays_within_a_few_grey_levels():
    image = _he_square(1536)  # BACH's centre square: 6.9x down to 224
    ours = build_transform(CONFIG)(image)
    pillow = image.resize((224, 224), Image.Resampling.BICUBIC, reducing_gap=REDUCING_GAP)
    expected = T.Normalize(CONFIG["mean"], CONFIG["std"])(T.ToTensor()(pillow))
    assert torch.equal(ours, expected)
    grey_levels = ((ours - _torchvision(image)).abs() * 0.5 * 255).numpy()
    assert 0 < grey_levels.mean() < 1 and grey_levels.max() <= 8
    exact = build_transform(CONFIG, reducing_gap=None)(image)  # no gap: torchvision's own resize
    assert torch.equal(exact, _torchvision(image))


def test_tensor_input_is_resized_by_torchvision():
    tensor = torch.from_numpy(np.array(_he_square(1536))).permute(2, 0, 1).float() / 255
    ours = build_transform(CONFIG).transforms[0](tensor)
    assert torch.equal(ours, T.Resize((224, 224), interpolation=T.InterpolationMode.BICUBIC, antialias=True)(tensor))


def test_the_gap_is_part_of_the_cache_key():
    assert describe_transform(CONFIG)["reducing_gap"] == REDUCING_GAP
