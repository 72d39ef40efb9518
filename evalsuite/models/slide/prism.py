"""PRISM (Shaikovski et al., "PRISM: a multi-modal generative foundation model for slide-level histopathology", 2024)
as a slide encoder: its Perceiver resampler over a slide's Virchow tile embeddings, under the key names of the
published checkpoint. The slide embedding is what `Prism.slide_representations(tile_embeddings)["image_embedding"]`
returns: the first of 513 latent queries after the Perceiver, through `cls_norm` ([1280]).

No code of PRISM is used or copied. PRISM's model code lives only in its hub repository (paige-ai/Prism, loaded with
`trust_remote_code`); it was read in the verbatim copy that clemsgrs/unicorn_baseline vendors at commit 34bdb6e
(src/unicorn_baseline/vision_language/prism/: perceiver.py `CrossAttention`, `MHSA`, `FeedForward`, `Perceiver`,
`PerceiverResampler`; modeling_prism.py `Prism.slide_representations`; configuring_prism.py; the hub's config.json).
The same perceiver.py ships in PyPI's prism-embedder 1.1.1, whose package does not import with transformers 5
(its BioGPT module reads `transformers.modeling_attn_mask_utils`) and pins numpy<2 and xformers: there is no
re-computation test against it. Checked once against the copy's perceiver.py, outside the test suite: at the published
size with random weights, 300 tiles, the embeddings differ by at most 1.4e-6 (PRISM adds its mask of ones).

The network (config.json's perceiver_config): 513 learned latents [513, 1280] (512 image latents and the slide
embedding's query) pass 8 Perceiver layers, each a cross-attention from the latents to the tiles (1 head of width
1280, LayerNorm on the latents only, bias-free q/kv/out projections) and a GEGLU feed-forward, then 6 self-attention
blocks (8 heads, bias-free nn.MultiheadAttention) with their feed-forwards, all pre-norm and residual. Weights are
shared across layers: layers 0 and 1 have their own cross-attention and layers 2-7 reuse layer 1's (and its keys and
values of the tiles); layer 0 has the self-attention stack and layers 1-7 reuse it. The tiles are a set: no
positions (coords are not read) and, for one slide, no mask (PRISM's default mask of ones is added to every score
alike, which changes nothing).

`published_keys` keeps `image_resampler.*` without that prefix, drops the image latents' norm (`img_norm`, which only
the report decoder reads), the BioGPT text decoder (`text_decoder.*`), the contrastive heads (`img_to_latents`,
`text_to_latents`) and `temperature`; zero-shot reads those from the same file (models/slide/prism_text.py). A shared module's tensors may be stored under one layer's name (safetensors
files hold no aliases) or under every layer's name (`torch.save`): whichever the file holds is read as the owning
layer's (0 or 1), and copies under several names must be the same tensor.
"""

import re

import torch
import torch.nn.functional as F
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models.slide.abmil_nets import check_tiles
from evalsuite.models.slide.spec import SlideEncoderSpec

RESAMPLER_PREFIX = "image_resampler."
# PRISM's sharing: layers after these indices reuse that layer's cross-attention (1) and self-attention stack (0).
SHARE_XATTN_START_LAYER = 1
SHARE_TF_START_LAYER = 0
_LAYER_PART = re.compile(r"perceiver\.layers\.(\d+)\.(xattn|tf)\.(.+)")

SPECS = (
    SlideEncoderSpec(
        name="prism",
        module="prism",
        tile_encoder="virchow",
        tile_dim=2560,
        tiling={"target_mpp": 0.5, "tile_size_px": 224},
        embed_dim=1280,
        # config.json's perceiver_config
        config={"latent_seq": 512, "latent_dim": 1280, "context_dim": 2560, "mhsa_heads": 8, "perceiver_depth": 8,
                "transformer_depth": 6, "xattn_heads": 1, "mlp_mult": 1},
        hub_id="hf-hub:paige-ai/Prism",
        licence="CC-BY-NC-ND-4.0",
        gated=True,
        checkpoint_layout="PRISM's model.safetensors (hub paige-ai/Prism): image_resampler.* (perceiver.latents, "
                          "perceiver.layers.N.xattn / .tf, cls_norm; img_norm dropped), text_decoder.*, "
                          "img_to_latents.*, text_to_latents.*, temperature (dropped)",
        uses_coords=False,
        text_tower=True,
        extra={"text_module": "prism_text",  # zero-shot: models/slide/prism_text.py
               "text": {"tokenizer": "BioGPT (microsoft/biogpt at eb0d815: vocab.json, merges.txt; sacremoses)",
                        "context_length_tokens": 1024}},
        sources=(
            "https://huggingface.co/paige-ai/Prism (perceiver.py, modeling_prism.py, configuring_prism.py, "
            "config.json), read in the copy at https://github.com/clemsgrs/unicorn_baseline/tree/"
            "34bdb6e8887d29bbb1598f16c17e6e1ad91095bc/src/unicorn_baseline/vision_language/prism",
            "https://github.com/clemsgrs/unicorn_baseline/blob/34bdb6e8887d29bbb1598f16c17e6e1ad91095bc/"
            "download_weights.sh",
            "https://pypi.org/project/prism-embedder/1.1.1/ (prism_embedder/models/prism/perceiver.py)",
            "https://huggingface.co/paige-ai/Prism/discussions (licence tag, access request)",
            "https://github.com/mahmoodlab/TRIDENT/blob/f697080b79c2bf2fcff7aea86258a8a9f6af88f5/"
            "trident/slide_encoder_models/load.py",
            "https://grand-challenge.org/algorithms/prism-embedder (224 px tiles at 0.50 um/px)",
        ),
        unconfirmed="the hub's own files and model card were read in vendored copies and third-party pages, not on "
                    "the hub; the tiling: 224 px at 0.5 um/px is Virchow's and the PRISM Embedder's (TRIDENT tiles "
                    "256 px at 20x for PRISM, resized to 224), the paper's wording was not read; which names of the "
                    "shared layers the published safetensors keeps (both layouts are accepted); the text decoder's "
                    "key names",
    ),
)


class CrossAttention(nn.Module):
    """Latents attend to the tiles: no norm on the tiles (PRISM: norming large contexts explodes memory)."""

    def __init__(self, latent_dim: int, context_dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.x_norm = nn.LayerNorm(latent_dim)
        self.to_q = nn.Linear(latent_dim, latent_dim, bias=False)  # head width latent_dim // heads: inner = latent
        self.to_kv = nn.Linear(context_dim, 2 * latent_dim, bias=False)
        self.to_out = nn.Linear(latent_dim, latent_dim, bias=False)

    def keys_values(self, tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """([heads, tiles, width], same): computed once per module and reused by the layers that share it."""
        keys, values = self.to_kv(tiles).reshape(len(tiles), 2, self.heads, -1).permute(1, 2, 0, 3)
        return keys, values

    def forward(self, latents: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        queries = self.to_q(self.x_norm(latents)).reshape(len(latents), self.heads, -1).transpose(0, 1)
        attended = F.scaled_dot_product_attention(queries, keys, values)
        return self.to_out(attended.transpose(0, 1).reshape(len(latents), -1))


class GEGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gates = x.chunk(2, dim=-1)
        return x * F.gelu(gates)


class FeedForward(nn.Module):
    def __init__(self, dim: int, mult: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.net = nn.Sequential(nn.Linear(dim, 2 * dim * mult), GEGLU(), nn.Linear(dim * mult, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(x))


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mha = nn.MultiheadAttention(dim, heads, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        return self.mha(x, x, x, need_weights=False)[0]


class Perceiver(nn.Module):
    """`layers[i]` holds the modules layer i owns: a cross-attention for i <= 1, the self-attention stack for i = 0
    (PRISM's names; the layers that reuse them own nothing and are not stored)."""

    def __init__(self, config: dict):
        super().__init__()
        dim, mult = config["latent_dim"], config["mlp_mult"]
        self.depth = config["perceiver_depth"]
        self.latents = nn.Parameter(torch.randn(config["latent_seq"] + 1, dim))  # +1: the slide embedding's query
        owners = []
        for layer in range(min(self.depth, max(SHARE_XATTN_START_LAYER, SHARE_TF_START_LAYER) + 1)):
            owned = nn.ModuleDict()
            if layer <= SHARE_XATTN_START_LAYER:
                owned["xattn"] = nn.ModuleDict({
                    "xattn": CrossAttention(dim, config["context_dim"], config["xattn_heads"]),
                    "ff": FeedForward(dim, mult)})
            if layer <= SHARE_TF_START_LAYER:
                owned["tf"] = nn.ModuleList(
                    nn.ModuleDict({"mhsa": SelfAttention(dim, config["mhsa_heads"]), "ff": FeedForward(dim, mult)})
                    for _ in range(config["transformer_depth"]))
            owners.append(owned)
        self.layers = nn.ModuleList(owners)

    def forward(self, tiles: torch.Tensor) -> torch.Tensor:
        x = self.latents
        keys_values = {}
        for layer in range(self.depth):
            owner = min(layer, SHARE_XATTN_START_LAYER)
            cross = self.layers[owner]["xattn"]
            if owner not in keys_values:
                keys_values[owner] = cross["xattn"].keys_values(tiles)
            x = x + cross["xattn"](x, *keys_values[owner])
            x = x + cross["ff"](x)
            for block in self.layers[min(layer, SHARE_TF_START_LAYER)]["tf"]:
                x = x + block["mhsa"](x)
                x = x + block["ff"](x)
        return x


class PrismSlideEncoder(nn.Module):
    """PRISM's `image_resampler` as far as the slide embedding reads it."""

    def __init__(self, config: dict):
        super().__init__()
        self.tile_dim = config["context_dim"]
        self.perceiver = Perceiver(config)
        self.cls_norm = nn.LayerNorm(config["latent_dim"])

    def forward(self, features: torch.Tensor, coords_level0=None, patch_size_level0=None) -> torch.Tensor:
        check_tiles(features, self.tile_dim, "prism")
        return self.cls_norm(self.perceiver(features)[0])


def build(spec: SlideEncoderSpec) -> PrismSlideEncoder:
    return PrismSlideEncoder(spec.config).float().eval()


def published_keys(state: dict) -> dict:
    """PRISM's checkpoint in this module's names: `image_resampler.` removed; the rest of PRISM, `img_norm` and the
    shared layers' copies dropped (a copy that differs from its owner's tensor is a one-line error)."""
    kept, copies = {}, {}
    for key, tensor in state.items():
        if not key.startswith(RESAMPLER_PREFIX) or key.startswith(RESAMPLER_PREFIX + "img_norm."):
            continue
        name = key.removeprefix(RESAMPLER_PREFIX)
        owner = _owner_name(name)
        (copies if owner != name else kept)[name] = tensor
    for name, tensor in copies.items():
        owner = _owner_name(name)
        if owner not in kept:  # a file that kept a later layer's name for the shared tensor
            kept[owner] = tensor
        elif not torch.equal(kept[owner], tensor):
            raise EvalsuiteError(f"PRISM checkpoint: '{RESAMPLER_PREFIX}{name}' should be the same tensor as "
                                 f"'{RESAMPLER_PREFIX}{owner}' (PRISM shares that layer) but differs")
    return kept


def _owner_name(name: str) -> str:
    """The name under which the layer that owns a (possibly shared) module stores `name`."""
    match = _LAYER_PART.fullmatch(name)
    if not match:
        return name
    layer, part, rest = int(match[1]), match[2], match[3]
    owner = min(layer, SHARE_XATTN_START_LAYER if part == "xattn" else SHARE_TF_START_LAYER)
    return f"perceiver.layers.{owner}.{part}.{rest}"
