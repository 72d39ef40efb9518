"""A slide encoder built from its entry: the module's network with seeded random weights, filled from `--weights` or
the hub in the published key layout (the module's `published_keys`), frozen, with a weights id for cache keys."""

import importlib
from dataclasses import dataclass
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.hub import download_weights
from evalsuite.models.image.architecture import RANDOM_INIT_SEED
from evalsuite.models.slide.entries import SLIDE_ENCODERS
from evalsuite.models.slide.spec import SlideEncoderSpec
from evalsuite.models.slide.text_tower import slide_text_tower

HUB_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass
class SlideEncoder:
    spec: SlideEncoderSpec
    model: torch.nn.Module  # forward(features [tiles, tile_dim], coords_level0 [tiles, 2], patch_size_level0) -> [E]
    weights_id: str
    label: str = ""  # the leaderboard's model column: the name, plus how the weights differ
    text: object = None  # models.slide.text_tower.SlideTextTower where the entry has a text side (TITAN, PRISM)

    @property
    def embed_dim(self) -> int:
        return self.spec.embed_dim


def module_of(spec: SlideEncoderSpec):
    return importlib.import_module(f"evalsuite.models.slide.{spec.module}")


def build_slide_encoder(name: str, weights: str | None = None, random_init: bool = False,
                        label: str | None = None) -> SlideEncoder:
    """The slide encoder `name` names, frozen in eval mode; `weights`: a local file or folder in the published layout."""
    if name not in SLIDE_ENCODERS:
        raise EvalsuiteError(f"unknown slide encoder '{name}'; known: {', '.join(SLIDE_ENCODERS)}")
    spec = SLIDE_ENCODERS[name]
    module = module_of(spec)
    model = checkpoints.seeded(lambda: module.build(spec), RANDOM_INIT_SEED)
    path = None
    if random_init:
        weights_id = f"random-init:seed{RANDOM_INIT_SEED}"
    else:
        path = _named_file(Path(weights), spec.extra.get("hub_files", ())) if weights else \
            download_weights(name, spec.hub_id, spec.gated, spec.extra.get("hub_files", HUB_FILES))
        weights_id, _ = checkpoints.load_key_for_key(model, path, prepare=module.published_keys)
    model.eval().requires_grad_(False)
    text = slide_text_tower(spec, Path(path) if path is not None else None, weights_id)
    return SlideEncoder(spec, model, weights_id, label or name, text)


def tile_weights_in(spec, weights: str | None) -> str | None:
    """The tile encoder's checkpoint a slide encoder ships beside its own (CHIEF's folder holds CHIEF_CTransPath.pth,
    which its tile encoder must load: extra["tile_weights"]), found in the `--weights` folder; else None (the tile
    encoder's own weights, from the hub)."""
    name = spec.extra.get("tile_weights")
    if not (weights and name and Path(weights).is_dir()):
        return None
    path = Path(weights) / name
    if not path.is_file():
        raise EvalsuiteError(f"--weights {weights}: {spec.name} reads its tiles with {spec.tile_encoder} weights "
                             f"{name}, which the folder lacks; put the published {name} beside the slide checkpoint")
    return str(path)


def _named_file(path: Path, names: tuple) -> Path:
    """In a `--weights` folder holding several checkpoints, the one the entry names (its hub_files)."""
    found = [path / name for name in names if (path / name).is_file()] if path.is_dir() else []
    return found[0] if found else path
