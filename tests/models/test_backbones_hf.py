"""Checkpoints published for Hugging Face transformers (Phikon, Phikon-v2, Hibou, Midnight) and the
original DINOv2 layout (kaiko ViT-L/14) load into timm ViTs through evalsuite.models.image.adapters.

The reference is transformers itself: a small randomly initialised transformers model and the
timm model given its renamed weights must produce the same tokens. The published configs of
the registry entries are then checked key for key, shape for shape, on the meta device.
"""

import re

import pytest
import torch
from timm.layers import SwiGLUPacked
from timm.models.vision_transformer import VisionTransformer

from evalsuite.models import checkpoints
from evalsuite.models.backbones import create_architecture
from evalsuite.models.image import adapters
from evalsuite.models.image.entries import MODELS

transformers = pytest.importorskip(
    "transformers", reason="the transformers key mapping is checked against transformers itself (dev extra)")


def _randomised(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random, layer norms and layer scales included, so a misplaced tensor shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    return module.eval()


def _hub_layout(state: dict) -> dict:
    """transformers 5 names back to the 4.x names the hub checkpoints were saved with."""
    out, vit = {}, any("layernorm_before" in k for k in state)
    for key, value in state.items():
        key = re.sub(r"^layers\.", "encoder.layer.", key)
        key = re.sub(r"attention\.([qkv])_proj", lambda m: {"q": "attention.attention.query", "k":
                     "attention.attention.key", "v": "attention.attention.value"}[m.group(1)], key)
        key = key.replace("attention.o_proj", "attention.output.dense")
        # transformers 4 named a ViT's MLP intermediate.dense / output.dense (DINOv2's stayed mlp.fc1/fc2).
        if vit:
            key = re.sub(r"^(encoder\.layer\.\d+)\.mlp\.fc1\.", r"\1.intermediate.dense.", key)
            key = re.sub(r"^(encoder\.layer\.\d+)\.mlp\.fc2\.", r"\1.output.dense.", key)
        key = key.replace("mlp.down_proj", "mlp.weights_out")
        out[key] = value
    for gate in [k for k in out if ".mlp.gate_proj." in k]:
        up = gate.replace("gate_proj", "up_proj")
        out[gate.replace("gate_proj", "weights_in")] = torch.cat([out.pop(gate), out.pop(up)], dim=0)
    return out


def _timm_tokens(state: dict, images: torch.Tensor, **vit_kwargs) -> torch.Tensor:
    model = VisionTransformer(num_classes=0, **vit_kwargs).eval()
    converted = adapters.to_timm_vit(state, model)
    checkpoints.assign_weights(model, checkpoints.matched_state_dict(model, converted, "test"))
    with torch.inference_mode():
        return model.forward_features(images)


def _images(side_px: int) -> torch.Tensor:
    return torch.randn(2, 3, side_px, side_px, generator=torch.Generator().manual_seed(1))


def _reference_tokens(hf, layout: str, image_px: int):
    """(state dict in `layout`, images, transformers' last hidden state) of a randomised transformers model."""
    hf = _randomised(hf)
    state = hf.state_dict() if layout == "installed" else _hub_layout(hf.state_dict())
    images = _images(image_px)
    with torch.inference_mode():
        return state, images, hf(pixel_values=images).last_hidden_state


@pytest.mark.parametrize("layout", ["installed", "hub"])
def test_transformers_vit_equals_timm_vit(layout):  # Phikon
    config = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=128, image_size=32, patch_size=8, layer_norm_eps=1e-6)
    state, images, expected = _reference_tokens(transformers.ViTModel(config, add_pooling_layer=False), layout, 32)
    tokens = _timm_tokens(state, images, img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, mlp_ratio=2)
    assert torch.allclose(tokens, expected, atol=1e-4)


@pytest.mark.parametrize("layout", ["installed", "hub"])
def test_transformers_dinov2_swiglu_equals_timm_vit_with_resampled_positions(layout):  # Midnight, Phikon-v2
    # Trained at 56 px (4x4 positions) and run at 28 px: transformers interpolates at run time,
    # the timm model gets positions resampled once on load; both must agree.
    config = transformers.Dinov2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=56,
                                       patch_size=14, use_swiglu_ffn=True)
    state, images, expected = _reference_tokens(transformers.Dinov2Model(config), layout, 28)
    # transformers' SwiGLU width for 64: (int(256 * 2 / 3) + 7) // 8 * 8 = 176, packed 352 = 64 x 5.5.
    tokens = _timm_tokens(state, images, img_size=28, patch_size=14, embed_dim=64, depth=2, num_heads=4,
                          mlp_ratio=5.5, init_values=1.0, mlp_layer=SwiGLUPacked, act_layer=torch.nn.SiLU)
    assert torch.allclose(tokens, expected, atol=1e-4)


@pytest.mark.parametrize("layout", ["installed", "hub"])
def test_transformers_dinov2_with_registers_equals_timm_reg_vit(layout):  # Hibou
    config = transformers.Dinov2WithRegistersConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                    image_size=28, patch_size=14, num_register_tokens=4,
                                                    use_swiglu_ffn=True)
    state, images, expected = _reference_tokens(transformers.Dinov2WithRegistersModel(config), layout, 28)
    tokens = _timm_tokens(state, images, img_size=28, patch_size=14, embed_dim=64, depth=2, num_heads=4,
                          mlp_ratio=5.5, init_values=1.0, mlp_layer=SwiGLUPacked, act_layer=torch.nn.SiLU,
                          reg_tokens=4, no_embed_class=True)
    assert tokens.shape == (2, 1 + 4 + 4, 64)
    assert torch.allclose(tokens, expected, atol=1e-4)


def test_original_dinov2_layout_agrees_with_timms_own_converter():  # kaiko ViT-L/14 release
    from timm.models.vision_transformer import checkpoint_filter_fn

    kwargs = dict(img_size=28, patch_size=14, embed_dim=64, depth=2, num_heads=4, mlp_ratio=5.5, init_values=1.0,
                  mlp_layer=SwiGLUPacked, act_layer=torch.nn.SiLU, reg_tokens=4, no_embed_class=True, num_classes=0)
    timm_state = _randomised(VisionTransformer(**kwargs)).state_dict()
    class_position = torch.randn(1, 1, 64)
    original = {"mask_token": torch.zeros(1, 64), "register_tokens": timm_state["reg_token"],
                "cls_token": timm_state["cls_token"] - class_position,
                "pos_embed": torch.cat([class_position, timm_state["pos_embed"]], dim=1)}
    for key, value in timm_state.items():
        if key not in ("reg_token", "cls_token", "pos_embed"):
            original[key.replace("mlp.fc1", "mlp.w12").replace("mlp.fc2", "mlp.w3")] = value

    ours = adapters.to_timm_vit(dict(original), VisionTransformer(**kwargs))
    timms = checkpoint_filter_fn(dict(original), VisionTransformer(**kwargs))
    assert adapters.checkpoint_layout(original) == "dinov2"
    assert set(ours) == set(timms) == set(timm_state)
    for key in timm_state:
        assert torch.allclose(ours[key], timms[key], atol=1e-6), key
        assert torch.allclose(ours[key], timm_state[key], atol=1e-6), key


# The configs the hub repositories publish (config.json), or, where a repository is gated,
# the configuration its card and paper describe (see the registry's `unconfirmed` notes).
PUBLISHED_CONFIGS = {
    "phikon": lambda: transformers.ViTModel(transformers.ViTConfig(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224,
        patch_size=16, layer_norm_eps=1e-6), add_pooling_layer=False),
    "phikon-v2": lambda: transformers.Dinov2Model(transformers.Dinov2Config(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, mlp_ratio=4, image_size=224, patch_size=16)),
    "hibou-b": lambda: transformers.Dinov2WithRegistersModel(transformers.Dinov2WithRegistersConfig(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, image_size=224, patch_size=14,
        num_register_tokens=4, use_swiglu_ffn=True)),
    "hibou-l": lambda: transformers.Dinov2WithRegistersModel(transformers.Dinov2WithRegistersConfig(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, mlp_ratio=4, image_size=224, patch_size=14,
        num_register_tokens=4, use_swiglu_ffn=True)),
    # facebook/dinov2-giant's config (Midnight's base model), trained at 518 px: positions are resampled.
    "midnight-12k": lambda: transformers.Dinov2Model(transformers.Dinov2Config(
        hidden_size=1536, num_hidden_layers=40, num_attention_heads=24, mlp_ratio=4, image_size=518, patch_size=14,
        use_swiglu_ffn=True)),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_CONFIGS))
def test_published_transformers_checkpoints_fit_the_registry_architecture(name):
    with torch.device("meta"):
        hf_state = _hub_layout(PUBLISHED_CONFIGS[name]().state_dict())
    model = create_architecture(MODELS[name], device="meta")
    converted = adapters.to_timm_vit(hf_state, model)
    matched = checkpoints.matched_state_dict(model, converted, name)  # raises on any missing/extra/mis-shaped key
    assert set(matched) == set(model.state_dict())
