"""SPIDER (HistAI) breast, colorectal, skin and thorax patches, read as distributed on the Hugging Face hub.

Layout under --data-root (one organ's folder, e.g. SPIDER-colorectal after `cat spider-colorectal.tar.* | tar -x`):
metadata.json, a list of records {slide_id, image_name, context_info, class, split}, and images/, a flat folder
of 224x224 px patches at 20x. A record's `image_name` is its central patch; `context_info` names the 24
surrounding patches of its 5x5 grid, which this reader does not use: like THUNDER (`convert_to_imagenet.py
--context_size 1`), a sample is the central 224 px patch alone. THUNDER's converted copy,
center_crop/{train,test}/<class>/<slide_id>/*.png, is read as well when there is no metadata.json.

The official split is train / test at the slide level (the hub's dataset cards). Val is carved from train by
slide (`val_fraction` of each class's slides, seeded), as THUNDER does (a random 20 % of train slides); test
bootstrap intervals resample slides.

Facts: record fields from the layout THUNDER's download unpacks (MICS-Lab/thunder src/thunder/datasets/dataset/
spider_colorectal.py at a91f8c5, spider_breast.py in stperrakis/thunder at 2928a39); classes from THUNDER's
src/thunder/config/dataset/spider_{colorectal,skin,thorax}.yaml (a91f8c5) and spider_breast.yaml (5a7ec0b), which
also gives breast's sizes (67,581 train + 13,277 val = 80,858 train records, 12,034 test). The other organs'
sizes were not found in a primary source, so they are not checked.
"""

import json
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.files import (
    check_classes,
    check_count,
    check_unknown_class_folders,
    layout_error,
    list_files,
    require_file,
)
from evalsuite.readers.reader_args import checked_fraction, checked_seed
from evalsuite.readers.splits import carve_val
from evalsuite.readers.tiles.base import FileListReader

TASK = "spider"
METADATA = "metadata.json"
IMAGES = "images"
CONVERTED = "center_crop"  # THUNDER's copy: center_crop/{train,test}/<class>/<slide_id>/*.png
LAYOUT = (f"{METADATA} and {IMAGES}/*.png (one SPIDER organ folder), or THUNDER's "
          f"{CONVERTED}/{{train,test}}/<class>/<slide_id>/*.png")
RECORD_FIELDS = ("slide_id", "image_name", "class", "split")
OFFICIAL_SPLITS = ("train", "test")
CLASSES = {
    "breast": ["Adenosis", "Benign phyllodes tumor", "Ductal carcinoma in situ (high-grade)",
               "Ductal carcinoma in situ (low-grade)", "Fat", "Fibroadenoma", "Fibrocystic changes", "Fibrosis",
               "Invasive non-special type carcinoma", "Lipogranuloma", "Lobular invasive carcinoma",
               "Malignant phyllodes tumor", "Necrosis", "Normal ducts", "Normal lobules", "Sclerosing adenosis",
               "Typical ductal hyperplasia", "Vessels"],
    "colorectal": ["Adenocarcinoma high grade", "Adenocarcinoma low grade", "Adenoma high grade",
                   "Adenoma low grade", "Fat", "Hyperplastic polyp", "Inflammation", "Mucus", "Muscle", "Necrosis",
                   "Sessile serrated lesion", "Stroma healthy", "Vessels"],
    "skin": ["Actinic keratosis", "Apocrine glands", "Basal cell carcinoma", "Carcinoma in situ", "Collagen",
             "Epidermis", "Fat", "Follicle", "Inflammation", "Invasive melanoma", "Kaposi\u2019s sarcoma", "Keratin",
             "Melanoma in situ", "Mercel cell carcinoma", "Muscle", "Necrosis", "Nerves", "Nevus", "Sebaceous gland",
             "Seborrheic keratosis", "Solar elastosis", "Squamous cell carcinoma", "Vessels", "Wart"],
    "thorax": ["Alveoli", "Bronchial cartilage", "Bronchial glands", "Chronic inflammation + fibrosis", "Detritus",
               "Fibrosis", "Hemorrhage", "Lymph node", "Pigment", "Pleura", "Tumor non-small cell",
               "Tumor small cell", "Tumor soft", "Vessel"],
}
# Records per official split; None: not published where we looked (the check is skipped).
OFFICIAL_COUNTS = {"breast": {"train": 80_858, "test": 12_034}, "colorectal": None, "skin": None, "thorax": None}


class Samples:
    """Per official split: image paths, class names and slide ids, in file order."""

    def __init__(self):
        self.by_split = {split: ([], [], []) for split in OFFICIAL_SPLITS}

    def add(self, split: str, path: Path, label: str, slide: str) -> None:
        paths, labels, slides = self.by_split[split]
        paths.append(path)
        labels.append(label)
        slides.append(slide)


def read_metadata(path: Path) -> list:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalsuiteError(f"{TASK}: cannot read {path} ({exc}); re-extract the organ's tar parts") from None
    if not isinstance(records, list):
        raise EvalsuiteError(f"{TASK}: {path} must hold a list of records, got {type(records).__name__}; "
                             f"re-extract the organ's tar parts")
    return records


def samples_from_metadata(root: Path, card) -> Samples:
    path = root / METADATA
    samples = Samples()
    for index, record in enumerate(read_metadata(path)):
        missing = [name for name in RECORD_FIELDS if not isinstance(record, dict) or name not in record]
        if missing:
            raise EvalsuiteError(f"{TASK}: {path} record {index} has no field {', '.join(missing)}; expected "
                                 f"the fields {', '.join(RECORD_FIELDS)} of the distributed file")
        label, split = str(record["class"]), str(record["split"])
        if label not in card.classes or split not in OFFICIAL_SPLITS:
            raise EvalsuiteError(f"{TASK}: {path} record {index}: class '{label}' / split '{split}' is not one of "
                                 f"the card's classes / {list(OFFICIAL_SPLITS)}")
        image = require_file(root / IMAGES / str(record["image_name"]), TASK,
                             f"{LAYOUT} (listed in {METADATA} record {index})")
        samples.add(split, image, label, str(record["slide_id"]))
    return samples


def samples_from_converted(root: Path, card) -> Samples:
    samples = Samples()
    for split in OFFICIAL_SPLITS:
        split_dir = root / CONVERTED / split
        if not split_dir.is_dir():
            raise layout_error(TASK, f"missing {root / METADATA} and folder {split_dir}", LAYOUT)
        check_unknown_class_folders(split_dir, card, TASK)  # the tile readers' rule: named and skipped
        for label in card.classes:
            class_dir = split_dir / label
            slide_dirs = sorted(p for p in class_dir.iterdir() if p.is_dir()) if class_dir.is_dir() else []
            for slide_dir in slide_dirs:
                for image in list_files(slide_dir, ".png"):
                    samples.add(split, image, label, slide_dir.name)
    return samples


class SpiderReader(FileListReader):
    interval_unit = "slide"

    def __init__(self, card, data_root: Path, check_counts: bool = True, organ: str = "", val_fraction: float = 0.2,
                 val_seed: int = 0, preprocess: str = "resize", crop_px: int | None = None):
        super().__init__(card, preprocess, crop_px, data_root)
        if organ not in CLASSES:
            raise EvalsuiteError(f"task card {card.path}: reader.args.organ must be one of {', '.join(CLASSES)}, "
                                 f"got {organ!r}")
        check_classes(card, CLASSES[organ], f"{TASK} {organ}", "classes")
        val_fraction = checked_fraction(card, "val_fraction", val_fraction)  # before the files are listed
        val_seed = checked_seed(card, "val_seed", val_seed)
        root = Path(data_root)
        reading = samples_from_metadata if (root / METADATA).is_file() else samples_from_converted
        samples = reading(root, card)
        self._check_counts(samples, organ, check_counts)
        label_of = {name: index for index, name in enumerate(card.classes)}
        paths, names, slides = samples.by_split["train"]
        labels = np.array([label_of[name] for name in names], dtype=np.int64)
        val = carve_val(labels, val_fraction, val_seed, groups=np.array(slides))
        self.split_from_masks(paths, labels, {"train": ~val, "val": val}, groups=slides)
        paths, names, slides = samples.by_split["test"]
        self.splits["test"] = (paths, np.array([label_of[name] for name in names], dtype=np.int64))
        self.split_groups["test"] = list(slides)

    @staticmethod
    def _check_counts(samples: Samples, organ: str, check_counts: bool) -> None:
        for split, (paths, _, _) in samples.by_split.items():
            if not paths:
                raise EvalsuiteError(f"{TASK}: no '{split}' samples found; expected {LAYOUT} under --data-root")
            expected = (OFFICIAL_COUNTS[organ] or {}).get(split)
            if expected is not None:
                check_count(TASK, f"SPIDER-{organ} split '{split}'", len(paths), expected, check_counts)
