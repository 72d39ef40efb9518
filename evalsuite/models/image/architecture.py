"""An image entry's network: its timm architecture, built with seeded random weights (on the meta device when
weights are to be assigned, so a giant model is never held twice), with its head where the entry names one."""

import contextlib

import torch

from evalsuite.models.image.channelwise import CHANNELWISE, ChannelwiseViT
from evalsuite.models.image.conch_pooler import HEADS as POOLER_HEADS
from evalsuite.models.image.ctranspath import ConvStem
from evalsuite.models.image.entries import ModelSpec

RANDOM_INIT_SEED = 0
# Modules around the timm trunk, by the registry's `head` name: CONCH v1.5's pooler, the channel-wise wrapper.
HEADS = {**POOLER_HEADS, CHANNELWISE: ChannelwiseViT}


def create_architecture(spec: ModelSpec, device: str | torch.device | None = None) -> torch.nn.Module:
    """The spec's timm module with seeded random weights; on the meta device it costs no memory."""
    import timm

    kwargs = resolve_layers(spec.timm_kwargs)
    placement = torch.device(device) if device is not None else contextlib.nullcontext()
    # A fixed seed makes the random-init baseline (and its cache key) reproducible.
    with torch.random.fork_rng(devices=[]), placement:
        torch.manual_seed(RANDOM_INIT_SEED)
        model = timm.create_model(spec.architecture, pretrained=False, num_classes=0, **kwargs)
        return HEADS[spec.head](model) if spec.head else model


def resolve_layers(kwargs: dict) -> dict:
    """Layer classes are named in the registry (plain data); timm wants the classes."""
    from timm.layers import LayerNorm, SwiGLUPacked

    # timm's LayerNorm has eps 1e-6 (where timm's DINOv3 models pass 1e-5).
    layers = {"SwiGLUPacked": SwiGLUPacked, "SiLU": torch.nn.SiLU, "ConvStem": ConvStem, "LayerNorm": LayerNorm}
    return {k: layers[v] if k.endswith("_layer") else v for k, v in kwargs.items()}
