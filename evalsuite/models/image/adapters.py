"""Checkpoints of other ViT implementations renamed onto timm's VisionTransformer.

Pathology models are published in three layouts of the same network: timm's own, the
original DINOv2 repository's (kaiko ViT-L/14 release) and Hugging Face transformers' ViT /
DINOv2 (Phikon, Phikon-v2, Hibou, Midnight). Renaming keys (and fusing q/k/v) lets one timm
module and one `forward_features` serve all of them, so transformers is not needed to run
them. The layout is recognised from the keys, so a timm port of a transformers model loads too.

Position embeddings trained at another grid are resampled once, on load, to the model's grid,
bicubic, with or without antialiasing as the code that runs such a checkpoint does at that
input size (`resample_antialias`): timm (its checkpoint filter and `dynamic_img_size`) antialiases,
so a timm checkpoint gets exactly what `timm.create_model(..., pretrained=True)` gives it.
"""

import math
import re

import torch

from evalsuite.errors import EvalsuiteError

_HF_PATCH_KEY = "embeddings.patch_embeddings.projection.weight"
_WRAPPED_PATCH_KEY = "backbone.patch_embed.proj.weight"
# transformers 4.x layer names (what the hub checkpoints hold) and 5.x names, onto timm's.
_HF_LAYER_RENAMES = {
    "layernorm_before": "norm1", "norm1": "norm1",
    "layernorm_after": "norm2", "norm2": "norm2",
    "attention.output.dense": "attn.proj", "attention.o_proj": "attn.proj",
    "intermediate.dense": "mlp.fc1", "output.dense": "mlp.fc2",
    "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2",
    "mlp.weights_in": "mlp.fc1", "mlp.weights_out": "mlp.fc2", "mlp.down_proj": "mlp.fc2",
    "layer_scale1": "ls1", "layer_scale2": "ls2",
}
_HF_QKV = {"attention.attention.query": 0, "attention.attention.key": 1, "attention.attention.value": 2,
           "attention.q_proj": 0, "attention.k_proj": 1, "attention.v_proj": 2}
# transformers 5 splits the packed SwiGLU input projection; timm's packed layer wants [gate; up].
_HF_SWIGLU = {"mlp.gate_proj": 0, "mlp.up_proj": 1}
_HF_EMBEDDINGS = {
    "embeddings.cls_token": "cls_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.register_tokens": "reg_token",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
}
_HF_LAYER = re.compile(r"^(?:encoder\.layer|layers)\.(\d+)\.(.+)\.(weight|bias|lambda1)$")


def checkpoint_layout(state: dict) -> str:
    """'timm', 'dinov2' (facebookresearch/dinov2) or 'transformers'."""
    if any(key.endswith(_HF_PATCH_KEY) for key in state):
        return "transformers"
    if "mask_token" in state and "patch_embed.proj.weight" in state:
        return "dinov2"
    return "timm"


def to_timm_vit(state: dict, model) -> dict:
    """`state` in any known layout, renamed and resized for the timm ViT `model`."""
    state = _unwrapped_backbone(state)
    layout = checkpoint_layout(state)
    if layout == "transformers":
        state = _from_transformers(state)
    elif layout == "dinov2":
        state = _from_dinov2(state)
    if layout != "timm" and getattr(model, "no_embed_class", False):
        state = _fuse_class_position(state)
    return fit_pos_embed(state, model, antialias=resample_antialias(layout, state))


def _unwrapped_backbone(state: dict) -> dict:
    """A module that holds its ViT as `backbone` and is saved whole (EXAONE Path 2.5's PatchEncoder,
    exaonepath/models/patch_encoder_hf.py, via PyTorchModelHubMixin) writes every key under `backbone.`."""
    if _WRAPPED_PATCH_KEY not in state:
        return state
    return {key.removeprefix("backbone."): value for key, value in state.items()}


def resample_antialias(layout: str, state: dict) -> bool:
    """Whether the code that runs a checkpoint of `layout` antialiases its position embeddings when resizing.

    timm: yes (`resample_abs_pos_embed`'s default, used by its checkpoint filter and at run time).
    Original DINOv2 checkpoints load through timm's converter (kaiko's hubconf does so for its
    ViT-L/14), and DINOv2's own register models agree (interpolate_antialias=True, no offset).
    transformers (installed source, models/*/modeling_*.py `interpolate_pos_encoding`): ViT and
    Dinov2 interpolate bicubic without antialiasing, Dinov2WithRegisters with it; `state` is the
    renamed checkpoint, in which transformers' register tokens have become `reg_token`.
    """
    return layout != "transformers" or "reg_token" in state


def fit_pos_embed(state: dict, model, antialias: bool = True) -> dict:
    """Resample `pos_embed` to the model's patch grid when the checkpoint was trained at another size
    (bicubic, as timm's `resample_abs_pos_embed`; `antialias` per `resample_antialias`)."""
    source = state.get("pos_embed")
    target = getattr(model, "pos_embed", None)
    if source is None or target is None or source.shape == target.shape:
        return state
    prefix = 0 if getattr(model, "no_embed_class", False) else model.num_prefix_tokens
    old_side = math.isqrt(max(source.shape[1] - prefix, 0))
    if old_side * old_side != source.shape[1] - prefix or source.shape[2] != target.shape[2]:
        return state  # not the same network at another size: the key check reports the mismatch
    from timm.layers import resample_abs_pos_embed

    resampled = resample_abs_pos_embed(
        source.float(), new_size=list(model.patch_embed.grid_size), old_size=[old_side, old_side],
        num_prefix_tokens=prefix, interpolation="bicubic", antialias=antialias,
    )
    return {**state, "pos_embed": resampled.to(source.dtype)}


# TRIDENT builds CONCH v1.5's trunk at 224 px: its position embedding is a 14x14 grid.
_TRIDENT_CONCH_GRID = 14


def trident_conch_pos_embed(state: dict, trunk, key: str) -> dict:
    """CONCH v1.5's position embedding `state[key]` as TRIDENT uses it at `trunk`'s input grid, computed once.

    mahmoodlab/TRIDENT at a91fa84, `trident/patch_encoder_models/model_zoo/conchv1_5/conchv1_5.py`: the
    trunk is built at 224 px; `resize_pos_embed` resamples the checkpoint's embedding to 14x14 if it
    differs (timm `resample_abs_pos_embed`, bilinear, no antialiasing); at run time
    `interpolate_pos_encoding` resizes the 14x14 patch part bicubically with
    `scale_factor=(grid + 0.1) / 14` (DINO's offset; it differs from resizing to `size=grid`).
    A trunk built at the input size with this embedding gives TRIDENT's tokens.
    """
    source = state.get(key)
    if source is None or source.shape[-1] != trunk.embed_dim:
        return state  # not this network: the key check reports the mismatch
    from timm.layers import resample_abs_pos_embed

    side, width = _TRIDENT_CONCH_GRID, source.shape[-1]
    pos = source
    if pos.shape[1] != 1 + side * side:
        pos = resample_abs_pos_embed(pos, new_size=[side, side], num_prefix_tokens=1, interpolation="bilinear",
                                     antialias=False)
    pos = pos.float()  # TRIDENT interpolates the float32 module parameter
    rows, cols = trunk.patch_embed.grid_size
    if (rows, cols) != (side, side):
        grid = pos[:, 1:].reshape(1, side, side, width).permute(0, 3, 1, 2)
        grid = torch.nn.functional.interpolate(grid, scale_factor=((rows + 0.1) / side, (cols + 0.1) / side),
                                               mode="bicubic")
        pos = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, rows * cols, width)], dim=1)
    return {**state, key: pos}


def _from_transformers(state: dict) -> dict:
    prefix = next(key for key in state if key.endswith(_HF_PATCH_KEY))[: -len(_HF_PATCH_KEY)]
    out, qkv, swiglu = {}, {}, {}
    for key, value in state.items():
        if not key.startswith(prefix):
            continue  # classification heads and other modules around the backbone
        key = key[len(prefix):]
        if key in _HF_EMBEDDINGS:
            out[_HF_EMBEDDINGS[key]] = value
            continue
        match = _HF_LAYER.match(key)
        if match is None:
            continue  # mask_token (masked-image pre-training only) and the pooler
        layer, module, param = match.groups()
        if module in _HF_QKV:
            qkv.setdefault((layer, param), [None] * 3)[_HF_QKV[module]] = value
        elif module in _HF_SWIGLU:
            swiglu.setdefault((layer, param), [None] * 2)[_HF_SWIGLU[module]] = value
        elif module in _HF_LAYER_RENAMES:
            name = _HF_LAYER_RENAMES[module]
            out[f"blocks.{layer}.{name}.{'gamma' if param == 'lambda1' else param}"] = value
        else:
            raise EvalsuiteError(f"unrecognised transformers ViT key '{prefix}{key}'; this checkpoint layout is "
                                 "not supported, convert it to timm keys")
    out.update(_concatenated(qkv, "attn.qkv", "query/key/value"))
    out.update(_concatenated(swiglu, "mlp.fc1", "gate/up"))
    return out


def _concatenated(parts: dict, name: str, what: str) -> dict:
    out = {}
    for (layer, param), tensors in parts.items():
        if any(t is None for t in tensors):
            raise EvalsuiteError(f"layer {layer} of the checkpoint lacks part of its {what} {param}s")
        out[f"blocks.{layer}.{name}.{param}"] = torch.cat(tensors, dim=0)
    return out


def _from_dinov2(state: dict) -> dict:
    out = {}
    for key, value in state.items():
        if key == "mask_token":
            continue
        if key == "register_tokens":
            key = "reg_token"
        out[re.sub(r"\.mlp\.w12\.", ".mlp.fc1.", re.sub(r"\.mlp\.w3\.", ".mlp.fc2.", key))] = value
    return out


def _fuse_class_position(state: dict) -> dict:
    """DINOv2 adds a position to the class token; timm's no_embed_class ViTs fold it into the token."""
    pos_embed, cls_token = state.get("pos_embed"), state.get("cls_token")
    if pos_embed is None or cls_token is None:
        return state
    return {**state, "cls_token": cls_token + pos_embed[:, :1], "pos_embed": pos_embed[:, 1:]}
