"""CoNSeP (colorectal nuclear segmentation and phenotypes), read as distributed with HoVer-Net.

Layout under --data-root:
  Train/Images/<name>.png  (27 images, 1000x1000 at 0.25 um/px; RGBA PNGs are read as RGB)
  Train/Labels/<name>.mat  (MATLAB file with `type_map`, 1000x1000, and `inst_map`, `inst_type`,
                            `inst_centroid`, which are not used)
  Test/Images/<name>.png, Test/Labels/<name>.mat  (14 images)
Class map: the 7 `type_map` types merged to 4 as in the HoVer-Net paper: 0 background,
1 other (type 1), 2 inflammatory (2), 3 epithelial (3 healthy + 4 dysplastic/malignant),
4 spindle-shaped (5 fibroblast + 6 muscle + 7 endothelial).
Tiles: `tile_size_px` x `tile_size_px` (250) with stride `stride_px` (250): 16 non-overlapping
tiles per 1000x1000 image (a remainder narrower than a tile would be left out), as eva's
250x250 patches; each tile is resized to the backbone input, labels stay at 250x250.
Splits: test = Test (224 tiles); val = `val_fraction` (0.2, i.e. 5) of the Train images chosen
with `val_seed` (0), whole images, never single tiles; train = the other 22 Train images.
"""

from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import check_count, layout_error, list_files, open_rgb, require_dir
from evalsuite.readers.masks.base import (
    CachedSource,
    GridImage,
    GridTilingReader,
    check_mask_values,
    image_size,
)

TASK = "consep"
LAYOUT = "{Train,Test}/Images/*.png with {Train,Test}/Labels/*.mat (key type_map)"
CLASSES = ["background", "other", "inflammatory", "epithelial", "spindle"]
TYPE_KEY = "type_map"
# type_map value -> class id: {3, 4} -> epithelial, {5, 6, 7} -> spindle.
MERGE = np.array([0, 1, 2, 3, 3, 4, 4, 4], dtype=np.uint8)
OFFICIAL_COUNTS = {"Train": 27, "Test": 14}


class ConsepImages(CachedSource):
    def __init__(self, images: list, labels: list):
        super().__init__()
        self.images, self.labels = images, labels

    def read_image(self, index: int) -> np.ndarray:
        return np.asarray(open_rgb(self.images[index]))

    def mask(self, index: int) -> np.ndarray:
        import scipy.io  # 0.08 s of every run's start-up when imported with the readers registry

        path = self.labels[index]
        try:
            types = scipy.io.loadmat(path, variable_names=[TYPE_KEY]).get(TYPE_KEY)
        except (OSError, ValueError, TypeError, NotImplementedError) as exc:
            raise _unreadable(path, exc) from None
        if types is None:
            raise EvalsuiteError(f"{TASK}: {path} has no '{TYPE_KEY}'")
        types = np.asarray(types)
        numeric = np.issubdtype(types.dtype, np.number)
        if not numeric or not np.isfinite(types).all() or (types != np.round(types)).any():
            raise EvalsuiteError(f"{TASK}: {path} '{TYPE_KEY}' holds non-integer values")
        check_mask_values(types.astype(np.int64), len(MERGE), f"{TASK}: {path} '{TYPE_KEY}'")
        return MERGE[types.astype(np.int64)]


def _unreadable(path: Path, exc: Exception) -> EvalsuiteError:
    return EvalsuiteError(f"{TASK}: cannot read {path} as a MATLAB file ({' '.join(str(exc).split())}); re-download it")


def _type_map_shape(path: Path) -> tuple:
    """The shape of `type_map` from the file's directory, without reading the arrays."""
    import scipy.io

    try:
        entries = scipy.io.whosmat(path)
    except (OSError, ValueError, TypeError, NotImplementedError) as exc:
        raise _unreadable(path, exc) from None
    shapes = {name: tuple(shape) for name, shape, _ in entries}
    if TYPE_KEY not in shapes:
        raise EvalsuiteError(f"{TASK}: {path} has no '{TYPE_KEY}' (found {', '.join(shapes) or 'nothing'}); "
                             f"expected the HoVer-Net CoNSeP label file")
    return shapes[TYPE_KEY]


class ConsepReader(GridTilingReader):
    CLASSES, TASK, CLASS_MAP = CLASSES, TASK, "class map (type_map 7 types merged to 4)"
    TILE_PX = STRIDE_PX = 250  # 1000 px images: four tiles a side
    COVER = False

    def scan(self, root: Path, check_counts: bool) -> list[GridImage]:
        images, labels, found_images = [], [], []
        for folder in ("Train", "Test"):
            found = list_files(require_dir(root / folder / "Images", TASK, LAYOUT), ".png")
            require_dir(root / folder / "Labels", TASK, LAYOUT)
            if not found:
                raise layout_error(TASK, f"no .png images in {root / folder / 'Images'}", LAYOUT)
            check_count(TASK, f"folder {folder}", len(found), OFFICIAL_COUNTS[folder], check_counts)
            for image in found:
                label = root / folder / "Labels" / f"{image.stem}.mat"
                if not label.is_file():
                    raise layout_error(TASK, f"missing label file {label} for {image}", LAYOUT)
                height, width = image_size(image, TASK)
                if _type_map_shape(label) != (height, width):
                    raise EvalsuiteError(f"{TASK}: {label} '{TYPE_KEY}' has shape {_type_map_shape(label)} but "
                                         f"{image} is {height}x{width} (height x width)")
                images.append(image)
                labels.append(label)
                found_images.append(GridImage(folder == "Test", image.stem, height, width,  # val by image
                                              f"{folder}/{image.stem}"))
        self.source = ConsepImages(images, labels)
        return found_images
