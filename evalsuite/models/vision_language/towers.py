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
import math
from pathlib import Path

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.vision_language import conch as vlm_conch
from evalsuite.models.vision_language import musk as vlm_musk
from evalsuite.models.vision_language import quilt_pmb as vlm_quilt_pmb
from evalsuite.models.vision_language.adapters import check_clip_checkpoint, hf_clip_to_open_clip, is_hf_clip
from evalsuite.models.vision_language.attention_layout import sequence_first_attention
from evalsuite.models.vision_language.entries import (
    BEFORE_PROJECTION,
    CONCH_MODULES,
    OPEN_CLIP,
    TIMM_BERT,
    TORCHSCALE,
    VLMSpec,
)
from evalsuite.models.vision_language.extras import install_extra
from evalsuite.models.vision_language.keep import create_keep, load_keep_weights

# The file a user downloads for each library's entries (named in the error for a missing --weights).
_EXAMPLE_FILE = {OPEN_CLIP: "open_clip_pytorch_model.bin", TIMM_BERT: "model.safetensors",
                 TORCHSCALE: "model.safetensors", CONCH_MODULES: "pytorch_model.bin"}
TEXT_BATCH_PROMPTS = 256  # prompts per text forward: a card's prompt set is tens to hundreds of prompts
# A clamped log scale (ln 100) saved in bfloat16 may round up by up to 2^-6: exp of it is within this factor.
_HALF_PRECISION_SLACK = math.exp(2 ** -5)


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

    def __init__(self, clip: torch.nn.Module, tokenizer, spec: VLMSpec, image_to_joint: ImageToJoint | None = None,
                 checkpoint: str | None = None):
        self.clip = clip
        self.tokenizer = tokenizer
        self.model_name = spec.name
        # Where the weights came from, named when they turn out broken ("checkpoint FILE", or the random init).
        self.checkpoint = checkpoint or f"the weights of model '{spec.name}'"
        # The cached image rows -> this tower's space; the probes comparing images with texts apply it per batch.
        self.image_to_joint = image_to_joint or ImageToJoint()
        # A tokenizer read from a file the user supplies (CONCH's) names that file's hash in its `cache_id`.
        self.tokenizer_id = getattr(tokenizer, "cache_id", spec.tokenizer)
        self.context_length_tokens = spec.context_length_tokens
        # The most ids a prompt may have (start and end included) before the tokenizer cuts it: the context, less
        # what the tower appends itself (CONCH's class embedding).
        self.max_prompt_tokens = getattr(tokenizer, "max_prompt_tokens", spec.context_length_tokens)
        # The stored parameter is the log of the scale (CLIP learns it in log space).
        self.logit_scale = float(clip.logit_scale.detach().exp())

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids as the model's tokenizer lays them out, start and end included, neither padded nor
        cut: what the prompt checks (probes/texts/prompt_checks.py) count against `max_prompt_tokens` and compare."""
        own = getattr(self.tokenizer, "prompt_token_ids", None)
        if own is not None:
            return own(list(texts))
        # open_clip's SimpleTokenizer (CLIP's BPE): its __call__ lays out [start] + encode(text) + [end] and cuts it
        # to `context_length`, the end token kept (no reduction_fn is set for the CLIP entries).
        return [[self.tokenizer.sot_token_id, *self.tokenizer.encode(text), self.tokenizer.eot_token_id]
                for text in texts]

    @torch.no_grad()
    def encode(self, texts: list[str], device: torch.device) -> np.ndarray:
        """Unnormalised text embeddings [prompts, embed_dim] as float32, in float32 (a few hundred prompts)."""
        self.clip.to(device)
        out = []
        for start in range(0, len(texts), TEXT_BATCH_PROMPTS):
            batch = texts[start:start + TEXT_BATCH_PROMPTS]
            rows = self.clip.encode_text(_to_device(self.tokenizer(batch), device)).float().cpu().numpy()
            self.check_finite(rows, batch)
            out.append(rows)
        return np.concatenate(out)

    def check_finite(self, rows: np.ndarray, texts: list[str]) -> None:
        """A text tower that gives NaN or inf has broken weights: refused naming the checkpoint, before anything is
        cached (a NaN text cache would be reported later as a corrupt cache, the checkpoint's fault hidden)."""
        bad = ~np.isfinite(rows).all(axis=1)
        if bad.any():
            text = texts[int(np.argmax(bad))]
            raise EvalsuiteError(f"{self.checkpoint}: its text tower gives non-finite (NaN/inf) embeddings (first "
                                 f"for prompt '{_clipped(text)}'): the weights are broken or not {self.model_name}'s; "
                                 "re-download the checkpoint (nothing was cached)")


def _clipped(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[:most] + "..."


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
    create, load = _builders(spec)
    clip, tokenizer = create(spec, seed)
    sequence_first_attention(clip)  # the same numbers without CPU autocast's slow path (models/vision_language/attention_layout.py)
    weights_id = load(clip, weights) if weights else f"random-init:seed{seed}"
    checkpoint = f"checkpoint {weights}" if weights else f"random weights (--random-init, seed {seed})"
    check_logit_scale(clip, spec, checkpoint)
    clip.eval().requires_grad_(False)
    cfg = spec.pretrained_cfg
    data_config = {"input_size": (3, cfg.input_size_px, cfg.input_size_px), "interpolation": cfg.interpolation,
                   "mean": cfg.mean, "std": cfg.std}
    image_tower = ImageTower(clip, spec).eval()
    return {"model": image_tower, "embed_dim": image_tower.num_features, "data_config": data_config,
            "weights_id": weights_id,
            "text": TextTower(clip, tokenizer, spec, image_tower.image_to_joint(), checkpoint),
            # Part of the feature cache key where the cache does not hold the joint embedding: an older cache of
            # `encode_image` is never served as the features before the projection.
            "probe_features": spec.probe_features if image_tower.before_projection else None}


def check_logit_scale(clip: torch.nn.Module, spec: VLMSpec, checkpoint: str) -> None:
    """The checkpoint's logit scale, checked at load: a NaN or an exp that overflows makes every zero-shot probability
    NaN (scored as chance, rows written), so it is refused as the checkpoint's fault; above `spec.max_logit_scale`
    (100, where training clamps it) or below 1 it is no trained value of this model either."""
    stored = float(clip.logit_scale.detach().float())
    scale = float(clip.logit_scale.detach().float().exp())  # as the probes compute it, in float32
    fix = f"the file is broken or not {spec.name}'s: re-download it (docs/zeroshot.md)"
    if not math.isfinite(stored) or not math.isfinite(scale) or scale == 0.0:
        raise EvalsuiteError(f"{checkpoint}: logit_scale is {stored:g}, so exp(logit_scale) = {scale:g} is no usable "
                             f"temperature (zero-shot probabilities would be NaN or all equal); {fix}")
    if spec.max_logit_scale and not 1 / _HALF_PRECISION_SLACK <= scale <= spec.max_logit_scale * _HALF_PRECISION_SLACK:
        raise EvalsuiteError(f"{checkpoint}: exp(logit_scale) = {scale:.4g} (logit_scale {stored:g}) is outside "
                             f"[1, {spec.max_logit_scale:g}], where CLIP-style training clamps it; {fix}")


def _builders(spec: VLMSpec):
    """(create(spec, seed) -> (model, tokenizer), load(model, weights) -> weights id) for `spec`. A model is an
    nn.Module with `encode_image(images)`, `encode_text(tokens)` and a `logit_scale` parameter (log of the scale);
    a tokenizer maps a list of prompts to what its `encode_text` takes. An entry whose `probe_features` is
    BEFORE_PROJECTION also has `encode_image_before_projection(images)` and `image_projection()`, the matrix that
    maps the first onto `encode_image`."""
    def load_clip(clip, weights):
        return load_open_clip_weights(clip, weights, spec)

    return {OPEN_CLIP: (create_open_clip, load_clip),
            CONCH_MODULES: (vlm_conch.create, vlm_conch.load),
            TIMM_BERT: (create_keep, load_keep_weights),
            TORCHSCALE: (vlm_musk.create, vlm_musk.load),
            vlm_quilt_pmb.LIBRARY: (vlm_quilt_pmb.create, vlm_quilt_pmb.load)}[spec.library]


def create_open_clip(spec: VLMSpec, seed: int):
    """(model with seeded random weights, tokenizer), built by open_clip without any download."""
    open_clip = import_open_clip()
    # open_clip logs a warning for a model built without pretrained weights: that is what we ask for here.
    with _quiet_root_logger():
        clip = checkpoints.seeded(lambda: open_clip.create_model(spec.architecture, pretrained=None,
                                                                 load_weights=False, force_quick_gelu=spec.quick_gelu),
                                  seed)
    return clip, open_clip.get_tokenizer(spec.architecture)


def load_open_clip_weights(clip: torch.nn.Module, weights: str | Path, spec: VLMSpec | None = None) -> str:
    """Fill `clip` from a local open_clip-layout checkpoint (or a transformers CLIPModel one, renamed), key for key;
    returns the weights id (content hash of the file). With `spec`, a file in a layout the entry's published file
    does not have, or whose config beside it declares the other activation, is refused first (vlm_adapters.py)."""
    def in_open_clip_names(state: dict) -> dict:
        if spec is not None:
            check_clip_checkpoint(spec, state, checkpoints.weights_files(Path(weights))[0])
        return hf_clip_to_open_clip(state) if is_hf_clip(state) else state

    weights_id, _ = checkpoints.load_key_for_key(clip, weights, in_open_clip_names)
    return weights_id


def import_open_clip():
    try:
        import open_clip
    except ImportError:
        raise EvalsuiteError(f"vision-language models need open_clip (open-clip-torch): {install_extra()}") from None
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
