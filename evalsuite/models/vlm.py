"""Vision-language backbones: the library's own model (open_clip), split into an image tower for the feature path
and a text tower + tokenizer for zero-shot classification.

The image tower gives the features the entry's `probe_features` names, and the float16 cache holds them: the model's
`encode_image` (the projected, unnormalised image embedding in the joint space), or, for a model whose instructions
prescribe the features before its linear image projection for linear probes and MIL (CONCH, MUSK), those. The probes
that compare images with texts map the cached rows into the joint space with `ImageToJoint` (the projection, applied
to each float32 batch; the identity for the others), so one extraction serves every probe.
Weights come from a local `--weights` file in the library's published state-dict layout, checked key for key
(evalsuite.models.checkpoints); `--random-init` builds seeded random weights with the real tokenizer, offline.
"""

import contextlib
import logging
from pathlib import Path

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints, vlm_conch, vlm_musk
from evalsuite.models.attention_layout import sequence_first_attention
from evalsuite.models.vlm_adapters import hf_clip_to_open_clip, is_hf_clip
from evalsuite.models.vlm_keep import create_keep, load_keep_weights
from evalsuite.models.vlm_registry import BEFORE_PROJECTION, CONCH_MODULES, OPEN_CLIP, TIMM_BERT, TORCHSCALE, VLMSpec

# The file a user downloads for each library's entries (named in the error for a missing --weights).
_EXAMPLE_FILE = {OPEN_CLIP: "open_clip_pytorch_model.bin", TIMM_BERT: "model.safetensors",
                 TORCHSCALE: "model.safetensors", CONCH_MODULES: "pytorch_model.bin"}
TEXT_BATCH_PROMPTS = 256  # prompts per text forward: a card's prompt set is tens to hundreds of prompts


class ImageToJoint:
    """Maps cached image rows (float32 [batch, width], upcast by the probe) into the joint image-text space: `@ the
    model's image projection` where the cache holds the features before it, else the rows unchanged."""

    def __init__(self, projection: torch.Tensor | None = None):
        # A float32 copy on the CPU: the probes run after extraction, on whichever device they were given.
        self.projection = None if projection is None else projection.detach().float().cpu().clone()

    @property
    def is_identity(self) -> bool:
        return self.projection is None

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        if self.projection is None:
            return rows
        return rows @ self.projection.to(rows.device)  # a 512 or 1024 square matrix: negligible next to a batch


class ImageTower(torch.nn.Module):
    """The model's image encoder as a backbone module: forward gives the features the image probes read and the cache
    holds ([batch, num_features]): `encode_image`, or the features before the image projection where the entry's
    `probe_features` says so (`joint_embedding` gives `encode_image` then)."""

    has_text_tower = True  # its parameters include the text tower's: the cost counts only the image forward's

    def __init__(self, clip: torch.nn.Module, spec: VLMSpec):
        super().__init__()
        self.clip = clip
        self.before_projection = spec.probe_features == BEFORE_PROJECTION
        self.num_features = self.clip.image_projection().shape[0] if self.before_projection else spec.embed_dim

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.before_projection:
            return self.clip.encode_image_before_projection(images)
        return self.clip.encode_image(images)

    def joint_embedding(self, images: torch.Tensor) -> torch.Tensor:
        """The model's `encode_image`: `image_to_joint()` of what forward gives."""
        return self.clip.encode_image(images)

    def image_to_joint(self) -> ImageToJoint:
        """What maps this tower's output (the cached rows) into the joint space of the text embeddings."""
        return ImageToJoint(self.clip.image_projection() if self.before_projection else None)

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        raise EvalsuiteError("vision-language models give one image embedding, no patch tokens; use them on "
                             "classification cards (not segmentation or dense features)")


class TextTower:
    """The model's text encoder, its tokenizer and its logit scale, for the zero-shot probe."""

    def __init__(self, clip: torch.nn.Module, tokenizer, spec: VLMSpec, image_to_joint: ImageToJoint | None = None):
        self.clip = clip
        self.tokenizer = tokenizer
        # The cached image rows -> this tower's space; the probes comparing images with texts apply it per batch.
        self.image_to_joint = image_to_joint or ImageToJoint()
        # A tokenizer read from a file the user supplies (CONCH's) names that file's hash in its `cache_id`.
        self.tokenizer_id = getattr(tokenizer, "cache_id", spec.tokenizer)
        self.context_length_tokens = spec.context_length_tokens
        # The stored parameter is the log of the scale (CLIP learns it in log space).
        self.logit_scale = float(clip.logit_scale.detach().exp())

    @torch.no_grad()
    def encode(self, texts: list[str], device: torch.device) -> np.ndarray:
        """Unnormalised text embeddings [prompts, embed_dim] as float32, in float32 (a few hundred prompts)."""
        self.clip.to(device)
        out = []
        for start in range(0, len(texts), TEXT_BATCH_PROMPTS):
            tokens = _to_device(self.tokenizer(texts[start:start + TEXT_BATCH_PROMPTS]), device)
            out.append(self.clip.encode_text(tokens).float().cpu().numpy())
        return np.concatenate(out)


def _to_device(tokens, device: torch.device):
    """A tokenizer's output on `device`: a tensor of token ids, or a dict of tensors (ids and a padding mask)."""
    if isinstance(tokens, dict):
        return {name: value.to(device) for name, value in tokens.items()}
    return tokens.to(device)


def build_vlm(spec: VLMSpec, weights: str | None, random_init: bool, seed: int) -> dict:
    """Backbone fields (model, embed_dim, data_config, weights_id, text) for `spec`."""
    if not (weights or random_init):
        raise EvalsuiteError(f"model '{spec.name}' needs --weights FILE (a checkpoint for {spec.library}: "
                             f"{spec.checkpoint_layout}; e.g. {_EXAMPLE_FILE.get(spec.library, 'the checkpoint')} of "
                             f"{spec.pretrained_cfg.hub_repo}) or --random-init; docs/zeroshot.md says how to get it")
    create, load = _builders(spec.library)
    clip, tokenizer = create(spec, seed)
    sequence_first_attention(clip)  # the same numbers without CPU autocast's slow path (models/attention_layout.py)
    weights_id = load(clip, weights) if weights else f"random-init:seed{seed}"
    clip.eval().requires_grad_(False)
    cfg = spec.pretrained_cfg
    data_config = {"input_size": (3, cfg.input_size_px, cfg.input_size_px), "interpolation": cfg.interpolation,
                   "mean": cfg.mean, "std": cfg.std}
    image_tower = ImageTower(clip, spec).eval()
    return {"model": image_tower, "embed_dim": image_tower.num_features, "data_config": data_config,
            "weights_id": weights_id, "text": TextTower(clip, tokenizer, spec, image_tower.image_to_joint()),
            # Part of the feature cache key where the cache does not hold the joint embedding: an older cache of
            # `encode_image` is never served as the features before the projection.
            "probe_features": spec.probe_features if image_tower.before_projection else None}


def _builders(library: str):
    """(create(spec, seed) -> (model, tokenizer), load(model, weights) -> weights id) for `library`. A model is an
    nn.Module with `encode_image(images)`, `encode_text(tokens)` and a `logit_scale` parameter (log of the scale);
    a tokenizer maps a list of prompts to what its `encode_text` takes. An entry whose `probe_features` is
    BEFORE_PROJECTION also has `encode_image_before_projection(images)` and `image_projection()`, the matrix that
    maps the first onto `encode_image`."""
    return {OPEN_CLIP: (create_open_clip, load_open_clip_weights),
            CONCH_MODULES: (vlm_conch.create, vlm_conch.load),
            TIMM_BERT: (create_keep, load_keep_weights),
            TORCHSCALE: (vlm_musk.create, vlm_musk.load)}[library]


def create_open_clip(spec: VLMSpec, seed: int):
    """(model with seeded random weights, tokenizer), built by open_clip without any download."""
    open_clip = import_open_clip()
    # open_clip logs a warning for a model built without pretrained weights: that is what we ask for here.
    with _quiet_root_logger():
        clip = checkpoints.seeded(lambda: open_clip.create_model(spec.architecture, pretrained=None,
                                                                 load_weights=False, force_quick_gelu=spec.quick_gelu),
                                  seed)
    return clip, open_clip.get_tokenizer(spec.architecture)


def load_open_clip_weights(clip: torch.nn.Module, weights: str | Path) -> str:
    """Fill `clip` from a local open_clip-layout checkpoint (or a transformers CLIPModel one, renamed), key for key;
    returns the weights id (content hash of the file)."""
    def in_open_clip_names(state: dict) -> dict:
        return hf_clip_to_open_clip(state) if is_hf_clip(state) else state

    weights_id, _ = checkpoints.load_key_for_key(clip, weights, in_open_clip_names)
    return weights_id


def import_open_clip():
    try:
        import open_clip
    except ImportError:
        raise EvalsuiteError("vision-language models need open_clip: pip install 'evalsuite[vlm]' "
                             "(open-clip-torch)") from None
    return open_clip


@contextlib.contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
