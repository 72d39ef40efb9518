"""Slide readers: a cohort's slides -> tissue tiles at the card's MPP -> one tile dataset per split.

A slide reader lists `SlideRecord`s per split (readers/slides/slide_manifest.py) and tiles each slide
(readers/slides/tissue.py) into a `SlideLayout`: the slides kept, each one's tile rows, level-0
coordinates and pyramid level. The layout is stored with the feature cache, so a resumed or
finished cache never tiles again and results trace back to slide regions. Slides are tiled in
DataLoader worker processes. A slide that cannot be tiled (missing, unreadable, no MPP, no
tissue) stops the run with one line naming it, or with `--skip-bad-slides` is left out and
listed in the layout's `skipped` (and so in the run JSON).
"""

import dataclasses
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.base import Reader
from evalsuite.readers.batch_decoding import BatchDecoding
from evalsuite.readers.slides.patients import check_patient_targets, first_slides, patient_numbers
from evalsuite.readers.slides.scorable import check_kept_split, check_manifest_splits
from evalsuite.readers.slides.slide_manifest import SlideRecord
from evalsuite.readers.slides.tissue import read_tile_at, tile_grid
from evalsuite.readers.slides.wsi import cached_slide, slide_mpp
from evalsuite.runtime.progress import Progress
from evalsuite.tasks.kinds import KINDS

TILING_DEFAULTS = {"target_mpp": 0.5, "tile_size_px": 224, "min_tissue_fraction": 0.5, "mpp": None, "max_tiles": None}


@dataclass
class SlideLayout:
    """Where each slide's tiles are: slide i holds tile rows offsets[i]:offsets[i + 1]."""
    slide_ids: list
    paths: list  # str, as tiled
    offsets: np.ndarray  # int64 [slides + 1]
    coords_level0: np.ndarray  # int64 [tiles, 2]: (x, y) of each tile's top-left corner at level 0
    levels: list  # the pyramid level read for each slide
    read_sizes_px: list  # tile side read at that level
    tile_size_px: int
    skipped: list = field(default_factory=list)  # [{"slide": id, "path": ..., "reason": one line}]
    # One tile's side in level-0 pixels, per slide (a slide encoder's patch_size_level0); None in caches tiled before
    # it was kept: then the read size times the level's downsample (features/slide_embeddings.py).
    sides_level0_px: list | None = None

    @property
    def tiles(self) -> int:
        return int(self.offsets[-1])

    def slide_of_tile(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.slide_ids)), np.diff(self.offsets))

    def to_manifest(self) -> dict:
        return {"slides": {"ids": self.slide_ids, "paths": self.paths, "offsets": self.offsets.tolist(),
                           "levels": self.levels, "read_sizes_px": self.read_sizes_px,
                           "tile_size_px": self.tile_size_px, "skipped": self.skipped,
                           **({"sides_level0_px": self.sides_level0_px} if self.sides_level0_px else {})}}

    @classmethod
    def from_manifest(cls, manifest: dict, coords_level0: np.ndarray) -> "SlideLayout":
        slides = manifest["slides"]
        return cls(slides["ids"], slides["paths"], np.asarray(slides["offsets"], dtype=np.int64), coords_level0,
                   slides["levels"], slides["read_sizes_px"], slides["tile_size_px"], slides["skipped"],
                   slides.get("sides_level0_px"))


def tiling_of(card) -> dict:
    return {**TILING_DEFAULTS, **(card.extra.get("tiling") or {})}


class _TileOneSlide(torch.utils.data.Dataset):
    """Item i: slide i's tile grid, or the one-line reason it has none (tiled in a worker process)."""

    def __init__(self, records: list, tiling: dict):
        self.records, self.tiling = records, tiling

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int):
        record = self.records[index]
        try:
            slide = cached_slide(record.path)
            mpp = slide_mpp(slide, record.mpp if record.mpp is not None else self.tiling["mpp"])
            grid = tile_grid(slide, mpp, self.tiling["target_mpp"], self.tiling["tile_size_px"],
                             self.tiling["min_tissue_fraction"])
        except EvalsuiteError as exc:
            return index, None, str(exc)
        return index, _at_most(grid, self.tiling["max_tiles"], record.slide_id), None


def _at_most(grid, max_tiles: int | None, slide_id: str):
    """A seeded random subset of `max_tiles` tissue tiles (eva's protocols cap tiles per slide), kept in grid order;
    the seed is the slide id's CRC-32, so a slide gets the same tiles in every run and every cohort."""
    if not max_tiles or len(grid.coords_level0) <= max_tiles:
        return grid
    rng = np.random.default_rng(zlib.crc32(slide_id.encode()))
    chosen = np.sort(rng.choice(len(grid.coords_level0), size=max_tiles, replace=False))
    return dataclasses.replace(grid, coords_level0=grid.coords_level0[chosen],
                               tissue_fraction=grid.tissue_fraction[chosen])


def tile_slides(records: list, tiling: dict, skip_bad: bool, num_workers: int, description: str) -> SlideLayout:
    loader = torch.utils.data.DataLoader(_TileOneSlide(records, tiling), batch_size=None,
                                         num_workers=min(num_workers, len(records)))
    grids, skipped = {}, []
    with Progress(f"{description}: tissue", len(records), unit="slide") as progress:
        for done, (index, grid, error) in enumerate(loader, start=1):
            progress.update(done)
            if error is not None and not skip_bad:
                raise EvalsuiteError(f"{error} (or pass --skip-bad-slides to leave such slides out)")
            if error is None:
                grids[index] = grid
            else:
                record = records[index]
                skipped.append({"slide": record.slide_id, "path": str(record.path), "reason": error})
    kept = [i for i in range(len(records)) if i in grids]
    if not kept:
        raise EvalsuiteError(f"{description}: no slide could be tiled ({len(skipped)} skipped: "
                             f"{skipped[0]['reason'] if skipped else 'empty split'})")
    counts = [len(grids[i].coords_level0) for i in kept]
    return SlideLayout([records[i].slide_id for i in kept], [str(records[i].path) for i in kept],
                       np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                       np.concatenate([grids[i].coords_level0 for i in kept]).astype(np.int64),
                       [int(grids[i].level) for i in kept], [int(grids[i].read_size_px) for i in kept],
                       int(tiling["tile_size_px"]), skipped, [float(grids[i].side_level0_px) for i in kept])


class SlideTiles(BatchDecoding, torch.utils.data.Dataset):
    """Every tile of a layout in row order: items (transform(tile), slide number); `labels` = slide number. Batches
    are read on threads and converted once per batch (readers/batch_decoding.py): it was a third of the reading
    time on 2 cores (benchmarks/slide_extract.py). OpenSlide reads without the GIL (ctypes)."""

    def __init__(self, layout: SlideLayout, transform):
        self.layout, self.transform = layout, transform
        self.labels = layout.slide_of_tile()
        self.init_batch_decoding(transform, layout.tile_size_px)

    def __len__(self) -> int:
        return self.layout.tiles

    def label(self, index: int) -> int:
        return int(self.labels[index])

    def image(self, index: int):
        slide_index = int(self.labels[index])
        layout = self.layout
        return read_tile_at(cached_slide(Path(layout.paths[slide_index])), tuple(layout.coords_level0[index]),
                            layout.levels[slide_index], layout.read_sizes_px[slide_index], layout.tile_size_px)


class SlideReader(Reader):
    """A reader of slide records; subclasses give `records()` (every split's, checked)."""

    interval_unit = "patient"
    manifest_path = None  # the file the records come from, named in errors (the card when None)

    def __init__(self, card, data_root: Path, check_counts: bool = True):
        self.card, self.data_root, self.check_counts = card, Path(data_root), check_counts
        self.survival = KINDS[card.kind].target == "survival"
        self.per_patient = KINDS[card.kind].per_patient  # targets and groups are then one per patient
        self.scored_unit = "patient" if self.per_patient else "slide"
        self._records = None
        self._kept = {}  # split -> slide ids whose features are cached (bad slides skipped)

    def records(self) -> list[SlideRecord]:
        raise NotImplementedError

    def split_records(self, split: str) -> list[SlideRecord]:
        self.check_split(split, self.card.splits)
        if self._records is None:
            self._records = self._checked(self.records())
        return [r for r in self._records if r.split == split]

    def _checked(self, records: list) -> list:
        """Before any slide is tiled: a patient's slides agree on its target, and every split can be scored."""
        source = self.manifest_path or self.card.path
        if self.per_patient:
            check_patient_targets(records, source)
        check_manifest_splits(records, self.card.splits, source, self.survival)
        return records

    def tile(self, split: str, skip_bad: bool, num_workers: int) -> SlideLayout:
        records = self.split_records(split)
        layout = tile_slides(records, tiling_of(self.card), skip_bad, num_workers, f"{self.card.name}/{split}")
        if layout.skipped:  # what --skip-bad-slides kept must still be scorable: refuse now, before any forward
            kept = set(layout.slide_ids)
            check_kept_split([r for r in records if r.slide_id in kept], split, layout.skipped, self.survival,
                             self.card.classes)
        return layout

    def dataset(self, split: str, transform):
        raise EvalsuiteError(f"task '{self.card.name}' is slide-level: its tiles come from `tile()`")

    def keep(self, split: str, slide_ids: list) -> None:
        """The slides of `split` the features cover, in cache order; targets and groups follow them."""
        known = {r.slide_id for r in self.split_records(split)}
        missing = [s for s in slide_ids if s not in known]
        if missing:
            raise EvalsuiteError(f"the cached {split} split holds slide '{missing[0]}' that the manifest no longer "
                                 "lists: remove the task's cache (`evalsuite cache ls`, then `evalsuite cache rm KEY`)")
        self._kept[split] = list(slide_ids)

    def _kept_records(self, split: str) -> list[SlideRecord]:
        by_id = {r.slide_id: r for r in self.split_records(split)}
        return [by_id[s] for s in self._kept.get(split, list(by_id))]

    def _scored_records(self, split: str) -> list[SlideRecord]:
        """One record per scored item: each kept slide, or each patient's first kept slide."""
        kept = self._kept_records(split)
        return first_slides(kept) if self.per_patient else kept

    def targets(self, split: str) -> np.ndarray:
        """int64 class ids [slides], or float64 [items, 2] (time, event) for survival (items: patients when
        `per_patient`)."""
        values = [r.target for r in self._scored_records(split)]
        return np.array(values, dtype=np.float64) if self.survival else np.array(values, dtype=np.int64)[:, 0]

    def item_ids(self, split: str) -> list:
        """Each scored item, in the order of `targets`: the slide's id, or per patient the patient's (the manifest's
        ids, the same under any data root; the run's tiling is a measurement of the item, not another item)."""
        if self.per_patient:
            return [f"patient {r.patient}" for r in self._scored_records(split)]
        return [f"slide {r.slide_id}" for r in self._scored_records(split)]

    def groups(self, split: str) -> list:
        """The patient of each scored item (so per patient, each item is its own bootstrap cluster)."""
        return [r.patient for r in self._scored_records(split)]

    def patient_of_slide(self, split: str) -> list[int] | None:
        """Per patient: the patient number (the row of `targets`) of each kept slide, in cache order; else None."""
        return patient_numbers(self._kept_records(split)) if self.per_patient else None

    def slides_fingerprint(self, split: str) -> list:
        """What the cache key takes from the slide list: each slide's id, path and file size."""
        return [[r.slide_id, str(r.path), r.path.stat().st_size if r.path.is_file() else None, r.mpp]
                for r in self.split_records(split)]
