"""MoNuSAC 2020 (multi-organ nuclei segmentation and classification), read as distributed.

Layout under --data-root (one folder per patient; the `.svs` beside each `.tif` is not used):
  MoNuSAC_images_and_annotations/<patient>/<image>.tif + <image>.xml        (209 images)
  MoNuSAC Testing Data and Annotations/<patient>/<image>.tif + <image>.xml  (85 images)
Each XML (Aperio ImageScope) has one `Annotation` per class, named by its first
`Attributes/Attribute@Name` (Epithelial, Lymphocyte, Neutrophil, Macrophage; the test set adds
Ambiguous), holding polygons as `Regions/Region/Vertices/Vertex@X,@Y` in image pixels.
Class map: 0 background, 1 Epithelial, 2 Lymphocyte, 3 Neutrophil, 4 Macrophage. Polygons are
rasterised by pixel centres as the MoNuSAC organisers' mask code (ruchikaverma-iitg/MoNuSAC
Mask_generation.ipynb) and eva (kaiko-ai/eva src/eva/vision/data/datasets/segmentation/monusac.py)
do with skimage.draw.polygon: the pixel in row r, column c is filled when the point (X=c, Y=r)
lies inside the polygon or on its boundary. (An outline drawn through every pixel an edge
touches would dilate a nucleus of 4-8 px radius by a ring of about one pixel.) Polygons are
filled in file order, a later one winning where two overlap; Ambiguous polygons are filled
last with the ignore value (255), so those pixels count in neither the loss nor the metric.
Regions with fewer than 3 vertices are skipped.
Tiles: images vary (about 81 to 1,956 px a side), so each is cut into `tile_size_px` (256)
tiles with stride `stride_px` (256) covering it; the last row and column of tiles are padded
past the image edge (white pixels, ignored labels). Tiles are resized to the backbone input;
labels stay at 256x256.
Splits: test = the testing folder; val = `val_fraction` (0.2) of the training patients chosen
with `val_seed` (0), whole patients; train = the other training patients.
"""

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.segmentation import IGNORE_INDEX
from evalsuite.readers.files import check_count, layout_error, list_files, open_rgb, require_dir
from evalsuite.readers.masks.base import (
    CachedSource,
    GridImage,
    GridTilingReader,
    image_size,
)

TASK = "monusac"
TRAIN_FOLDER = "MoNuSAC_images_and_annotations"
TEST_FOLDER = "MoNuSAC Testing Data and Annotations"
LAYOUT = f"'{TRAIN_FOLDER}/<patient>/<image>.{{tif,xml}}' and '{TEST_FOLDER}/<patient>/<image>.{{tif,xml}}'"
CLASSES = ["background", "Epithelial", "Lymphocyte", "Neutrophil", "Macrophage"]
AMBIGUOUS = "Ambiguous"
OFFICIAL_COUNTS = {TRAIN_FOLDER: 209, TEST_FOLDER: 85}


def read_polygons(path: Path) -> list[tuple[int, list]]:
    """[(class id or IGNORE_INDEX, [(x, y), ...]), ...] of one annotation file, Ambiguous last."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise EvalsuiteError(f"{TASK}: cannot parse {path} as XML ({' '.join(str(exc).split())})") from None
    polygons, ambiguous = [], []
    for annotation in root.iter("Annotation"):
        attribute = annotation.find("Attributes/Attribute")
        name = attribute.get("Name") if attribute is not None else None
        if name != AMBIGUOUS and name not in CLASSES[1:]:
            raise EvalsuiteError(f"{TASK}: {path} has an Annotation named {name!r}; expected one of "
                                 f"{', '.join(CLASSES[1:] + [AMBIGUOUS])}")
        value = IGNORE_INDEX if name == AMBIGUOUS else CLASSES.index(name)
        for region in annotation.iter("Region"):
            try:
                vertices = [(float(v.get("X")), float(v.get("Y"))) for v in region.iter("Vertex")]
            except (TypeError, ValueError):
                raise EvalsuiteError(f"{TASK}: {path} has a Vertex without numeric X and Y") from None
            if len(vertices) >= 3:
                (ambiguous if value == IGNORE_INDEX else polygons).append((value, vertices))
    if not polygons and not ambiguous:
        raise EvalsuiteError(f"{TASK}: {path} has no polygons (no Annotation/Regions/Region/Vertices with 3 or "
                             f"more Vertex); expected a MoNuSAC annotation file")
    return polygons + ambiguous


# Points x edges evaluated at once: bounds the memory of one large polygon (32 MiB of float64).
POINT_EDGE_PAIRS = 1 << 22


def fill_polygon(canvas: np.ndarray, vertices, value: int) -> None:
    """Set `value` at every pixel of `canvas` whose centre (X = column, Y = row) is inside the polygon or on it.

    The test of skimage.draw.polygon (O'Rourke's crossing count): from the centre, count the
    edges crossed by a ray to the right and by a ray to the left; an odd count on either
    side means inside or on an edge, and a vertex at the centre is on the polygon."""
    xs, ys = np.asarray(vertices, dtype=np.float64).T
    height, width = canvas.shape
    top, bottom = max(0, int(np.floor(ys.min()))), min(height - 1, int(np.ceil(ys.max())))
    left, right = max(0, int(np.floor(xs.min()))), min(width - 1, int(np.ceil(xs.max())))
    if top > bottom or left > right:
        return
    columns = np.arange(left, right + 1, dtype=np.float64)
    rows_per_chunk = max(1, POINT_EDGE_PAIRS // (len(columns) * len(xs)))
    for first in range(top, bottom + 1, rows_per_chunk):
        rows = np.arange(first, min(bottom + 1, first + rows_per_chunk), dtype=np.float64)
        inside = _on_or_inside(xs, ys, columns[None, :, None], rows[:, None, None])
        canvas[first:first + len(rows), left:right + 1][inside] = value


def _on_or_inside(xs, ys, x, y) -> np.ndarray:
    """[rows, columns] bool for the points (x, y) broadcast against the polygon's edges on the last axis."""
    x0, y0 = xs - x, ys - y  # each vertex relative to the point
    x1, y1 = np.roll(x0, 1, axis=-1), np.roll(y0, 1, axis=-1)  # the previous vertex: edge (previous, vertex)
    on_vertex = ((np.abs(x0) < 1e-12) & (np.abs(y0) < 1e-12)).any(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing_x = (x0 * y1 - x1 * y0) / (y1 - y0)
    right_crossings = (((y0 > 0) != (y1 > 0)) & (crossing_x > 0)).sum(axis=-1)
    left_crossings = (((y0 < 0) != (y1 < 0)) & (crossing_x < 0)).sum(axis=-1)
    return on_vertex | (right_crossings % 2 == 1) | (left_crossings % 2 == 1)


class MonusacImages(CachedSource):
    def __init__(self, images: list, annotations: list, sizes: list):
        super().__init__()
        self.images, self.annotations, self.sizes = images, annotations, sizes

    def read_image(self, index: int) -> np.ndarray:
        return np.asarray(open_rgb(self.images[index]))

    def mask(self, index: int) -> np.ndarray:
        canvas = np.zeros(self.sizes[index], dtype=np.uint8)
        for value, vertices in read_polygons(self.annotations[index]):
            fill_polygon(canvas, vertices, value)
        return canvas


class MonusacReader(GridTilingReader):
    CLASSES, TASK, CLASS_MAP = CLASSES, TASK, "class map (background + the 4 annotated nucleus classes)"
    TILE_PX = STRIDE_PX = 256
    COVER = True  # image sizes vary: the last tile of a row or column is padded
    # A patient's images are no more independent than one image's tiles: the bootstrap resamples patients, the unit
    # val is carved by.
    interval_unit = "patient"

    def scan(self, root: Path, check_counts: bool) -> list[GridImage]:
        images, annotations, sizes, found_images = [], [], [], []
        for folder in (TRAIN_FOLDER, TEST_FOLDER):
            patients = sorted(p for p in require_dir(root / folder, TASK, LAYOUT).iterdir()
                              if p.is_dir() and not p.name.startswith("."))
            found = [(patient, image) for patient in patients for image in list_files(patient, ".tif")]
            if not found:
                raise layout_error(TASK, f"no <patient>/*.tif images in {root / folder}", LAYOUT)
            check_count(TASK, f"folder '{folder}'", len(found), OFFICIAL_COUNTS[folder], check_counts)
            for patient, image in found:
                annotation = image.with_suffix(".xml")
                if not annotation.is_file():
                    raise layout_error(TASK, f"missing annotation file {annotation} for {image}", LAYOUT)
                read_polygons(annotation)  # validated now: a bad file fails before any extraction
                images.append(image)
                annotations.append(annotation)
                sizes.append(image_size(image, TASK))
                # val carved and the bootstrap drawn by patient
                found_images.append(GridImage(folder == TEST_FOLDER, patient.name, *sizes[-1], patient.name))
        self.source = MonusacImages(images, annotations, sizes)
        return found_images
