"""What a slide encoder entry says: the tile encoder it reads, the tiling it was trained with, its output, its weights.

A slide encoder turns one slide's tile features into one slide embedding. It never sees pixels: the run tiles the
slide at the entry's `tiling`, embeds the tiles with the registry's `tile_encoder` into the ordinary tile cache
(shared with ABMIL and mean-pool runs of the same tile encoder and tiling), then runs the slide encoder once per
slide into the slide-embedding cache (features/slide_embeddings.py).

The network contract every entry's module (models/slide/<module>.py) keeps:
  `build(spec) -> torch.nn.Module` (float32, random weights, eval mode) whose
  `forward(features, coords_level0, patch_size_level0) -> embedding`, with
    features           float32 [tiles, tile_dim], the tile encoder's output rows of one slide (or one patient, early fusion)
    coords_level0      float32 [tiles, 2], each tile's top-left (x, y) in level-0 pixels
    patch_size_level0  int, one tile's side in level-0 pixels (the tile's size at the slide's full resolution)
    embedding          float32 [embed_dim], what the model's own code returns as the slide embedding
  `published_keys(state) -> state`: the published checkpoint's tensors renamed into the module's state-dict names,
  with what the slide embedding does not use (text towers, classifier heads) dropped; the docstring says what.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SlideEncoderSpec:
    name: str
    module: str  # evalsuite.models.slide.<module> builds it (its `build`, `published_keys`)
    tile_encoder: str  # the registry name of the tile encoder whose features it reads
    tile_dim: int  # width of those tile features
    tiling: dict  # {"target_mpp": um per pixel the tiles are read at, "tile_size_px": tile side at that mpp}
    embed_dim: int  # width of the slide embedding
    config: dict  # the architecture's hyper-parameters at the published size (the module's `build` reads them)
    hub_id: str | None  # "hf-hub:ORG/NAME" where the weights live; None where they are elsewhere (`sources`)
    licence: str
    gated: bool | None  # True: accept the licence on the hub first; None: not confirmed
    checkpoint_layout: str  # what `--weights` must hold (file names and key prefixes of the published checkpoint)
    uses_coords: bool  # whether the network reads the tiles' positions (False: a set function of the features)
    text_tower: bool = False  # the published model has one (TITAN, PRISM); evalsuite builds the slide side only
    sources: tuple = ()  # the files and pages read for the entry, with commits
    unconfirmed: str = ""  # facts no primary source confirmed
    extra: dict = field(default_factory=dict)  # anything else an entry's module needs
    kind: str = "slide"

    @property
    def magnification(self) -> str:
        """The objective the tiling corresponds to (0.5 um/px is 20x, 1.0 um/px 10x)."""
        return f"{10 / self.tiling['target_mpp']:g}x"
