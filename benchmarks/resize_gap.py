"""What Pillow's two-step downscale (``reducing_gap``, the transform's REDUCING_GAP) saves and changes.

What is measured
----------------
Square regions cut from the two real H&E images evalsuite ships (``evalsuite/data/hgsc_nest/hgsc_nest.jpg``,
``evalsuite/data/hgsc_stromal/hgsc_stromal_he.jpg``; BSD-3, licences beside them), scaled up first to each
``--sides`` size (a photo-sized region: 1536 px is BACH's centre square), each resized to the backbone's 224 px
bicubic input twice: as torchvision's Resize does it (Pillow, no gap) and as evalsuite's transform does
(``reducing_gap=REDUCING_GAP``). Per side:

- ``ms exact``, ``ms gap``, ``speed-up``: resize milliseconds an image, and their ratio;
- ``pixels mean|max``: mean and largest absolute difference of the 224x224x3 uint8 results (grey levels of 255);
- ``cos min``: the smallest cosine similarity between the two inputs' features through evalsuite's
  ``efficientnet_lite0_imagenet`` (real ImageNet weights), and ``feat rel``: the largest feature difference over
  the feature vector's norm.

Sides below 6x the input (672 px at 224) shrink less than 2 x REDUCING_GAP and Pillow skips the box step: their
rows must read speed-up ~1 and differences 0.

Run: ``python benchmarks/resize_gap.py [--sides 448,700,1024,1536,2048 --regions 12]`` (under a minute).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from _shared import format_table, host_tag, machine_line

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("hgsc_nest/hgsc_nest.jpg", "hgsc_stromal/hgsc_stromal_he.jpg")
INPUT_PX = 224
REGION_PX = 700  # of each 1500 px source, before scaling to the side measured


def regions(side: int, count: int) -> list:
    """`count` RGB images of side x side: regions of the real crops at spread offsets, scaled to `side`."""
    from PIL import Image

    images = []
    for index in range(count):
        with Image.open(REPO / "evalsuite" / "data" / SOURCES[index % len(SOURCES)]) as source:
            offset = (index * 97) % (min(source.size) - REGION_PX)
            region = source.convert("RGB").crop((offset, offset, offset + REGION_PX, offset + REGION_PX))
        images.append(region.resize((side, side), Image.Resampling.LANCZOS))
    return images


def timed_resizes(images: list, transform_resize) -> tuple:
    started = time.perf_counter()
    resized = [transform_resize(image) for image in images]
    return resized, (time.perf_counter() - started) / len(images) * 1000


def feature_rows(backbone, exact: list, gap: list) -> tuple:
    """(smallest cosine similarity, largest |difference| over the norm) of the two resizes' features."""
    import torch
    from torchvision.transforms import functional as F

    def features(images):
        batch = torch.stack([F.normalize(F.to_tensor(i), backbone.data_config["mean"], backbone.data_config["std"])
                             for i in images])
        with torch.inference_mode():
            return backbone.pooled_features(batch).float()

    a, b = features(exact), features(gap)
    cosine = torch.nn.functional.cosine_similarity(a, b, dim=1)
    relative = (a - b).abs().amax(dim=1) / a.norm(dim=1)
    return float(cosine.min()), float(relative.max())


def main() -> int:
    import numpy as np
    from torchvision import transforms as T

    from evalsuite.models.backbones import build_backbone
    from evalsuite.models.transforms import REDUCING_GAP, Resize

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default="448,700,1024,1536,2048", help="square sides in px, comma-separated")
    parser.add_argument("--regions", type=int, default=12, help="images per side (default 12)")
    args = parser.parse_args()
    print(machine_line())
    print(host_tag())
    backbone = build_backbone("efficientnet_lite0_imagenet")
    exact_resize = T.Resize((INPUT_PX, INPUT_PX), interpolation=T.InterpolationMode.BICUBIC, antialias=True)
    gap_resize = Resize((INPUT_PX, INPUT_PX), T.InterpolationMode.BICUBIC, REDUCING_GAP)
    rows = []
    for side in (int(s) for s in args.sides.split(",")):
        images = regions(side, args.regions)
        exact, exact_ms = timed_resizes(images, exact_resize)
        gap, gap_ms = timed_resizes(images, gap_resize)
        diffs = [np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16)) for a, b in zip(exact, gap)]
        cos_min, relative_max = feature_rows(backbone, exact, gap)
        rows.append([side, f"{exact_ms:.2f}", f"{gap_ms:.2f}", f"{exact_ms / gap_ms:.2f}",
                     f"{statistics.mean(float(d.mean()) for d in diffs):.3f}|{max(int(d.max()) for d in diffs)}",
                     f"{cos_min:.6f}", f"{relative_max:.2e}"])
    print(host_tag())
    print(f"reducing_gap {REDUCING_GAP}, bicubic to {INPUT_PX} px, {args.regions} real H&E regions a side")
    print(format_table(["side_px", "ms_exact", "ms_gap", "speed-up", "pixels mean|max", "cos_min", "feat_rel"],
                       rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
