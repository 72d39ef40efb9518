"""TITAN (Ding et al., "Multimodal whole slide foundation model for pathology", 2024; TITAN-preview weights) as a
slide encoder: its slide ViT over a 2-D grid of CONCH v1.5 tile features, ALiBi attention biases from the grid
distances, and the contrastive attentional pooler, under the key names of the published checkpoint.

No code of TITAN is used or copied. TITAN's model code lives only in its hub repository (MahmoodLab/TITAN, loaded with
`trust_remote_code`; not on PyPI, so there is no re-computation test against it); it was read in the verbatim copy
that clemsgrs/unicorn_baseline vendors at commit 34bdb6e (src/unicorn_baseline/vision/pathology/titan/:
vision_transformer.py `preprocess_features`, `VisionTransformer.forward_features`, `get_alibi`, `AttentionalPooler`;
modeling_titan.py `encode_slide_from_patch_features`; configuration_titan.py and the hub's config.json).

What `encode_slide_from_patch_features(features, coords, patch_size_lv0)` computes, and this module with it:
- the grid: coords (level-0 top-left x, y) minus their minimum, floor-divided by patch_size_lv0 (the level-0 distance
  of two adjacent tiles: 512 at 20x, 1024 at 40x, TITAN's README) give each tile a cell; tiles falling in one cell
  are summed; cells whose summed features are all zero are background and dropped. The tokens are the remaining
  cells in row-major order of (x cell, y cell), after a CLS token. No maximum tile count and no crop at inference
  (the 14x14 and 6x6 grids of config.json are TITAN's training crops only).
- `patch_embed` (Linear 768->768, GELU) per cell, 6 pre-norm ViT blocks (12 heads, qkv bias, LayerNorm eps 1e-6,
  no layer scale, no position embedding), each attention biased by -slope_h * (Euclidean distance of the two cells),
  zero for the CLS token's row and column; slopes are ALiBi's for 12 heads. Then `norm`.
- the slide embedding: `attn_pool_contrastive` (one learned query, 8 heads, LayerNorms on query and tokens) over all
  tokens, CLS included, without the `proj` into the text space (`no_proj=True`): [768].
Differences, none in the result: TITAN fills a dense [H, W, C] grid and one [heads, L, L] bias; this module sums into
the occupied cells only and biases one head at a time, so a slide of 10,000 tiles holds one 10,000^2 bias matrix, not
twelve (4.8 GB in float32). TITAN runs under fp16 autocast in its README; evalsuite computes in float32. A slide of
one grid cell, on which the copy of TITAN's code fails when run here (its `get_alibi` indexes a numpy grid with a 1x1
torch mask), gets an embedding. Checked once against that copy, outside the test suite (it is no package): at the
published size with random weights, 400 tiles, the embeddings differ by at most 3e-7.

`published_keys` keeps `vision_encoder.*` (renaming `blocks.modules_list.N` to `blocks.N`) and drops what the slide
embedding does not use: the text tower (`text_encoder.*`), the 128-query captioning pooler (`vision_encoder.attn_pool`)
and the projection into the text space (`vision_encoder.proj`); zero-shot reads the latter two from the same file
(models/slide/titan_text.py). The published file has no captioning decoder (README).
"""

import math

import torch
import torch.nn.functional as F
from timm.layers import Mlp
from torch import nn

from evalsuite.models.slide.abmil_nets import check_tiles
from evalsuite.models.slide.spec import SlideEncoderSpec

VISION_PREFIX = "vision_encoder."
DROPPED_PREFIXES = ("text_encoder.", "vision_encoder.attn_pool.")  # text tower; captioning pooler (128 queries)
DROPPED_KEYS = ("vision_encoder.proj",)  # the projection into the text space (`no_proj=True` for the embedding)
LAYER_NORM_EPS = 1e-6  # VisionTransformer's default norm_layer (the poolers keep nn.LayerNorm's 1e-5)

SPECS = (
    SlideEncoderSpec(
        name="titan",
        module="titan",
        tile_encoder="conch-v1.5",
        tile_dim=768,
        tiling={"target_mpp": 0.5, "tile_size_px": 512},
        embed_dim=768,
        # config.json's vision_config (TitanConfig forces attentional_pool="parallel")
        config={"mlp_patch_embed_dim": 768, "embed_dim": 768, "depth": 6, "num_heads": 12, "mlp_ratio": 4.0,
                "attn_pooler_heads": 8},
        hub_id="hf-hub:MahmoodLab/TITAN",
        licence="CC-BY-NC-ND-4.0",
        gated=True,
        checkpoint_layout="TITAN-preview's model.safetensors (hub MahmoodLab/TITAN): vision_encoder.* (cls_token, "
                          "patch_embed.0, blocks.modules_list.N, norm, attn_pool_contrastive; attn_pool and proj "
                          "dropped) and text_encoder.* (dropped); CONCH v1.5's weights are a separate file",
        uses_coords=True,
        text_tower=True,
        extra={"text_module": "titan_text",  # zero-shot: models/slide/titan_text.py
               "text": {"tokenizer": "CONCH byte-level BPE, uncased (conch_byte_level_bpe_uncased.json)",
                        "context_length_tokens": 128}},
        sources=(
            "https://github.com/mahmoodlab/TITAN/blob/33042f5eea6691e8a40ed219474607fc876a19a2/README.md",
            "https://huggingface.co/MahmoodLab/TITAN (vision_transformer.py, modeling_titan.py, configuration_titan.py"
            ", config.json), read in the copy at https://github.com/clemsgrs/unicorn_baseline/tree/"
            "34bdb6e8887d29bbb1598f16c17e6e1ad91095bc/src/unicorn_baseline/vision/pathology/titan",
            "https://github.com/mahmoodlab/TRIDENT/blob/f697080b79c2bf2fcff7aea86258a8a9f6af88f5/"
            "trident/slide_encoder_models/load.py",
            "https://github.com/mahmoodlab/TRIDENT/blob/f697080b79c2bf2fcff7aea86258a8a9f6af88f5/README.md",
            "https://huggingface.co/MahmoodLab/TITAN (modeling_titan.py: encode_text, zero_shot_classifier, zero_shot),"
            " read in the copy at https://github.com/ThucHuynh44/Concept-Distilled-MIL (models/titan/modeling_titan.py)",
        ),
        unconfirmed="the hub's own files were read in a vendored copy (unicorn_baseline), not on the hub; the "
                    "published file's name (model.safetensors or pytorch_model.bin) and that its keys are exactly "
                    "`vision_encoder.*`/`text_encoder.*` (as TITAN's module names them) were not seen; the text "
                    "tower's key names and class-token mask (taken as CONCH's: TITAN's text_config is CONCH's "
                    "text_cfg with a 768-wide projection; its text_transformer.py was not read) and its tokenizer "
                    "(taken as CONCH's file); the gated card's wording",
    ),
)


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slope per head (Press et al.): 2^(-8k/n) for k = 1..n when n is a power of two; otherwise those of the
    power of two below, then every other slope of the power of two above (TITAN's `get_slopes`)."""
    def series(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    below = 2 ** math.floor(math.log2(heads))
    return series(below) + series(2 * below)[0::2][:heads - below]


def grid_tokens(features: torch.Tensor, coords_level0: torch.Tensor, patch_size_level0: int):
    """(tokens [L, C], cells [L, 2]): the features summed per grid cell, all-zero cells dropped, in TITAN's
    row-major order of (x cell, y cell)."""
    offset = coords_level0.min(dim=0).values
    cells = torch.div(coords_level0 - offset, patch_size_level0, rounding_mode="floor").long()
    height_cells = int(cells[:, 1].max()) + 1  # TITAN's `_W`: the flat index is x_cell * _W + y_cell
    flat = cells[:, 0] * height_cells + cells[:, 1]
    occupied, tile_to_cell = torch.unique(flat, sorted=True, return_inverse=True)
    summed = torch.zeros(len(occupied), features.shape[1], dtype=features.dtype, device=features.device)
    summed.index_add_(0, tile_to_cell, features)
    foreground = (summed != 0).any(dim=1)  # TITAN's background mask: a cell whose features are all zero
    occupied = occupied[foreground]
    cells = torch.stack([occupied // height_cells, occupied % height_cells], dim=1)
    return summed[foreground], cells


def token_distances(cells: torch.Tensor) -> torch.Tensor:
    """[L + 1, L + 1] Euclidean distance of the tokens' cells, 0 in the CLS token's row and column (no bias there)."""
    points = cells.to(torch.float32)
    # the direct difference, not cdist's matrix-product shortcut, whose rounding is not TITAN's
    distances = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return F.pad(distances, (1, 0, 1, 0))


class BiasedAttention(nn.Module):
    """TITAN's `Attention` under ALiBi: softmax(q k^T / sqrt(d) - slope_h * distance) v, one head at a time."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(heads)), persistent=False)

    def forward(self, x: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
        tokens, width = x.shape
        q, k, v = self.qkv(x).reshape(tokens, 3, self.heads, width // self.heads).permute(1, 2, 0, 3)
        heads_out = [F.scaled_dot_product_attention(q[h], k[h], v[h], attn_mask=distances * -self.slopes[h])
                     for h in range(self.heads)]
        return self.proj(torch.stack(heads_out, dim=1).reshape(tokens, width))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.attn = BiasedAttention(width, heads)
        self.norm2 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.mlp = Mlp(width, int(width * mlp_ratio))  # timm's fc1, GELU, fc2, as TITAN's blocks

    def forward(self, x: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), distances)
        return x + self.mlp(self.norm2(x))


class AttentionalPooler(nn.Module):
    """TITAN's (open_clip's) pooler with one learned query: attention of the normed query over the normed tokens."""

    def __init__(self, width: int, heads: int, queries: int = 1):
        super().__init__()
        self.query = nn.Parameter(torch.randn(queries, width))
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_q = nn.LayerNorm(width)
        self.ln_k = nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        keys = self.ln_k(tokens)
        pooled, _ = self.attn(self.ln_q(self.query), keys, keys, need_weights=False)
        return pooled


class TitanSlideEncoder(nn.Module):
    """The `vision_encoder` of TITAN as far as the slide embedding reads it (names as in its checkpoint)."""

    def __init__(self, config: dict):
        super().__init__()
        width, self.tile_dim = config["embed_dim"], config["mlp_patch_embed_dim"]
        self.patch_embed = nn.Sequential(nn.Linear(self.tile_dim, width), nn.GELU())
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.blocks = nn.ModuleList(Block(width, config["num_heads"], config["mlp_ratio"])
                                    for _ in range(config["depth"]))
        self.norm = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.attn_pool_contrastive = AttentionalPooler(width, config["attn_pooler_heads"])

    def forward(self, features: torch.Tensor, coords_level0: torch.Tensor, patch_size_level0: int) -> torch.Tensor:
        check_tiles(features, self.tile_dim, "titan")
        if coords_level0.shape != (len(features), 2):
            raise ValueError(f"titan reads [tiles, 2] level-0 coordinates; got {tuple(coords_level0.shape)}")
        tokens, cells = grid_tokens(features, coords_level0, patch_size_level0)
        x = torch.cat([self.cls_token[0], self.patch_embed(tokens)])
        distances = token_distances(cells)
        for block in self.blocks:
            x = block(x, distances)
        return self.attn_pool_contrastive(self.norm(x))[0]


def build(spec: SlideEncoderSpec) -> TitanSlideEncoder:
    return TitanSlideEncoder(spec.config).float().eval()


def published_keys(state: dict) -> dict:
    """TITAN's checkpoint in this module's names: `vision_encoder.` removed, `blocks.modules_list.N` as `blocks.N`;
    the text tower, the captioning pooler and the text-space projection dropped."""
    kept = {}
    for key, tensor in state.items():
        if key.startswith(DROPPED_PREFIXES) or key in DROPPED_KEYS:
            continue
        kept[key.removeprefix(VISION_PREFIX).replace("blocks.modules_list.", "blocks.", 1)] = tensor
    return kept


def forward_bytes(spec, tiles: int) -> int:
    """models/slide/memory.py's per-tile rows plus attention over every token under a [tokens, tokens] distance bias:
    about five float32 [tokens, tokens] matrices alive at once (distances, padded copy, one head's bias, scores,
    softmax), fitted to the peaks benchmarks/slide_encoders.py measured at 1,000-10,000 tiles (docs/compute.md)."""
    width, tokens = int(spec.config["embed_dim"]), tiles + 1
    return 4 * (tiles * (spec.tile_dim + 12 * width) + 5 * tokens * tokens)
