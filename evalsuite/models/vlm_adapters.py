"""Renaming a transformers `CLIPModel` checkpoint (PLIP's `vinid/plip`) into open_clip's CLIP layout, so one module
(open_clip's CLIP, built by the library) serves both. The tensors are the same; only names differ, and three
things change shape: transformers keeps q, k and v projections apart where open_clip packs them into one
`in_proj`, and its two projections are `nn.Linear` weights (out x in) where open_clip multiplies by the matrix
(in x out), so they are transposed. The names are transformers' `modeling_clip.py` (CLIPModel) and open_clip's
`model.py`/`transformer.py` (CLIP, VisionTransformer, TextTransformer).
"""

import re

import torch

HF_CLIP_PREFIXES = ("text_model.", "vision_model.")

# Per-layer names, transformers -> open_clip, inside `encoder.layers.N.` / `transformer.resblocks.N.`.
_LAYER_NAMES = {"self_attn.out_proj": "attn.out_proj", "layer_norm1": "ln_1", "layer_norm2": "ln_2",
                "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
# Whole names outside the layers.
_NAMES = {
    "text_model.embeddings.token_embedding.weight": "token_embedding.weight",
    "text_model.embeddings.position_embedding.weight": "positional_embedding",
    "text_model.final_layer_norm.weight": "ln_final.weight",
    "text_model.final_layer_norm.bias": "ln_final.bias",
    "vision_model.embeddings.class_embedding": "visual.class_embedding",
    "vision_model.embeddings.patch_embedding.weight": "visual.conv1.weight",
    "vision_model.embeddings.position_embedding.weight": "visual.positional_embedding",
    "vision_model.pre_layrnorm.weight": "visual.ln_pre.weight",  # transformers' spelling
    "vision_model.pre_layrnorm.bias": "visual.ln_pre.bias",
    "vision_model.post_layernorm.weight": "visual.ln_post.weight",
    "vision_model.post_layernorm.bias": "visual.ln_post.bias",
    "logit_scale": "logit_scale",
}
_TRANSPOSED = {"text_projection.weight": "text_projection", "visual_projection.weight": "visual.proj"}
_LAYER = re.compile(r"^(text_model|vision_model)\.encoder\.layers\.(\d+)\.(.+)\.(weight|bias)$")
_TOWER = {"text_model": "transformer.resblocks", "vision_model": "visual.transformer.resblocks"}


def is_hf_clip(state: dict) -> bool:
    return any(key.startswith(HF_CLIP_PREFIXES) for key in state)


def hf_clip_to_open_clip(state: dict) -> dict:
    """open_clip names for a transformers CLIPModel state dict; unknown keys pass through (the key check names
    them), and `position_ids` buffers (computed, not learnt) are dropped."""
    out, qkv = {}, {}
    for key, tensor in state.items():
        if key.endswith("position_ids"):
            continue
        if key in _NAMES:
            out[_NAMES[key]] = tensor
        elif key in _TRANSPOSED:
            out[_TRANSPOSED[key]] = tensor.t().contiguous()
        elif match := _LAYER.match(key):
            tower, layer, name, kind = match.groups()
            prefix = f"{_TOWER[tower]}.{layer}"
            if name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                qkv.setdefault((prefix, kind), {})[name[-6]] = tensor
            else:
                out[f"{prefix}.{_LAYER_NAMES.get(name, name)}.{kind}"] = tensor
        else:
            out[key] = tensor
    for (prefix, kind), parts in qkv.items():  # open_clip packs q, k, v in this order (nn.MultiheadAttention)
        out[f"{prefix}.attn.in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out
