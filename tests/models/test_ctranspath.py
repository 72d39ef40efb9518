"""The `ctranspath` entry: timm's Swin-T with CTransPath's convolutional stem (evalsuite.models.image.ctranspath).

The published size is built on the meta device for its key names and shapes in the published layout (timm 0.5.4's
Swin names, as `ctranspath.pth` holds them under `model`); a small config with random weights, saved in that layout,
loads back through build_backbone with identical embeddings; with `timm-ctp` installed (the modified timm 0.5.4
TransPath ships, on PyPI) the file is the state dict of timm 0.5.4's own Swin and the embeddings are its own.
"""

import dataclasses
import importlib.util
import re

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone, create_architecture
from evalsuite.models.image.ctranspath import ConvStem, published_keys
from evalsuite.models.registry import REGISTRY

needs_timm_ctp = pytest.mark.skipif(importlib.util.find_spec("timm_ctp") is None,
                                    reason="timm-ctp (the modified timm 0.5.4 of TransPath) is not installed: "
                                           "pip install timm-ctp==0.5.4")
# The shifted-window masks CTransPath's file holds: the blocks TRIDENT (a91fa84, patch_encoder_models/load.py) finds
# missing when it drops them, with 56x56 / 28x28 / 14x14 grids in 7x7 windows (stage 3 is one window: no shift).
PUBLISHED_MASKS = {"layers.0.blocks.1.attn_mask": (64, 49, 49), "layers.1.blocks.1.attn_mask": (16, 49, 49),
                   "layers.2.blocks.1.attn_mask": (4, 49, 49), "layers.2.blocks.3.attn_mask": (4, 49, 49),
                   "layers.2.blocks.5.attn_mask": (4, 49, 49)}
# Shapes of TransPath's ctran.py ConvStem at embed_dim 96 (widths 96/8 and 96/4) and timm 0.5.4's stage-0 merge.
PUBLISHED_SHAPES = {"patch_embed.proj.0.weight": (12, 3, 3, 3), "patch_embed.proj.3.weight": (24, 12, 3, 3),
                    "patch_embed.proj.6.weight": (96, 24, 1, 1), "patch_embed.proj.6.bias": (96,),
                    "patch_embed.norm.weight": (96,), "layers.0.downsample.reduction.weight": (192, 384),
                    "layers.2.downsample.norm.weight": (1536,), "norm.weight": (768,)}
# timm's Swin-T without its head (27,519,354) less the 4x4 patch projection (4,704) plus the stem (5,388).
PARAMETERS = 27_520_038
# A small Swin with the same code: 32 px, 8x8 patches, windows of 4 (stage 0 shifted, stage 1 one window).
SMALL_KWARGS = {"img_size": 32, "embed_dim": 16, "depths": (2, 2), "num_heads": (1, 2), "window_size": 4}


def _published_layout(state: dict, masks: dict) -> dict:
    """Our state in timm 0.5.4's names: merges at the end of the stage before, saved index buffers and masks."""
    out = {re.sub(r"^layers\.(\d+)\.downsample\.", lambda m: f"layers.{int(m.group(1)) - 1}.downsample.", k): v
           for k, v in state.items()}
    for key in [k for k in out if k.endswith("attn.relative_position_bias_table")]:
        window_area = ((round(out[key].shape[0] ** 0.5) + 1) // 2) ** 2  # the table has (2 window - 1)^2 rows
        out[key.replace("relative_position_bias_table", "relative_position_index")] = torch.zeros(
            window_area, window_area, dtype=torch.long)
    return {**out, **{key: torch.zeros(shape) for key, shape in masks.items()}}


def test_published_size_has_the_published_names_and_shapes():
    model = create_architecture(REGISTRY["ctranspath"], device="meta")
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    published = _published_layout(model.state_dict(), PUBLISHED_MASKS)
    assert {k: tuple(published[k].shape) for k in PUBLISHED_SHAPES} == PUBLISHED_SHAPES
    assert {k: tuple(v.shape) for k, v in published_keys(published).items()} == ours
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS
    assert REGISTRY["ctranspath"].embed_dim == model.num_features == 768


@pytest.fixture
def small(monkeypatch):
    spec = REGISTRY["ctranspath"]
    cfg = dataclasses.replace(spec.pretrained_cfg, input_size_px=SMALL_KWARGS["img_size"])
    small_spec = dataclasses.replace(spec, timm_kwargs={**spec.timm_kwargs, **SMALL_KWARGS}, pretrained_cfg=cfg)
    monkeypatch.setitem(REGISTRY, "ctranspath", small_spec)
    return small_spec


def _randomised(model: torch.nn.Module) -> torch.nn.Module:
    """Random weights, BatchNorm statistics away from 0/1, in eval mode: nothing the load could leave at init."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if tensor.is_floating_point():
                tensor.copy_(torch.rand(tensor.shape, generator=generator) * 0.4 + 0.1 if "running_var" in name
                             else torch.randn(tensor.shape, generator=generator) * 0.2)
    return model.eval()


def _images() -> torch.Tensor:
    side = SMALL_KWARGS["img_size"]
    return torch.randn(2, 3, side, side, generator=torch.Generator().manual_seed(5))


def test_small_checkpoint_in_the_published_layout_loads_back_with_identical_embeddings(small, tmp_path):
    reference = _randomised(create_architecture(small))
    # The one shifted block: 8x8 patches in 4 windows of 4x4.
    state = _published_layout(reference.state_dict(), {"layers.0.blocks.1.attn_mask": (4, 16, 16)})
    assert "layers.0.downsample.reduction.weight" in state and "layers.1.downsample.reduction.weight" not in state
    torch.save({"model": state}, tmp_path / "ctranspath.pth")  # as TransPath publishes it
    backbone = build_backbone("ctranspath", weights=str(tmp_path / "ctranspath.pth"))
    with torch.no_grad():
        pooled, expected = backbone.pooled_features(_images()), reference(_images())
        dense = backbone.dense_features(_images())
    assert tuple(pooled.shape) == (2, 32) and torch.equal(pooled, expected)
    assert tuple(dense.shape) == (2, 4, 4, 32)  # two stages: stride 8
    assert backbone.weights_id.startswith("sha256:")


def test_a_checkpoint_of_another_network_is_a_one_line_error(small, tmp_path):
    state = _published_layout(create_architecture(small).state_dict(), {})
    del state["patch_embed.proj.0.weight"]
    torch.save({"model": state}, tmp_path / "broken.pth")
    with pytest.raises(EvalsuiteError, match="missing keys 1 \\[patch_embed.proj.0.weight\\]") as error:
        build_backbone("ctranspath", weights=str(tmp_path / "broken.pth"))
    assert "\n" not in str(error.value)


@needs_timm_ctp
def test_small_timm_0_5_4_swin_file_gives_timm_0_5_4s_embeddings(small, tmp_path):
    """The file is the state dict of timm 0.5.4's Swin (its own names, buffers and masks) with the stem above."""
    from timm_ctp.models.swin_transformer import SwinTransformer

    original = _randomised(SwinTransformer(embed_layer=ConvStem, num_classes=0, **SMALL_KWARGS))
    torch.save({"model": original.state_dict()}, tmp_path / "ctranspath.pth")
    backbone = build_backbone("ctranspath", weights=str(tmp_path / "ctranspath.pth"))
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(_images()), original(_images()), atol=1e-5, rtol=1e-5)


def test_without_weights_the_error_says_where_to_download_them():
    with pytest.raises(EvalsuiteError) as error:
        build_backbone("ctranspath")
    message = str(error.value)
    assert "\n" not in message and "--weights" in message
    assert "https://drive.google.com/file/d/1DoDx_70_TLj98gTf6YTXnu4tFhsFocDX" in message


def test_the_stem_refuses_a_tile_of_another_size():
    stem = ConvStem(img_size=32, embed_dim=16, output_fmt="NHWC")
    assert tuple(stem(torch.zeros(1, 3, 32, 32)).shape) == (1, 8, 8, 16)
    with pytest.raises(ValueError, match="32, 32"):
        stem(torch.zeros(1, 3, 64, 64))
