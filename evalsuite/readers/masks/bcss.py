"""BCSS (Breast Cancer Semantic Segmentation, Amgad et al. 2019), read as eva reads it.

Sources read: kaiko-ai/eva src/eva/vision/data/datasets/segmentation/bcss.py, datasets/wsi.py,
wsi/patching/coordinates.py, wsi/patching/samplers/{grid,_utils}.py, wsi/backends/pil.py,
configs/vision/pathology/offline/segmentation/bcss.yaml and docs/datasets/bcss.md at 73b61a7;
PathologyDataScience/BCSS README.md and meta/gtruth_codes.tsv at 3c49d55.

Layout under --data-root (the 0.25 um/px Google Drive release):
  rgbs_colorNormalized/TCGA-<TSS>-<patient>-DX1_xmin<x>_ymin<y>_MPP-0.2500.png  (151 RGB ROIs)
  masks/<same name>.png  (8-bit, one ground-truth code 0..21 per pixel, gtruth_codes.tsv)
Class map (the grouping eva's docstring cites as the challenge baseline's): 0 background = outside_roi (code 0);
1 tumor = tumor (1) + angioinvasion (19) + dcis (20); 2 stroma (2); 3 inflammatory = lymphocytic_infiltrate (3) +
plasma_cells (10) + other_immune_infiltrate (11); 4 necrosis = necrosis_or_debris (4); 5 other = every other code.
eva's `_map_classes` has no entry for code 1 (`tumor`), so its tumor pixels land in `other`: `class_map: eva`
reproduces that table, for comparison with eva's numbers; the default `grouped` keeps tumor in tumor.
BCSS's README asks that outside_roi get zero weight in training;
eva trains on it as class 0 and leaves it out of its headline Dice, as dice_fg_mean does.
Resolution and tiles: eva reads 224x224 px patches at 0.5 um/px, i.e. 448x448 px of the 0.25 um/px
image on a non-overlapping grid that leaves out a remainder narrower than a patch (at most 1,000
per image, a cap no BCSS ROI reaches), then resizes image and mask (nearest) to 224. We halve each
image once (bilinear, the odd last row/column dropped) and its mask (every second pixel: the
nearest resize's choice) and cut the same grid of 224 px tiles; labels stay at 224x224.
Splits, as eva: by the tissue source site (the TCGA name's second field): test = OL, LL, E2, EW,
GM, S3; val = BH, C8, A8, A1, E9; train = the others (eva's docs: 76 / 30 / 45 images).
"""

import re
from pathlib import Path

import numpy as np
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_classes, check_count, layout_error, list_files, open_rgb, require_dir
from evalsuite.readers.item_identity import relative_name
from evalsuite.readers.masks.base import (
    CachedSource,
    SegmentationReader,
    check_mask_values,
    check_tiling,
    grid_tiles,
    image_size,
)

TASK = "bcss"
IMAGES, MASKS = "rgbs_colorNormalized", "masks"
LAYOUT = f"{IMAGES}/TCGA-*.png with {MASKS}/TCGA-*.png of the same names"
CLASSES = ["background", "tumor", "stroma", "inflammatory", "necrosis", "other"]
CODES = 22  # gtruth_codes.tsv: 0 outside_roi .. 21 other
OTHER = CLASSES.index("other")
# ground-truth code -> class id, as eva's _map_classes; unlisted codes are `other`
EVA_GROUPS = {0: 0, 19: 1, 20: 1, 2: 2, 3: 3, 10: 3, 11: 3, 4: 4}
CLASS_MAPS = {"eva": EVA_GROUPS, "grouped": {**EVA_GROUPS, 1: 1}}
TEST_SITES = {"OL", "LL", "E2", "EW", "GM", "S3"}
VAL_SITES = {"BH", "C8", "A8", "A1", "E9"}
OFFICIAL_COUNTS = {"train": 76, "val": 30, "test": 45}
SOURCE_MPP, TARGET_MPP = 0.25, 0.5
HALVING = 2  # 0.25 -> 0.5 um/px, eva's target_mpp
NAME = re.compile(r"^TCGA-([A-Z0-9]{2})-[A-Z0-9]{4}-.*_MPP-([0-9.]+)$")


def lookup_table(class_map: str) -> np.ndarray:
    table = np.full(CODES, OTHER, dtype=np.uint8)
    for code, class_id in CLASS_MAPS[class_map].items():
        table[code] = class_id
    return table


def site_of(path: Path) -> str:
    """The TCGA tissue source site of an ROI file; the name must carry the 0.25 um/px of this release."""
    match = NAME.match(path.stem)
    if not match or float(match.group(2)) != SOURCE_MPP:
        raise layout_error(TASK, f"unexpected file name {path}", "TCGA-<site>-<patient>-..._MPP-0.2500.png in " + LAYOUT)
    return match.group(1)


def split_of(site: str) -> str:
    return "test" if site in TEST_SITES else "val" if site in VAL_SITES else "train"


class BcssImages(CachedSource):
    """The ROIs at half resolution: images halved (bilinear), masks by every second pixel, mapped to classes."""

    def __init__(self, images: list, masks: list, table: np.ndarray):
        super().__init__()
        self.images, self.masks, self.table = images, masks, table

    def read_image(self, index: int) -> np.ndarray:
        image = open_rgb(self.images[index], max_pixels=None)  # trusted ROIs of several thousand px a side
        width, height = image.size
        even = image.crop((0, 0, width - width % HALVING, height - height % HALVING))
        return np.asarray(even.resize((width // HALVING, height // HALVING), Image.BILINEAR))

    def mask(self, index: int) -> np.ndarray:
        path = self.masks[index]
        try:
            with Image.open(path) as opened:
                if opened.mode not in ("L", "P"):
                    raise EvalsuiteError(f"{TASK}: {path} is a {opened.mode} image; expected the 8-bit BCSS mask "
                                         f"(one ground-truth code 0..{CODES - 1} per pixel)")
                codes = np.array(opened)
        except (OSError, SyntaxError, ValueError) as exc:
            raise EvalsuiteError(f"{TASK}: cannot read mask {path} ({' '.join(str(exc).split())}); re-download it") \
                from None
        check_mask_values(codes, CODES, f"{TASK}: {path}")
        height, width = codes.shape[0] // HALVING, codes.shape[1] // HALVING
        return self.table[codes[:height * HALVING:HALVING, :width * HALVING:HALVING]]


class BcssReader(SegmentationReader):
    interval_unit = "image"  # the bootstrap resamples ROIs with all their tiles

    def __init__(self, card, data_root: Path, check_counts: bool = True, tile_size_px: int = 224,
                 stride_px: int = 224, class_map: str = "grouped"):
        check_classes(card, CLASSES, TASK, "class map")
        check_tiling(card, tile_size_px, stride_px)
        if class_map not in CLASS_MAPS:
            raise EvalsuiteError(f"task card {card.path}: reader.args.class_map must be one of "
                                 f"{', '.join(CLASS_MAPS)}, got {class_map!r}")
        super().__init__(card, tile_size_px)
        root = Path(data_root)
        images, masks, splits = self.scan(root)
        for split, expected in OFFICIAL_COUNTS.items():
            check_count(TASK, f"split '{split}' of {root / IMAGES}", splits.count(split), expected, check_counts)
        tiles = {split: [] for split in OFFICIAL_COUNTS}
        for index, (image, split) in enumerate(zip(images, splits)):
            height, width = (side // HALVING for side in image_size(image, TASK))
            tiles[split] += grid_tiles(index, height, width, tile_size_px, stride_px, cover=False)
        self.tiles = {split: np.array(rows, dtype=np.int64).reshape(-1, 3) for split, rows in tiles.items()}
        self.source = BcssImages(images, masks, lookup_table(class_map))
        self.source_names = [relative_name(path, root) for path in images]
        self.source_clusters = [path.stem for path in images]

    def scan(self, root: Path) -> tuple[list, list, list]:
        images = list_files(require_dir(root / IMAGES, TASK, LAYOUT), ".png")
        require_dir(root / MASKS, TASK, LAYOUT)
        if not images:
            raise layout_error(TASK, f"no .png images in {root / IMAGES}", LAYOUT)
        masks = []
        for image in images:
            mask = root / MASKS / image.name
            if not mask.is_file():
                raise layout_error(TASK, f"missing mask {mask} for {image}", LAYOUT)
            if image_size(mask, TASK) != image_size(image, TASK):
                raise EvalsuiteError(f"{TASK}: {mask} is {image_size(mask, TASK)} px but {image} is "
                                     f"{image_size(image, TASK)} (height, width); re-download the pair")
            masks.append(mask)
        return images, masks, [split_of(site_of(image)) for image in images]
