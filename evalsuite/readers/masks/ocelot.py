"""OCELOT 2023 tissue segmentation, read from the release as distributed (Zenodo record 8417503,
ocelot2023_v1.0.1.zip), as THUNDER uses it.

Layout under --data-root (the unzipped folder, or the folder holding it):
  ocelot2023_v1.0.1/images/{train,val,test}/tissue/<id>.jpg       (1024x1024 tissue patches, 0.2 um/px per THUNDER)
  ocelot2023_v1.0.1/annotations/{train,val,test}/tissue/<id>.png  (label values 1 background, 2 cancer area,
                                                                   255 unknown)
The release's cell patches and cell point CSVs (images/*/cell, annotations/*/cell) are not read: THUNDER's OCELOT
task is the tissue masks alone (MICS-Lab/thunder src/thunder/datasets/dataset/ocelot.py lists images/<split>/tissue
only, and src/thunder/utils/data.py remaps 1 -> 0, 2 -> 1, 255 -> ignored, at 6fe47e0).
Class map: 0 background (value 1), 1 cancer_area (value 2); 255 (unknown) is ignored in loss and metric; any other
value is an error naming the file.
Splits: the release's train / val / test folders (400 / 137 / 126 images: THUNDER's 6,400 / 2,192 / 2,016 tiles at
16 tiles per 1024 px image, src/thunder/config/dataset/ocelot.yaml). Tiles: 256 x 256, stride 256, the remainder
dropped (split_grid.py).
"""

from pathlib import Path

from evalsuite.metrics.segmentation import IGNORE_INDEX
from evalsuite.readers.files import check_classes, layout_error, list_files, require_dir
from evalsuite.readers.masks.split_grid import (
    SPLITS,
    THUNDER_TILE_PX,
    LabelledImage,
    LabelPngPairs,
    SplitGridReader,
    label_lut,
)

TASK = "ocelot"
RELEASE_FOLDER = "ocelot2023_v1.0.1"
LAYOUT = (f"{RELEASE_FOLDER}/images/{{train,val,test}}/tissue/*.jpg with "
          f"{RELEASE_FOLDER}/annotations/{{train,val,test}}/tissue/*.png")
CLASSES = ["background", "cancer_area"]
# OCELOT tissue label value -> class id (THUNDER src/thunder/utils/data.py).
TISSUE_LUT = label_lut({1: 0, 2: 1, 255: IGNORE_INDEX})
EXPECTED_VALUES = "1 (background), 2 (cancer area) or 255 (unknown)"
# Images per split: THUNDER's tile counts (ocelot.yaml nb_{train,val,test}_samples) / 16 tiles per image.
OFFICIAL_IMAGES = {"train": 400, "val": 137, "test": 126}
TILES_PER_IMAGE = 16


def release_root(root: Path) -> Path:
    """The folder holding images/ and annotations/: the unzipped release folder, or --data-root itself."""
    nested = root / RELEASE_FOLDER
    return nested if nested.is_dir() else root


class OcelotReader(SplitGridReader):
    TASK, LAYOUT, OFFICIAL_IMAGES = TASK, LAYOUT, OFFICIAL_IMAGES

    def __init__(self, card, data_root: Path, tile_size_px: int = THUNDER_TILE_PX, stride_px: int = THUNDER_TILE_PX,
                 check_counts: bool = True):
        check_classes(card, CLASSES, TASK, "class map (tissue label 1 background, 2 cancer area)")
        super().__init__(card, data_root, tile_size_px, stride_px, check_counts)

    def scan(self, root: Path) -> list[LabelledImage]:
        base = release_root(root)
        labelled = []
        for split in SPLITS:
            images = list_files(require_dir(base / "images" / split / "tissue", TASK, LAYOUT), ".jpg")
            labels = require_dir(base / "annotations" / split / "tissue", TASK, LAYOUT)
            for image in images:
                mask = labels / f"{image.stem}.png"
                if not mask.is_file():
                    raise layout_error(TASK, f"missing tissue label {mask} for {image}", LAYOUT)
                labelled.append(LabelledImage(split, image, mask))
        return labelled

    def make_source(self, labelled: list[LabelledImage]) -> LabelPngPairs:
        return LabelPngPairs(TASK, [item.image for item in labelled], [item.mask for item in labelled], TISSUE_LUT,
                             EXPECTED_VALUES)
