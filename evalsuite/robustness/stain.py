"""HED stain jitter: colour deconvolution into haematoxylin, eosin and DAB, a random change per stain, back to RGB.

Written here because torchvision has no stain transform, and albumentations' HEStain (2.0.4+) is a
different augmentation (stain matrices from presets or Macenko/Vahadane fits, jittered intensities)
and would add a dependency for one transform.

Optical density (Beer-Lambert), with the +1 offset that keeps log(0) away:
    OD = -ln((I + 1) / 256)                      I: 8-bit RGB, per pixel a row vector [R, G, B]
Stain concentrations C (one row per pixel, columns H, E, D) satisfy OD = C @ M, so
    C = OD @ inv(M)
with M the stain matrix of Ruifrok and Johnston (rows: haematoxylin, eosin, DAB optical densities in
R, G, B), "Quantification of histochemical staining by color deconvolution", Anal Quant Cytol Histol
23(4):291-299, 2001; the values are those of scikit-image's `rgb_from_hed`
(skimage/color/colorconv.py), the matrix `skimage.color.rgb2hed` uses.
Jitter, the form of Tellez et al. 2018 ("Whole-slide mitosis detection in H&E breast histology using PHH3 as a
reference to train distilled stain-invariant convolutional networks", IEEE TMI), with the normal draws of
Faryna et al. (MIDL 2021) and THUNDER's `random_hed` (Tellez draws alpha and beta from uniform ranges instead):
    C' = alpha * C + beta        alpha_s ~ N(1, sigma^2), beta_s ~ N(0, sigma^2), one draw per stain s and image
    I' = clip(round(256 * exp(-C' @ M) - 1), 0, 255)
With alpha = 1 and beta = 0 the image comes back unchanged (tests/robustness).
"""

import numpy as np
from PIL import Image

RGB_FROM_HED = np.array([[0.65, 0.70, 0.29],    # haematoxylin
                         [0.07, 0.99, 0.11],    # eosin
                         [0.27, 0.57, 0.78]])   # DAB
HED_FROM_RGB = np.linalg.inv(RGB_FROM_HED)
# THUNDER's `_random_hed(sigma=0.025)` jitters -ln(I/255 + 3.14159) instead of optical density: on the demo's
# test tiles it moves a pixel by 25.9 grey levels on average, 0.025 on optical density by only 2.9. 0.1 on
# optical density (10.4 levels: stain amounts +-10 %) is a visible but plausible staining change (docs/robustness.md).
HED_SIGMA = 0.1
_LEVELS = 256.0  # (I + 1) / 256 maps 0..255 into (0, 1]


def rgb_to_hed(rgb: np.ndarray) -> np.ndarray:
    """8-bit RGB [..., 3] -> stain concentrations [..., 3] (H, E, D), float64."""
    optical_density = -np.log((np.asarray(rgb, dtype=np.float64) + 1.0) / _LEVELS)
    return optical_density @ HED_FROM_RGB


def hed_to_rgb(hed: np.ndarray) -> np.ndarray:
    """Stain concentrations [..., 3] -> 8-bit RGB [..., 3] (uint8), the inverse of rgb_to_hed up to rounding."""
    rgb = _LEVELS * np.exp(-(np.asarray(hed, dtype=np.float64) @ RGB_FROM_HED)) - 1.0
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def hed_jitter(image: Image.Image, alpha, beta) -> Image.Image:
    """The image with each stain's concentration scaled by alpha[s] and shifted by beta[s]."""
    hed = rgb_to_hed(np.asarray(image.convert("RGB")))
    return Image.fromarray(hed_to_rgb(hed * np.asarray(alpha, dtype=np.float64) + np.asarray(beta, dtype=np.float64)))


def random_hed_jitter(image: Image.Image, rng: np.random.Generator, sigma: float = HED_SIGMA) -> Image.Image:
    """hed_jitter with alpha ~ N(1, sigma^2) and beta ~ N(0, sigma^2) per stain, drawn from `rng`."""
    alpha = rng.normal(1.0, sigma, size=3)
    beta = rng.normal(0.0, sigma, size=3)
    return hed_jitter(image, alpha, beta)
