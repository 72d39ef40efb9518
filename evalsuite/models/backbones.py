"""Frozen backbones: a registry name, a timm architecture, an `hf-hub:` name, or a local checkpoint.

Every backbone comes back in eval mode with frozen parameters, the data config carrying its
normalisation, a `weights_id` that identifies its weights exactly (content hash) for cache
keys and results, and two feature views: `pooled_features` (the classification embedding)
and `dense_features` (patch tokens on their grid, for segmentation).

Registry models are built with timm `num_classes=0`; their embedding is pooled from
`forward_features` by the rule on the model card (evalsuite.models.pooling), never by timm's head.
A run may choose another token rule (`--pooling`, a task card's `pooling:`), e.g. the class
token alone as eva's leaderboard pools Virchow2, H0-mini and Midnight.
"""

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.hub import create_from_hub, download_weights
from evalsuite.models.image import adapters
from evalsuite.models.image.architecture import RANDOM_INIT_SEED, create_architecture
from evalsuite.models.image.entries import ModelSpec
from evalsuite.models.pooling import (
    CLS,
    CLS_MEAN_PATCH,
    TIMM_HEAD,
    check_token_rule,
    patch_grid,
    pool_tokens,
    pooled_dim,
    token_grid,
)
from evalsuite.models.registry import IMAGE, REGISTRY, SLIDE, VISION_LANGUAGE
from evalsuite.models.vision_language.towers import build_vlm
from evalsuite.storage.names import weights_label


@dataclass
class Backbone:
    name: str
    model: torch.nn.Module
    embed_dim: int
    data_config: dict
    weights_id: str
    label: str  # what the leaderboard's model column shows: the name, plus how the weights differ
    pooling: str = TIMM_HEAD  # evalsuite.models.pooling rule behind pooled_features
    num_prefix_tokens: int = 0  # class + register tokens ahead of the patch tokens
    patch_size_px: int | None = None  # None: not a patch-token model (CNN feature maps)
    precision: str | None = None  # compute precision the registry pins for `--precision auto` (None: the device's)
    text: object = None  # TextTower of a vision-language model or a slide encoder's (the zeroshot probe's prompts); else None
    probe_features: str | None = None  # "before_projection" (models/vision_language/entries.py): in the cache key; None: the only
    slide_encoder: object = None  # models.slide.encoder.SlideEncoder of a slide-encoder entry: this backbone is its tile encoder

    def pooled_features(self, images):
        """[batch, embed_dim] embedding for classification probes."""
        if self.pooling == TIMM_HEAD:
            return self.model(images)
        return pool_tokens(self.model.forward_features(images), self.pooling, self.num_prefix_tokens)

    def dense_features(self, images, layers=(-1,)):
        """[batch, grid_h, grid_w, width]: patch tokens (class and register tokens dropped), or a CNN's last map.

        `layers` (ViTs only) picks transformer blocks by index (negative from the end); their
        outputs, each through the model's final norm, are concatenated along the width in the
        order given. The default (-1,) is the output of `forward_features`.
        """
        if tuple(layers) != (-1,):
            return self._block_features(images, tuple(layers))
        features = self.model.forward_features(images)
        if features.ndim == 4:
            nhwc = getattr(self.model, "output_fmt", "NCHW") == "NHWC"
            return features if nhwc else features.permute(0, 2, 3, 1)
        if self.patch_size_px is None:
            raise EvalsuiteError(f"model '{self.name}' has no patch grid to give dense features")
        grid = token_grid(tuple(images.shape[-2:]), self.patch_size_px)
        return patch_grid(features, self.num_prefix_tokens, grid)

    def _block_features(self, images, layers: tuple):
        blocks = getattr(self.model, "blocks", None)
        if self.patch_size_px is None or blocks is None or not hasattr(self.model, "norm"):
            raise EvalsuiteError(f"model '{self.name}' gives only its last feature map; use layers [-1] for it")
        picked = []
        for layer in layers:
            if not -len(blocks) <= layer < len(blocks):
                raise EvalsuiteError(f"layer {layer} is out of range for model '{self.name}' with {len(blocks)} blocks")
            picked.append(layer % len(blocks))
        outputs = {}
        hooks = [blocks[i].register_forward_hook(lambda _m, _in, out, i=i: outputs.__setitem__(i, out))
                 for i in sorted(set(picked))]
        try:
            self.model.forward_features(images)
        finally:
            for hook in hooks:
                hook.remove()
        grid = token_grid(tuple(images.shape[-2:]), self.patch_size_px)
        return torch.cat([patch_grid(self.model.norm(outputs[i]), self.num_prefix_tokens, grid) for i in picked],
                         dim=-1)


def build_backbone(name: str, weights: str | None = None, random_init: bool = False, pooling: str | None = None,
                   card_pooling: str | None = None, builds=None) -> Backbone:
    """The frozen backbone `name` names. `pooling` (`--pooling`) replaces the model's pooling rule and
    must fit the model; `card_pooling` (a task card's `pooling:`) does the same for token models and
    leaves a model that pools inside itself (a CNN) as it is. `builds` (models/reuse.py) may hand back a model
    built before."""
    build = builds or _build_backbone
    if pooling is not None:
        return with_pooling(build(name, weights, random_init), pooling, "--pooling")
    backbone = build(name, weights, random_init)
    if card_pooling is None or _token_dim(backbone) is None:
        return backbone
    return with_pooling(backbone, card_pooling, "the task card's pooling")


def with_pooling(backbone: Backbone, rule: str, where: str) -> Backbone:
    """`backbone` with its classification embedding pooled by `rule`; `where` names the setting in errors.

    The label gains `+pooling=RULE` when the rule differs from the model's own, so leaderboard rows
    of the two embeddings (same weights) stay apart.
    """
    check_token_rule(rule, where)
    if rule == backbone.pooling:
        return backbone
    token_dim = _token_dim(backbone)
    if token_dim is None:
        raise EvalsuiteError(f"{where} {rule}: model '{backbone.name}' pools inside itself (no class or patch "
                             f"tokens to choose from); drop {where} for it")
    if rule in (CLS, CLS_MEAN_PATCH) and backbone.num_prefix_tokens < 1:
        raise EvalsuiteError(f"{where} {rule}: model '{backbone.name}' has no class token; use mean_patch")
    return dataclasses.replace(backbone, pooling=rule, embed_dim=pooled_dim(rule, token_dim),
                               label=f"{backbone.label}+pooling={rule}")


def _token_dim(backbone: Backbone) -> int | None:
    """Width of the tokens `forward_features` returns, or None for a model without tokens (CNN feature maps)."""
    model = backbone.model
    if backbone.patch_size_px is None or not isinstance(getattr(model, "num_prefix_tokens", None), int):
        return None
    width = getattr(model, "embed_dim", None)
    return int(width) if isinstance(width, int) else None


def _build_backbone(name: str, weights: str | None, random_init: bool) -> Backbone:
    if weights and random_init:
        raise EvalsuiteError("--weights and --random-init exclude each other; pass one")
    spec = REGISTRY.get(name)
    if spec is not None:
        return _BUILDERS[spec.kind](spec, weights, random_init, _label(name, weights, random_init))
    if name.startswith("hf-hub:"):
        model, weights_id = _from_hub_name(name, weights, random_init)
    else:
        model, weights_id = _from_timm_name(name, weights, random_init)
    model.eval().requires_grad_(False)
    return Backbone(name=name, model=model, embed_dim=int(model.num_features), data_config=_timm_data_config(model),
                    weights_id=weights_id, label=_label(name, weights, random_init),
                    num_prefix_tokens=int(getattr(model, "num_prefix_tokens", 0)),
                    patch_size_px=_timm_patch_size_px(model))


def _image_backbone(spec: ModelSpec, weights: str | None, random_init: bool, label: str) -> Backbone:
    model, weights_id = _registry_model(spec, weights, random_init)
    return spec_backbone(spec, model, weights_id, label)


def _vision_language_backbone(spec, weights: str | None, random_init: bool, label: str) -> Backbone:
    return Backbone(name=spec.name, label=label, **build_vlm(spec, weights, random_init, RANDOM_INIT_SEED))


def _slide_backbone(spec, weights: str | None, random_init: bool, label: str) -> Backbone:
    """A slide encoder's run embeds its tiles with the entry's tile encoder (from the hub, or random with
    --random-init) and carries the slide encoder, which `--weights` fills (models/slide/encoder.py)."""
    from evalsuite.models.slide.encoder import build_slide_encoder, tile_weights_in

    tiles = _build_backbone(spec.tile_encoder, tile_weights_in(spec, weights), random_init)
    encoder = build_slide_encoder(spec.name, weights, random_init, label)
    # Prompts are compared with slide embeddings through the slide encoder's own text tower, never the tile
    # encoder's (MADELEINE reads CONCH tiles: CONCH's text tower knows nothing of MADELEINE's slide space).
    return dataclasses.replace(tiles, slide_encoder=encoder, text=encoder.text)


_BUILDERS = {IMAGE: _image_backbone, VISION_LANGUAGE: _vision_language_backbone, SLIDE: _slide_backbone}  # registry kinds


def spec_backbone(spec: ModelSpec, model: torch.nn.Module, weights_id: str, label: str) -> Backbone:
    model.eval().requires_grad_(False)
    pretrained = spec.pretrained_cfg
    data_config = {"input_size": (3, spec.input_size_px, spec.input_size_px), "interpolation": pretrained.interpolation,
                   "mean": pretrained.mean, "std": pretrained.std}
    return Backbone(name=spec.name, model=model, embed_dim=spec.embed_dim, data_config=data_config,
                    weights_id=weights_id, label=label, pooling=spec.pooling,
                    num_prefix_tokens=int(getattr(model, "num_prefix_tokens", spec.num_prefix_tokens)),
                    patch_size_px=spec.patch_size_px, precision=spec.precision)


def load_weights(model: torch.nn.Module, weights: str | Path, key_mapping: str = "auto") -> str:
    """Fill `model` (possibly on the meta device) from a local file or folder; returns the weights id."""
    files = checkpoints.weights_files(Path(weights))
    state = checkpoints.read_state_dict(Path(weights))
    if key_mapping == "in_order":
        state = checkpoints.in_order_state_dict(model, state, files[0])
    else:
        fitter = next((m for m in (model, getattr(model, "patch_embed", None)) if hasattr(m, "fit_state_dict")), None)
        if fitter is not None:  # a trunk's head (conch_pooler) or stem (CTransPath's ConvStem) fits its own checkpoint
            state = fitter.fit_state_dict(state)
        elif hasattr(model, "patch_embed"):
            state = adapters.to_timm_vit(state, model)
        state = checkpoints.matched_state_dict(model, state, files[0])
    checkpoints.assign_weights(model, state)
    return f"sha256:{checkpoints.weights_sha256(files)}"


def _registry_model(spec: ModelSpec, weights: str | None, random_init: bool):
    if random_init:
        return create_architecture(spec), f"random-init:seed{RANDOM_INIT_SEED}"
    # Weights are assigned onto a meta-device module: a giant model is never held twice.
    model = create_architecture(spec, device="meta")
    if weights:
        return model, load_weights(model, weights)
    if spec.package_weights is not None:
        return model, load_weights(model, spec.package_weights(), spec.key_mapping)
    hub_files = {"filenames": spec.hub_files} if spec.hub_files else {}
    path = download_weights(spec.name, spec.pretrained_cfg.hub_id, spec.pretrained_cfg.gated, **hub_files)
    return model, load_weights(model, path)


def _label(name: str, weights: str | None, random_init: bool) -> str:
    if random_init:
        return f"{name}+random-init"
    if weights:
        return weights_label(name, weights)
    return name


def _create(architecture: str, random_init: bool):
    import timm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_INIT_SEED)
        return timm.create_model(architecture, pretrained=False, num_classes=0)


def _from_hub_name(name: str, weights: str | None, random_init: bool):
    if weights or random_init:
        raise EvalsuiteError(
            f"'{name}' is resolved on the hub; with --weights or --random-init pass its timm architecture name instead"
        )
    with torch.random.fork_rng(devices=[]):
        model = create_from_hub(name, num_classes=0)
    return model, _hub_weights_id(f"hub:{name.removeprefix('hf-hub:')}", model)


def _from_timm_name(name: str, weights: str | None, random_init: bool):
    import timm

    if not timm.is_model(name):
        raise EvalsuiteError(_unknown_model_message(name))
    if weights:
        model = _create(name, random_init=False)
        return model, load_weights(model, weights)
    if random_init:
        return _create(name, random_init=True), f"random-init:seed{RANDOM_INIT_SEED}"
    model = create_from_hub(name, num_classes=0)
    cfg = model.pretrained_cfg
    return model, _hub_weights_id(f"timm:{cfg.get('hf_hub_id') or cfg.get('url') or name}", model)


def _hub_weights_id(source: str, model: torch.nn.Module) -> str:
    # A hub repository can change under the same name: the content hash keeps caches and
    # leaderboard rows of different weights apart; the source says where they came from.
    return f"{source}#sha256-state:{checkpoints.state_sha256(model)}"


def _unknown_model_message(name: str) -> str:
    import timm

    candidates = list(REGISTRY) + timm.list_models()
    close = difflib.get_close_matches(name, candidates, n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (f"unknown model '{name}': not a registry name (see `evalsuite list --models`), a timm architecture, "
            f"or an hf-hub: name.{hint}")


def _timm_data_config(model) -> dict:
    from timm.data import resolve_data_config

    config = resolve_data_config({}, model=model)
    return {k: config[k] for k in ("input_size", "interpolation", "mean", "std")}


def _timm_patch_size_px(model) -> int | None:
    patch_embed = getattr(model, "patch_embed", None)
    patch_size = getattr(patch_embed, "patch_size", None)
    if patch_size is None:
        return None
    return int(patch_size[0]) if isinstance(patch_size, (tuple, list)) else int(patch_size)
