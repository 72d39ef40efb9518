"""A backbone built without its weights, for planning: the architecture on the `meta` device.

`evalsuite budget` plans a run before the weights are at hand (a gated model whose licence is not accepted yet, a
login node without the hub, thirty models of a sweep): a meta module has every parameter's shape and dtype but no
storage, so its parameter bytes, its FLOPs (models/flops.py) and the shape of its features (one forward of a meta
image) cost no memory and no download. Nothing is read from a checkpoint, not even a local `--weights` file.

- a registry name: the entry's timm architecture and keyword arguments (what the weights are loaded into);
- a timm architecture name: `timm.create_model(name, pretrained=False)`;
- a vision-language model: its library builds no meta module (it reads its logit scale), so it is built with random
  weights on the CPU, still without a checkpoint;
- an `hf-hub:` name: its architecture is in the hub repository's config, so it cannot be planned offline.

The pooling rules (`--pooling`, a card's `pooling:`) apply as for a loaded backbone (backbones.build_backbone).
"""

import dataclasses

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import (
    RANDOM_INIT_SEED,
    Backbone,
    _timm_data_config,
    _timm_patch_size_px,
    build_backbone,
    create_architecture,
    spec_backbone,
)
from evalsuite.models.registry import IMAGE, REGISTRY, SLIDE, VISION_LANGUAGE
from evalsuite.models.vision_language.towers import build_vlm
from evalsuite.storage.names import weights_label

META_WEIGHTS_ID = "meta:no-weights"  # no cache key may be made from it: a meta plan counts every split as to extract


def meta_backbone(name: str, weights: str | None = None, random_init: bool = False, pooling: str | None = None,
                  card_pooling: str | None = None) -> Backbone:
    """The backbone `name` names, its module on the meta device (a vision-language model: random CPU weights)."""
    return build_backbone(name, weights, random_init, pooling, card_pooling, builds=_build)


def is_meta(backbone: Backbone) -> bool:
    return any(t.is_meta for t in backbone.model.parameters())


def _build(name: str, weights: str | None, random_init: bool) -> Backbone:
    label = f"{name}+random-init" if random_init else weights_label(name, weights) if weights else name
    spec = REGISTRY.get(name)
    if spec is not None:
        return _META_BUILDERS[spec.kind](spec, label)
    if name.startswith("hf-hub:"):
        raise EvalsuiteError(f"'{name}': a hub model's architecture is in its repository's config, which cannot be "
                             "read without the hub; plan its timm architecture name instead (--model ARCH)")
    import timm

    if not timm.is_model(name):
        raise EvalsuiteError(f"unknown model '{name}': not a registry name (see `evalsuite list --models`), a timm "
                             "architecture, or an hf-hub: name")
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, num_classes=0)
    model.eval().requires_grad_(False)
    return Backbone(name=name, model=model, embed_dim=int(model.num_features), data_config=_timm_data_config(model),
                    weights_id=META_WEIGHTS_ID, label=label,
                    num_prefix_tokens=int(getattr(model, "num_prefix_tokens", 0)),
                    patch_size_px=_timm_patch_size_px(model))


def _image_on_meta(spec, label: str) -> Backbone:
    return spec_backbone(spec, create_architecture(spec, device="meta"), META_WEIGHTS_ID, label)


def _vision_language_on_meta(spec, label: str) -> Backbone:
    fields = build_vlm(spec, None, True, RANDOM_INIT_SEED)
    return Backbone(name=spec.name, label=label, **{**fields, "weights_id": META_WEIGHTS_ID})


def _slide_on_meta(spec, label: str) -> Backbone:
    """The tile encoder on the meta device, carrying the slide encoder on the meta device too."""
    from evalsuite.models.slide.encoder import SlideEncoder, module_of

    with torch.device("meta"):
        network = module_of(spec).build(spec)
    tiles = _build(spec.tile_encoder, None, False)
    return dataclasses.replace(tiles, slide_encoder=SlideEncoder(spec, network.eval(), META_WEIGHTS_ID, label))


_META_BUILDERS = {IMAGE: _image_on_meta, VISION_LANGUAGE: _vision_language_on_meta, SLIDE: _slide_on_meta}
