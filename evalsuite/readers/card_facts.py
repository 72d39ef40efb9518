"""What a task card says about its data before any of it is on disk.

`budget` uses the official split sizes to plan a job before a 30 GB download, and a card run
without `--data-root` names the layout to put there and the page that describes it. The facts
are the readers' own constants (official counts, held-out ranges, layouts), not copies.
"""

from dataclasses import dataclass

from evalsuite.readers.masks import bcss, consep, monusac, ocelot, pannuke, segpath
from evalsuite.readers.spots import hest
from evalsuite.readers.tiles import (
    bach,
    bracs,
    breakhis,
    camelyon17_wilds,
    crc,
    gleason_arvaniti,
    mhist,
    pcam,
    plism,
    spider,
    starc9,
    tcga_crc_msi,
    tcga_tils,
    unitopatho,
)

TILE_DOCS = "docs/tasks.md#tile-classification-tasks"
SEG_DOCS = "docs/tasks.md#segmentation-tasks"
SLIDE_DOCS = "docs/slides.md"
# reader name -> (layout under --data-root, docs page)
LAYOUTS = {
    "bach": (bach.LAYOUT, TILE_DOCS),
    "bracs": (bracs.LAYOUT, TILE_DOCS),
    "breakhis": (breakhis.LAYOUT, TILE_DOCS),
    "crc": (crc.LAYOUT, TILE_DOCS),
    "mhist": (mhist.LAYOUT, TILE_DOCS),
    "pcam": (pcam.LAYOUT, TILE_DOCS),
    "pannuke": (pannuke.LAYOUT, SEG_DOCS),
    "consep": (consep.LAYOUT, SEG_DOCS),
    "monusac": (monusac.LAYOUT, SEG_DOCS),
    "spider": (spider.LAYOUT, TILE_DOCS),
    "starc9": (starc9.LAYOUT, TILE_DOCS),
    "tcga_tils": (tcga_tils.LAYOUT, TILE_DOCS),
    "tcga_crc_msi": (tcga_crc_msi.LAYOUT, TILE_DOCS),
    "camelyon17_wilds": (camelyon17_wilds.LAYOUT, TILE_DOCS),
    "gleason_arvaniti": (gleason_arvaniti.LAYOUT, TILE_DOCS),
    "unitopatho": (unitopatho.LAYOUT, TILE_DOCS),
    "bcss": (bcss.LAYOUT, SEG_DOCS),
    "ocelot": (ocelot.LAYOUT, SEG_DOCS),
    "segpath": (segpath.layout("epithelial") + "; CD3CD20_fileinfo.csv with CD3CD20_Lymphocyte/ for lymphocytes",
                SEG_DOCS),
    "plism": (plism.LAYOUT, "docs/tasks.md#consistency-tasks-plism"),
    "tile_csv": ("tiles.csv (columns image_path, label; optional split, patient) and the tiles it lists",
                 "the card's description and docs/group_robustness.md"),
    "slide_csv": ("slides.csv (columns slide_path, then label, or time and event; optional split, patient) and "
                  "the slides it lists", SLIDE_DOCS),
    "camelyon16": ("training/{normal,tumor}/*.tif, testing/images/test_NNN.tif and testing/reference.csv",
                   SLIDE_DOCS),
    "panda": ("train_images/<image_id>.tiff and train.csv", SLIDE_DOCS),
    "hest": (hest.LAYOUT, "docs/tasks.md#hest-benchmark"),
}


@dataclass(frozen=True)
class OfficialSizes:
    samples: dict  # {split: samples the reader gives on the complete dataset}
    label_shape: tuple = ()  # one mask's shape for segmentation readers; () for class ids
    source: str = ""  # where the sizes come from, for the plan's note


def _bach(args: dict) -> OfficialSizes:
    held_out = {"val": 0, "test": 0}
    for ranges in bach.HELD_OUT.values():
        for split, spans in ranges.items():
            held_out[split] += sum(high - low + 1 for low, high in spans)
    total = bach.IMAGES_PER_CLASS * len(bach.HELD_OUT)
    return OfficialSizes({"train": total - held_out["val"] - held_out["test"], **held_out},
                         source="BACH's 400 photos and the held-out image numbers")


def _pannuke(args: dict) -> OfficialSizes | None:
    folds = {"train": args.get("train_fold", 1), "val": args.get("val_fold", 2), "test": args.get("test_fold", 3)}
    if sorted(folds.values()) != [1, 2, 3]:
        return None
    tile_px = 256  # the Warwick release's tiles; labels stay at this resolution
    return OfficialSizes({split: pannuke.OFFICIAL_COUNTS[fold] for split, fold in folds.items()}, (tile_px, tile_px),
                         source="PanNuke's fold sizes (Warwick release)")


def _breakhis(args: dict) -> OfficialSizes | None:
    counts = breakhis.OFFICIAL_COUNTS.get(args.get("labels", "subtype4"))
    return OfficialSizes(dict(counts), source="the BreaKHis 40X split counts") if counts else None


def _camelyon17_wilds(args: dict) -> OfficialSizes | None:
    if args.get("test_split", "test") != "test":
        return None
    return OfficialSizes(dict(camelyon17_wilds.OFFICIAL_COUNTS), source="WILDS's official split sizes (THUNDER's config)")


def _whole_tiles_256(args: dict) -> bool:
    return args.get("tile_size_px", 256) == 256 and args.get("stride_px", 256) == 256


def _ocelot(args: dict) -> OfficialSizes | None:
    if not _whole_tiles_256(args):
        return None
    return OfficialSizes({split: n * ocelot.TILES_PER_IMAGE for split, n in ocelot.OFFICIAL_IMAGES.items()},
                         (256, 256), source="OCELOT's split folders (THUNDER's tile counts)")


def _segpath(args: dict) -> OfficialSizes | None:
    if not _whole_tiles_256(args):
        return None
    images = segpath.CELL_TYPES[args.get("cell_type", "epithelial")]["images"]
    return OfficialSizes({split: n * segpath.TILES_PER_IMAGE for split, n in images.items()}, (256, 256),
                         source="SegPath's file list (THUNDER's tile counts)")


# Readers whose every split size follows from the card alone. A carved val (crc, mhist, consep) depends on the
# class counts found on disk, and slide tasks cache tiles whose number only the tiling of the slides tells.
_SIZES = {
    "bach": _bach,
    "bracs": lambda args: OfficialSizes(dict(bracs.OFFICIAL_COUNTS), source="BRACS's official split sizes"),
    "pcam": lambda args: OfficialSizes(dict(pcam.OFFICIAL_COUNTS), source="PCam's official split sizes"),
    "breakhis": _breakhis,
    "pannuke": _pannuke,
    "tcga_tils": lambda args: OfficialSizes(dict(tcga_tils.OFFICIAL_COUNTS), source="THUNDER's TCGA-TILs split sizes"),
    "camelyon17_wilds": _camelyon17_wilds,
    "gleason_arvaniti": lambda args: OfficialSizes(dict(gleason_arvaniti.OFFICIAL_COUNTS),
                                                   source="eva's GleasonArvaniti split sizes"),
    "ocelot": _ocelot,
    "segpath": _segpath,
}

SIZED_READERS = tuple(sorted(_SIZES))


def official_sizes(card) -> OfficialSizes | None:
    """The split sizes of the card's complete dataset, or None when the card alone does not fix them."""
    sizes = _SIZES.get(card.reader)
    return sizes(card.reader_args) if sizes else None


def missing_data_message(card) -> str:
    """The one line for a card run without data: what to put under --data-root and where it is described."""
    layout, docs = LAYOUTS.get(card.reader, (None, "docs/tasks.md"))
    expected = f"; it expects {layout} under it" if layout else ""
    # The download sources live a layer above the readers (evalsuite/downloads): named here, not looked up.
    return (f"task '{card.name}' needs its data: pass --data-root DIR{expected} (see {docs}; a public benchmark: "
            f"`evalsuite download {card.name} --data-root DIR` fetches it, docs/download.md)")
