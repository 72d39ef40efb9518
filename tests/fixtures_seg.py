"""Tiny copies of the segmentation datasets in their exact on-disk layouts.

File and folder names, array keys, dtypes and shapes are those of the distributed datasets
(PanNuke fold arrays, CoNSeP HoVer-Net .png/.mat pairs, MoNuSAC per-patient .tif/.xml); only
the number of images is smaller (and MoNuSAC images are small, as many real ones are), so the
cards run end to end in seconds with --no-count-check. Nuclei are dark discs on a pink
background, so a probe has something to learn.
"""

from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

BACKGROUND_RGB = (230, 180, 210)
NUCLEUS_RGB = (70, 40, 120)
MONUSAC_TRAIN = "MoNuSAC_images_and_annotations"
MONUSAC_TEST = "MoNuSAC Testing Data and Annotations"
MONUSAC_CLASSES = ["Epithelial", "Lymphocyte", "Neutrophil", "Macrophage"]


def _discs(rng, height: int, width: int, count: int, n_types: int):
    """(type map int [H, W] with 0 = none and 1..n_types, instance map int [H, W], list of (type, cy, cx, r))."""
    types = np.zeros((height, width), dtype=np.int64)
    instances = np.zeros((height, width), dtype=np.int64)
    yy, xx = np.mgrid[:height, :width]
    placed = []
    for instance in range(1, count + 1):
        radius = int(rng.integers(5, 12))
        cy, cx = int(rng.integers(radius, height - radius)), int(rng.integers(radius, width - radius))
        kind = int(rng.integers(1, n_types + 1))
        inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= radius ** 2
        types[inside], instances[inside] = kind, instance
        placed.append((kind, cy, cx, radius))
    return types, instances, placed


def _rgb(rng, types: np.ndarray) -> np.ndarray:
    image = np.empty((*types.shape, 3), dtype=np.float64)
    image[:] = BACKGROUND_RGB
    image[types > 0] = NUCLEUS_RGB
    image += rng.normal(0, 12, image.shape)
    return np.clip(image, 0, 255)


# ---------------------------------------------------------------- PanNuke

def pannuke_paths(root: Path, fold: int) -> dict:
    base = Path(root) / f"Fold {fold}"
    return {"images": base / "images" / f"fold{fold}" / "images.npy",
            "types": base / "images" / f"fold{fold}" / "types.npy",
            "masks": base / "masks" / f"fold{fold}" / "masks.npy"}


def make_pannuke(root: Path, counts=(3, 2, 2), size: int = 256) -> Path:
    """Fold N/images/foldN/{images,types}.npy and Fold N/masks/foldN/masks.npy, float64 as released."""
    rng = np.random.default_rng(0)
    for fold, count in enumerate(counts, start=1):
        paths = pannuke_paths(root, fold)
        for path in paths.values():
            path.parent.mkdir(parents=True, exist_ok=True)
        images = np.empty((count, size, size, 3), dtype=np.float64)
        masks = np.zeros((count, size, size, 6), dtype=np.float64)
        for i in range(count):
            types, instances, _ = _discs(rng, size, size, 25, 5)
            images[i] = np.rint(_rgb(rng, types))
            for channel in range(5):
                masks[i, ..., channel] = np.where(types == channel + 1, instances, 0)
            masks[i, ..., 5] = (types == 0).astype(np.float64)
        np.save(paths["images"], images)
        np.save(paths["masks"], masks)
        np.save(paths["types"], np.array(["Breast", "Colon", "Lung"] * count)[:count])
    return Path(root)


# ---------------------------------------------------------------- CoNSeP

def make_consep(root: Path, train: int = 3, test: int = 2, size: int = 1000) -> Path:
    """{Train,Test}/Images/<split>_<k>.png (RGBA) and {Train,Test}/Labels/<split>_<k>.mat with the HoVer-Net keys."""
    rng = np.random.default_rng(1)
    for folder, count in (("Train", train), ("Test", test)):
        for k in range(1, count + 1):
            types, instances, placed = _discs(rng, size, size, 120, 7)
            rgba = np.concatenate([_rgb(rng, types).astype(np.uint8), np.full((size, size, 1), 255, np.uint8)], axis=2)
            image = Path(root) / folder / "Images" / f"{folder.lower()}_{k}.png"
            image.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rgba, "RGBA").save(image)
            write_consep_mat(Path(root) / folder / "Labels" / f"{folder.lower()}_{k}.mat", types, instances, placed)
    return Path(root)


def write_consep_mat(path: Path, types: np.ndarray, instances: np.ndarray, placed, keys=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "inst_map": instances.astype(np.float64),
        "type_map": types.astype(np.float64),
        "inst_type": np.array([[kind] for kind, *_ in placed], dtype=np.float64),
        "inst_centroid": np.array([[cx, cy] for _, cy, cx, _ in placed], dtype=np.float64),
    }
    scipy.io.savemat(path, {k: v for k, v in content.items() if keys is None or k in keys})


# ---------------------------------------------------------------- MoNuSAC

def monusac_xml(polygons_by_class: dict) -> str:
    """An Aperio ImageScope annotation file as MoNuSAC ships it: one Annotation per class."""
    parts = ['<?xml version="1.0"?>', '<Annotations MicronsPerPixel="0.252100">']
    for a, (name, polygons) in enumerate(polygons_by_class.items(), start=1):
        parts += [f'<Annotation Id="{a}" Name="" ReadOnly="0" NameReadOnly="0" LineColorReadOnly="0" Incremental="0" '
                  f'Type="4" LineColor="65280" Visible="1" Selected="1" MarkupImagePath="" MacroName="">',
                  '<Attributes>', f'<Attribute Name="{name}" Id="0" Value=""/>', '</Attributes>', '<Regions>',
                  '<RegionAttributeHeaders>',
                  '<AttributeHeader Id="9999" Name="Region" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9997" Name="Length" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9996" Name="Area" ColumnWidth="-1"/>',
                  '<AttributeHeader Id="9998" Name="Text" ColumnWidth="-1"/>',
                  '</RegionAttributeHeaders>']
        for r, polygon in enumerate(polygons, start=1):
            parts += [f'<Region Id="{r}" Type="0" Zoom="1" Selected="0" ImageLocation="" ImageFocus="-1" '
                      f'Length="40.0" Area="100.0" LengthMicrons="10.0" AreaMicrons="6.3" Text="" NegativeROA="0" '
                      f'InputRegionId="0" Analyze="1" DisplayId="{r}">', '<Attributes/>', '<Vertices>']
            parts += [f'<Vertex X="{x:.4f}" Y="{y:.4f}" Z="0"/>' for x, y in polygon]
            parts += ['</Vertices>', '</Region>']
        parts += ['</Regions>', '<Plots/>', '</Annotation>']
    parts.append('</Annotations>')
    return "\n".join(parts) + "\n"


def _octagon(cy: float, cx: float, radius: float) -> list:
    angles = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    return [(cx + radius * np.cos(a), cy + radius * np.sin(a)) for a in angles]


def write_monusac_image(folder: Path, name: str, size, rng, ambiguous: bool = False) -> tuple:
    """<folder>/<name>.tif (RGB) and <name>.xml; returns the (type id, polygon) list drawn."""
    width, height = size
    types = np.zeros((height, width), dtype=np.int64)
    by_class = {c: [] for c in MONUSAC_CLASSES}
    yy, xx = np.mgrid[:height, :width]
    for _ in range(max(4, width * height // 2500)):
        radius = float(rng.integers(4, 9))
        cy, cx = float(rng.integers(10, height - 10)), float(rng.integers(10, width - 10))
        kind = int(rng.integers(1, 5))
        by_class[MONUSAC_CLASSES[kind - 1]].append(_octagon(cy, cx, radius))
        types[(yy - cy) ** 2 + (xx - cx) ** 2 <= radius ** 2] = kind
    if ambiguous:
        by_class["Ambiguous"] = [_octagon(height / 2, width / 2, 10.0)]
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_rgb(rng, types).astype(np.uint8)).save(folder / f"{name}.tif")
    (folder / f"{name}.xml").write_text(monusac_xml(by_class))
    return by_class


def make_monusac(root: Path) -> Path:
    """MoNuSAC_images_and_annotations/<patient>/<patient>_<k>.{tif,xml} (4 patients) and the testing folder
    (1 patient, with an Ambiguous annotation). Sizes vary and are not multiples of the 256 px tile."""
    rng = np.random.default_rng(2)
    train = {"TCGA-5P-A9K0-01Z-00-DX1": [(300, 200)], "TCGA-55-1594-01Z-00-DX1": [(120, 90), (260, 260)],
             "TCGA-73-4668-01Z-00-DX1": [(200, 310)], "TCGA-A2-A0ES-01Z-00-DX1": [(256, 256)]}
    test = {"TCGA-2Z-A9JG-01Z-00-DX1": [(280, 150), (113, 81)]}
    for folder, patients in ((MONUSAC_TRAIN, train), (MONUSAC_TEST, test)):
        for patient, sizes in patients.items():
            for k, size in enumerate(sizes, start=1):
                write_monusac_image(Path(root) / folder / patient, f"{patient}_{k}", size, rng,
                                    ambiguous=folder == MONUSAC_TEST)
    return Path(root)
