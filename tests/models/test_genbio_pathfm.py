"""The `genbio-pathfm` entry: a one-channel timm trunk run on each RGB channel (evalsuite.models.image.channelwise).

The published size is built on the meta device: its parameters are the published file's, key for key, once that
file's DINOv3 names are renamed, and the tile embedding is 4608 wide (3 x 1536, the README's shape). A small
config with random weights, saved in the published DINOv3 layout, loads back through build_backbone; its embedding is
the three channels' class tokens concatenated in R, G, B order and its dense features are the channels' patch
tokens concatenated, each computed here with the trunk alone on one channel.
"""

import dataclasses

import pytest
import torch
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone, create_architecture, spec_backbone
from evalsuite.models.registry import REGISTRY

WIDTH, DEPTH, HIDDEN, REGISTERS, PATCH_PX = 1536, 40, 4096, 4, 16
# "a 1.1B-parameter FM" (genbio-ai/genbio-pathfm README): the shapes below, summed.
PARAMETERS = 1_133_686_784
SMALL = {"embed_dim": 32, "depth": 2, "num_heads": 2, "img_size": 32}  # 2x2 patches of 16 px, SwiGLU hidden 128


def _published_shapes(width: int, depth: int, hidden: int) -> dict:
    """GenBio_PathFM_Inference's VisionTransformer state dict (DINOv3 names), as model.pth holds it."""
    shapes = {"cls_token": (1, 1, width), "storage_tokens": (1, REGISTERS, width),
              "patch_embed.proj.weight": (width, 1, PATCH_PX, PATCH_PX), "patch_embed.proj.bias": (width,),
              "rope_embed.periods": (width // 24 // 4,), "norm.weight": (width,), "norm.bias": (width,)}
    for i in range(depth):
        block = {"norm1.weight": (width,), "norm1.bias": (width,), "attn.qkv.weight": (3 * width, width),
                 "attn.proj.weight": (width, width), "attn.proj.bias": (width,), "ls1.gamma": (width,),
                 "norm2.weight": (width,), "norm2.bias": (width,), "mlp.w1.weight": (hidden, width),
                 "mlp.w1.bias": (hidden,), "mlp.w2.weight": (hidden, width), "mlp.w2.bias": (hidden,),
                 "mlp.w3.weight": (width, hidden), "mlp.w3.bias": (width,), "ls2.gamma": (width,)}
        shapes.update({f"blocks.{i}.{name}": shape for name, shape in block.items()})
    return shapes


def _dinov3_layout(state: dict) -> dict:
    """Our state dict in the published names (the inverse of ChannelwiseViT.fit_state_dict), RoPE periods added."""
    names = (("trunk.", ""), ("reg_token", "storage_tokens"), (".gamma_1", ".ls1.gamma"), (".gamma_2", ".ls2.gamma"),
             (".mlp.fc1_g.", ".mlp.w1."), (".mlp.fc1_x.", ".mlp.w2."), (".mlp.fc2.", ".mlp.w3."))
    out = {}
    for key, value in state.items():
        for ours, published in names:
            key = key.replace(ours, published)
        out[key] = value.contiguous()
    return {**out, "rope_embed.periods": torch.ones(4, dtype=torch.bfloat16)}  # saved by DINOv3, computed by timm


def test_published_size_has_the_published_names_shapes_and_width():
    spec = REGISTRY["genbio-pathfm"]
    model = create_architecture(spec, device="meta")
    published = {k: torch.empty(s, device="meta") for k, s in _published_shapes(WIDTH, DEPTH, HIDDEN).items()}
    fitted = {k: tuple(v.shape) for k, v in model.fit_state_dict(published).items()}
    assert fitted == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS
    assert model.trunk.norm.eps == model.trunk.blocks[0].norm1.eps == 1e-6  # DINOv3 `layernorm`, not timm's 1e-5

    backbone = spec_backbone(spec, model, weights_id="meta", label=spec.name)
    images = torch.empty(1, 3, 224, 224, device="meta")
    assert tuple(backbone.pooled_features(images).shape) == (1, spec.embed_dim) == (1, 3 * WIDTH)
    assert tuple(backbone.dense_features(images).shape) == (1, 14, 14, 3 * WIDTH)
    assert backbone.data_config["mean"] == (0.697, 0.575, 0.728) and backbone.data_config["std"] == (0.188, 0.240, 0.187)


@pytest.fixture
def small(monkeypatch):
    spec = REGISTRY["genbio-pathfm"]
    small_spec = dataclasses.replace(spec, timm_kwargs={**spec.timm_kwargs, **SMALL},
                                     pretrained_cfg=dataclasses.replace(spec.pretrained_cfg, input_size_px=32),
                                     token_dim=3 * SMALL["embed_dim"], embed_dim=3 * SMALL["embed_dim"])
    monkeypatch.setitem(REGISTRY, "genbio-pathfm", small_spec)
    return small_spec


def _per_channel(trunk, images: torch.Tensor) -> list:
    """The trunk's tokens for each colour channel alone, as the published forward computes them."""
    return [trunk.forward_features(images[:, c:c + 1]) for c in range(images.shape[1])]


def test_published_layout_round_trips_and_embeds_each_channel(small, tmp_path):
    original = create_architecture(small)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for tensor in original.state_dict().values():
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.2)
    save_file(_dinov3_layout(original.state_dict()), str(tmp_path / "model.safetensors"))

    backbone = build_backbone("genbio-pathfm", weights=str(tmp_path / "model.safetensors"))
    images = torch.randn(2, 3, 32, 32, generator=generator)
    with torch.no_grad():
        pooled, dense = backbone.pooled_features(images), backbone.dense_features(images)
        channels = _per_channel(original.eval().trunk, images)
        two_layers = backbone.dense_features(images, layers=(0, -1))

    prefix = small.num_prefix_tokens
    assert torch.allclose(pooled, torch.cat([tokens[:, 0] for tokens in channels], dim=-1), atol=1e-5)
    patches = torch.cat([tokens[:, prefix:] for tokens in channels], dim=-1)
    assert torch.allclose(dense, patches.reshape(2, 2, 2, 3 * SMALL["embed_dim"]), atol=1e-5)
    assert two_layers.shape == (2, 2, 2, 2 * 3 * SMALL["embed_dim"])
    assert torch.allclose(two_layers[..., 3 * SMALL["embed_dim"]:], dense, atol=1e-5)


def test_a_one_channel_image_is_a_one_line_error(small):
    backbone = build_backbone("genbio-pathfm", random_init=True)
    with pytest.raises(EvalsuiteError, match=r"\[batch, 3, height, width\].*got shape \(1, 1, 32, 32\)") as error:
        backbone.pooled_features(torch.zeros(1, 1, 32, 32))
    assert "\n" not in str(error.value)
