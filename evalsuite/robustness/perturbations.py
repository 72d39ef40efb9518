"""The transformations `evalsuite robustness` applies to a tile (a PIL image, before the backbone's preprocessing).

Pixels are changed by torchvision.transforms.v2.functional (blur, JPEG, flips and rotations, affine
zoom) or by evalsuite.robustness.stain (HED jitter, which neither torchvision nor albumentations has
in this form). Random parameters are drawn here from a numpy Generator seeded by (seed, transformation,
sample index), never from torch's global RNG, so a sample gets the same transformed bytes whatever the
batch size, the DataLoader workers, the model or the run: every model is scored on the same images.

Parameters follow THUNDER where it has the transformation (MICS-Lab/thunder src/thunder/utils/transforms.py
at 6fe47e0975411bb692263217a816b62a0c809a39); docs/robustness.md lists every difference.
"""

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F

from evalsuite.robustness.stain import HED_SIGMA, random_hed_jitter

# THUNDER `_random_gaussian_blur(kernel_size=15)`; its sigma is torchvision's default for 15, 0.15 * 15 + 0.35.
BLUR_KERNEL_PX = 15
BLUR_SIGMA_PX = 2.6
# JPEG re-encoding quality, uniform over whole numbers (THUNDER has no JPEG transformation).
JPEG_QUALITY = (50, 90)
# Zoom factor, uniform; THUNDER's `_random_translate` draws its scale from 1 +- 0.2 (with translation and shear).
SCALE_RANGE = (0.8, 1.2)


@dataclass(frozen=True)
class Perturbation:
    name: str
    apply: Callable  # (PIL image, numpy Generator) -> PIL image
    params: dict  # what is drawn, from what: recorded in the run JSON


def item_rng(seed: int, name: str, index: int) -> np.random.Generator:
    """The Generator of one (seed, transformation, sample): independent of order, batches and workers."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(name.encode()), int(index)]))


def _identity(image: Image.Image, _rng) -> Image.Image:
    return image.copy()


def _hed(image: Image.Image, rng) -> Image.Image:
    return random_hed_jitter(image, rng, HED_SIGMA)


def _blur(image: Image.Image, _rng) -> Image.Image:
    # Reflect padding needs a kernel radius below the image side: tiles smaller than the kernel get the
    # largest kernel that fits (same sigma, so the same blur wherever the kernel is not truncated).
    kernel_px = min(BLUR_KERNEL_PX, 2 * min(image.size) - 1)
    return F.gaussian_blur(image, kernel_size=[kernel_px, kernel_px], sigma=[BLUR_SIGMA_PX, BLUR_SIGMA_PX])


def _jpeg(image: Image.Image, rng) -> Image.Image:
    quality = int(rng.integers(JPEG_QUALITY[0], JPEG_QUALITY[1] + 1))
    return F.jpeg(image.convert("RGB"), quality=quality)


def _rotflip(image: Image.Image, rng) -> Image.Image:
    """One of the 7 non-identity symmetries of the square (dihedral group D4), each with probability 1/7:
    rotations by 90, 180, 270 degrees, and a horizontal flip followed by a rotation by 0, 90, 180 or 270.
    Exact pixel moves (PIL transposes for multiples of 90 degrees), no interpolation."""
    element = int(rng.integers(1, 8))  # 0 would be the identity
    quarter_turns, flip = element % 4, element >= 4
    if flip:
        image = F.horizontal_flip(image)
    return F.rotate(image, 90.0 * quarter_turns, expand=True) if quarter_turns else image


def _scale(image: Image.Image, rng) -> Image.Image:
    """Zoom about the centre by s (s > 1: in, s < 1: out), bilinear, same output size. Zooming out needs
    tissue beyond the tile: the tile is mirrored at its borders first (reflect padding), not filled black."""
    factor = float(rng.uniform(*SCALE_RANGE))
    width, height = image.size
    pad_px = 0 if factor >= 1 else min(math.ceil(max(width, height) * (1 / factor - 1) / 2) + 1, min(width, height) - 1)
    padded = F.pad(image, [pad_px] * 4, padding_mode="reflect") if pad_px else image
    zoomed = F.affine(padded, angle=0.0, translate=[0, 0], scale=factor, shear=[0.0, 0.0],
                      interpolation=InterpolationMode.BILINEAR)
    return F.center_crop(zoomed, [height, width])


PERTURBATIONS = {
    "hed": Perturbation("hed", _hed, {"alpha": f"N(1, {HED_SIGMA}^2) per stain",
                                      "beta": f"N(0, {HED_SIGMA}^2) per stain", "stain_matrix": "Ruifrok-Johnston"}),
    "blur": Perturbation("blur", _blur, {"kernel_px": BLUR_KERNEL_PX, "sigma_px": BLUR_SIGMA_PX}),
    "jpeg": Perturbation("jpeg", _jpeg, {"quality": f"uniform integer in [{JPEG_QUALITY[0]}, {JPEG_QUALITY[1]}]"}),
    "rotflip": Perturbation("rotflip", _rotflip, {"element": "uniform over the 7 non-identity symmetries of "
                                                             "the square"}),
    "scale": Perturbation("scale", _scale, {"factor": f"uniform in [{SCALE_RANGE[0]}, {SCALE_RANGE[1]}]",
                                            "border": "reflect", "interpolation": "bilinear"}),
    "identity": Perturbation("identity", _identity, {}),
}


def perturb(image: Image.Image, name: str, seed: int, index: int) -> Image.Image:
    """Transformation `name` of sample `index`'s image under `seed` (the same bytes on every call)."""
    return PERTURBATIONS[name].apply(image, item_rng(seed, name, index))
