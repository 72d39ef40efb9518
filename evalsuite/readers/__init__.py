"""Dataset readers, registered by the name a task card gives in `reader.name`.

A reader is a class built as `Reader(card, data_root, check_counts=True, **card.reader.args)`
and turns a card plus a data directory into one torch Dataset per split through
`reader.dataset(split, transform)`. Each item is `(transform(PIL image), label)`; each dataset
exposes `labels` (int64 numpy array) so probes and metrics never iterate over images to get
them. Segmentation readers (readers/masks/base.py) give `(transform(PIL tile), tile index)`
items and `labels` as uint8 masks [tiles, H, W] (255 = ignored). `check_counts` compares split
sizes with the official ones where a dataset has them (`--no-count-check` turns it off for
subsets). Missing files or a wrong layout raise EvalsuiteError naming the expected path
pattern.

Layout: this file is the registry (READERS, BUILT_DATA); base.py the Reader contract; files.py and splits.py
helpers shared across groups; card_facts.py what a card says about its data before any is on disk. Readers sit
by what they read, each subpackage with the base to extend: tiles/ (labelled images; FileListReader), masks/
(dense-mask segmentation; SegmentationReader), slides/ (whole-slide images; SlideReader, with wsi.py and
tissue.py), spots/ (spatial transcriptomics: a tile per spot and its expression; HestReader), and demo/ the
readers and builders of the shipped demo data. A new dataset goes in tiles/, masks/
or slides/ and is registered below.
"""

import importlib
import inspect
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.tasks.resources import shipped_data_dir

# name -> "module:attribute", imported when a card names it: a run imports its own reader only (h5py, scipy and
# the slide libraries load for the tasks that read with them). A class may stand in for the string.
READERS = {
    "hgsc_tiles": "evalsuite.readers.demo.hgsc_tiles:HgscTileReader",
    "bach": "evalsuite.readers.tiles.bach:BachReader",
    "crc": "evalsuite.readers.tiles.crc:CrcReader",
    "pcam": "evalsuite.readers.tiles.pcam:PcamReader",
    "mhist": "evalsuite.readers.tiles.mhist:MhistReader",
    "bracs": "evalsuite.readers.tiles.bracs:BracsReader",
    "breakhis": "evalsuite.readers.tiles.breakhis:BreakhisReader",
    "hgsc_seg": "evalsuite.readers.demo.hgsc_seg:HgscSegReader",
    "hgsc_counts": "evalsuite.readers.demo.hgsc_counts:HgscCountReader",
    "pannuke": "evalsuite.readers.masks.pannuke:PannukeReader",
    "consep": "evalsuite.readers.masks.consep:ConsepReader",
    "monusac": "evalsuite.readers.masks.monusac:MonusacReader",
    "slide_csv": "evalsuite.readers.slides.slide_csv:SlideCsvReader",
    "tile_csv": "evalsuite.readers.tiles.tile_csv:TileCsvReader",
    "camelyon16": "evalsuite.readers.slides.camelyon16:Camelyon16Reader",
    "panda": "evalsuite.readers.slides.panda:PandaReader",
    "patho_bench": "evalsuite.readers.slides.patho_bench:PathoBenchReader",
    "hest": "evalsuite.readers.spots.hest:HestReader",
    # The datasets of THUNDER, eva and plismbench that issue 52 added.
    "spider": "evalsuite.readers.tiles.spider:SpiderReader",
    "starc9": "evalsuite.readers.tiles.starc9:Starc9Reader",
    "tcga_tils": "evalsuite.readers.tiles.tcga_tils:TcgaTilsReader",
    "tcga_crc_msi": "evalsuite.readers.tiles.tcga_crc_msi:TcgaCrcMsiReader",
    "camelyon17_wilds": "evalsuite.readers.tiles.camelyon17_wilds:Camelyon17WildsReader",
    "gleason_arvaniti": "evalsuite.readers.tiles.gleason_arvaniti:GleasonArvanitiReader",
    "unitopatho": "evalsuite.readers.tiles.unitopatho:UnitopathoReader",
    "bcss": "evalsuite.readers.masks.bcss:BcssReader",
    "ocelot": "evalsuite.readers.masks.ocelot:OcelotReader",
    "segpath": "evalsuite.readers.masks.segpath:SegpathReader",
    "plism": "evalsuite.readers.tiles.plism:PlismReader",
}

_PACKAGE_PREFIX = "package:"
_BUILT_PREFIX = "built:"
# Data evalsuite makes from what it ships, once, on first use (readers/demo/demo_slides.py says how).
BUILT_DATA = {"demo_slides": "evalsuite.readers.demo.demo_slides:demo_slides_folder"}


def resolved(entry):
    """A registry entry's object: the class or function itself, or the one its "module:attribute" names."""
    if not isinstance(entry, str):
        return entry
    module, _, attribute = entry.partition(":")
    return getattr(importlib.import_module(module), attribute)


def resolve_data_root(card, data_root: str | None) -> Path:
    """`--data-root` wins; else the card's `data_root`; `package:X` means data shipped with evalsuite."""
    root = data_root or card.data_root
    if root is None:
        from evalsuite.readers.card_facts import missing_data_message

        raise EvalsuiteError(missing_data_message(card))
    if root.startswith(_PACKAGE_PREFIX):
        return shipped_data_dir() / root[len(_PACKAGE_PREFIX):]
    if root.startswith(_BUILT_PREFIX):
        name = root[len(_BUILT_PREFIX):]
        if name not in BUILT_DATA:
            raise EvalsuiteError(f"task card {card.path}: data_root '{root}' names no built data; known: "
                                 f"{', '.join(_BUILT_PREFIX + n for n in BUILT_DATA)}")
        return resolved(BUILT_DATA[name])()
    return Path(root).expanduser()


def build_reader(card, data_root: str | None = None, check_counts: bool = True):
    if card.reader not in READERS:
        raise EvalsuiteError(
            f"task card {card.path}: unknown reader '{card.reader}'; known readers: {', '.join(READERS)}"
        )
    reader_cls = resolved(READERS[card.reader])
    accepted = inspect.signature(reader_cls).parameters
    unknown = sorted(set(card.reader_args) - set(accepted) - {"card", "data_root", "check_counts"})
    if unknown:
        known = sorted(set(accepted) - {"card", "data_root", "check_counts"})
        raise EvalsuiteError(f"task card {card.path}: reader.args {', '.join(unknown)} not understood by reader "
                             f"'{card.reader}'; it takes {', '.join(known) or 'no arguments'}")
    return reader_cls(card, resolve_data_root(card, data_root), check_counts=check_counts, **card.reader_args)
