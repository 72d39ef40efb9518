"""Frozen backbones: a registry name, a timm architecture, an `hf-hub:` name, or a local checkpoint.

Every backbone comes back in eval mode with frozen parameters, a pooled-embedding forward
(`num_classes=0`), the data config carrying its normalisation, and a `weights_id` that
identifies its weights exactly (content hash) for cache keys and results.
"""

import difflib
from dataclasses import dataclass
from pathlib import Path

import torch

from evalsuite.checkpoints import file_sha256, load_in_order, load_matching, read_state_dict
from evalsuite.errors import EvalsuiteError
from evalsuite.hub import create_from_hub
from evalsuite.model_registry import MODELS

RANDOM_INIT_SEED = 0


@dataclass
class Backbone:
    name: str
    model: torch.nn.Module
    embed_dim: int
    data_config: dict
    weights_id: str
    label: str  # what the leaderboard's model column shows: the name, plus how the weights differ

    def pooled_features(self, images):
        """[batch, embed_dim] embedding for classification probes (timm's own pooling, head removed)."""
        return self.model(images)


def build_backbone(name: str, weights: str | None = None, random_init: bool = False) -> Backbone:
    if weights and random_init:
        raise EvalsuiteError("--weights and --random-init exclude each other; pass one")
    if name in MODELS:
        model, weights_id = _from_registry(name, weights, random_init)
        entry = MODELS[name]
        data_config = {"input_size": (3, entry.input_size_px, entry.input_size_px), "interpolation": "bicubic",
                       "mean": entry.mean, "std": entry.std}
    elif name.startswith("hf-hub:"):
        model, weights_id = _from_hub_name(name, weights, random_init)
        data_config = _timm_data_config(model)
    else:
        model, weights_id = _from_timm_name(name, weights, random_init)
        data_config = _timm_data_config(model)
    model.eval().requires_grad_(False)
    return Backbone(name=name, model=model, embed_dim=int(model.num_features), data_config=data_config,
                    weights_id=weights_id, label=_label(name, weights, random_init))


def _label(name: str, weights: str | None, random_init: bool) -> str:
    if random_init:
        return f"{name}+random-init"
    if weights:
        return f"{name}+{Path(weights).stem}"
    return name


def _create(architecture: str, random_init: bool):
    import timm

    # A fixed seed makes the random-init baseline (and its cache key) reproducible.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_INIT_SEED)
        return timm.create_model(architecture, pretrained=False, num_classes=0)


def _from_local_file(model, weights: str, mapping: str = "same") -> str:
    path = Path(weights).expanduser()
    state = read_state_dict(path)
    (load_in_order if mapping == "in_order" else load_matching)(model, state, path)
    return f"sha256:{file_sha256(path)}"


def _from_registry(name: str, weights: str | None, random_init: bool):
    entry = MODELS[name]
    model = _create(entry.architecture, random_init)
    if random_init:
        return model, f"random-init:seed{RANDOM_INIT_SEED}"
    if weights:
        return model, _from_local_file(model, weights)
    return model, _from_local_file(model, entry.weights_file(), entry.key_mapping)


def _from_hub_name(name: str, weights: str | None, random_init: bool):
    if weights or random_init:
        raise EvalsuiteError(
            f"'{name}' is resolved on the hub; with --weights or --random-init pass its timm architecture name instead"
        )
    with torch.random.fork_rng(devices=[]):
        model = create_from_hub(name, num_classes=0)
    return model, f"hub:{name.removeprefix('hf-hub:')}"


def _from_timm_name(name: str, weights: str | None, random_init: bool):
    import timm

    if not timm.is_model(name):
        raise EvalsuiteError(_unknown_model_message(name))
    if weights:
        model = _create(name, random_init=False)
        return model, _from_local_file(model, weights)
    if random_init:
        return _create(name, random_init=True), f"random-init:seed{RANDOM_INIT_SEED}"
    model = create_from_hub(name, num_classes=0)
    cfg = model.pretrained_cfg
    return model, f"timm:{cfg.get('hf_hub_id') or cfg.get('url') or name}"


def _unknown_model_message(name: str) -> str:
    import timm

    candidates = list(MODELS) + timm.list_models()
    close = difflib.get_close_matches(name, candidates, n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (f"unknown model '{name}': not a built-in (see `evalsuite list`), a timm architecture, "
            f"or an hf-hub: name.{hint}")


def _timm_data_config(model) -> dict:
    from timm.data import resolve_data_config

    config = resolve_data_config({}, model=model)
    return {k: config[k] for k in ("input_size", "interpolation", "mean", "std")}
