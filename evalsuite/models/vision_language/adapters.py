"""Renaming a transformers `CLIPModel` checkpoint (PLIP's `vinid/plip`) into open_clip's CLIP layout, so one module
(open_clip's CLIP, built by the library) serves both. The tensors are the same; only names differ, and three
things change shape: transformers keeps q, k and v projections apart where open_clip packs them into one
`in_proj`, and its two projections are `nn.Linear` weights (out x in) where open_clip multiplies by the matrix
(in x out), so they are transposed. The names are transformers' `modeling_clip.py` (CLIPModel) and open_clip's
`model.py`/`transformer.py` (CLIP, VisionTransformer, TextTransformer).

Neither layout records the activation the towers were trained with (QuickGELU for OpenAI's CLIP and PLIP, GELU for
QuiltNet): a GELU file loads key for key into a QuickGELU model and every embedding is quietly wrong.
`check_clip_checkpoint` refuses what can be told: a layout the entry's published file does not have (an open_clip
ViT-B/32 file, such as QuiltNet's, for `plip`, whose file is a transformers CLIPModel), and an activation that
a config file the hub ships beside the weights declares (`open_clip_config.json`, transformers' `config.json`).
A file in the right layout with neither config beside it cannot be told apart (docs/zeroshot.md).
"""

import json
import re
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.vision_language.entries import HF_CLIP_LAYOUT, OPEN_CLIP_LAYOUT, VLMS

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


def checkpoint_layout(state: dict) -> str:
    """HF_CLIP_LAYOUT for a transformers CLIPModel state dict, else OPEN_CLIP_LAYOUT."""
    return HF_CLIP_LAYOUT if is_hf_clip(state) else OPEN_CLIP_LAYOUT


def check_clip_checkpoint(spec, state: dict, path: Path) -> None:
    """Refuses a CLIP checkpoint `spec` cannot have been published as: another layout, or a config beside it that
    declares the other activation. One line naming the file and the entry that fits it."""
    layout = checkpoint_layout(state)
    if layout not in spec.checkpoint_layouts:
        raise EvalsuiteError(f"weights {path} are a state dict in the {layout} layout, but model '{spec.name}' "
                             f"reads its published file, {spec.checkpoint_layout}: a file in the other layout is "
                             "another model's, whose activation the tensors do not record (it would load key for key "
                             f"into {spec.name}'s {_activation(spec.quick_gelu)} towers and give wrong embeddings)"
                             f"{_entries_for(spec, layout=layout)}")
    declared = declared_quick_gelu(Path(path).parent)
    if declared is not None and declared[0] != spec.quick_gelu:
        raise EvalsuiteError(f"weights {path}: {declared[1]} beside it declares {_activation(declared[0])}, but model "
                             f"'{spec.name}' builds its towers with {_activation(spec.quick_gelu)} (the tensors would "
                             f"load and give wrong embeddings){_entries_for(spec, quick_gelu=declared[0])}, or remove "
                             f"{declared[1].name} if it is not this checkpoint's config")


def declared_quick_gelu(folder: Path) -> tuple[bool, Path] | None:
    """(whether the towers use QuickGELU, the file that says so) from a hub config beside the checkpoint; None where
    there is none. `open_clip_config.json` is read as open_clip reads it (`model_cfg.quick_gelu`, absent: GELU);
    transformers' `config.json` of a CLIP model by `hidden_act` of its text and vision configs (absent: quick_gelu,
    transformers' CLIP default)."""
    open_clip_config = _json(folder / "open_clip_config.json")
    if isinstance(open_clip_config, dict) and isinstance(open_clip_config.get("model_cfg"), dict):
        return bool(open_clip_config["model_cfg"].get("quick_gelu", False)), folder / "open_clip_config.json"
    config = _json(folder / "config.json")
    if isinstance(config, dict) and config.get("model_type") == "clip":
        acts = {(config.get(tower) or {}).get("hidden_act", "quick_gelu") for tower in ("text_config", "vision_config")}
        if len(acts) == 1 and acts <= {"quick_gelu", "gelu"}:
            return acts == {"quick_gelu"}, folder / "config.json"
    return None


def _json(path: Path):
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None  # an unreadable config says nothing; the key check still runs


def _activation(quick_gelu: bool) -> str:
    return "QuickGELU" if quick_gelu else "GELU"


def _entries_for(spec, layout: str | None = None, quick_gelu: bool | None = None) -> str:
    """'; use --model X' for the registry's entries of the same architecture that fit what the file is."""
    fits = [other.name for other in VLMS.values() if other.name != spec.name and other.library == spec.library
            and other.architecture == spec.architecture
            and (layout is None or layout in other.checkpoint_layouts)
            and (quick_gelu is None or other.quick_gelu == quick_gelu)]
    return f"; use --model {' or '.join(fits)} for it" if fits else "; check --model matches the checkpoint"
