"""CONCH v1.5's vision tower: a timm ViT-L/16 trunk, CONCH's attentional pooler and a LayerNorm.

The tile embedding TRIDENT and THUNDER use for CONCH v1.5 is not a pooling of the trunk's tokens
that timm offers: one learnt 768-wide query attends (8 heads, no biases) over the LayerNorm-ed
trunk tokens, class token included, and the result goes through a LayerNorm. This module rebuilds
that head around a timm trunk with the parameter names and shapes of the published checkpoint
(`pytorch_model_vision.bin`: `trunk.*`, `attn_pool_contrast.*`, `ln_contrast.*`), so the file
loads key for key. Source: mahmoodlab/TRIDENT at a91fa84,
`trident/patch_encoder_models/model_zoo/conchv1_5/conchv1_5.py` (`AttentionalPooler`,
`CONCHVisionTower`: `AttentionalPooler(d_model=768, context_dim=1024, n_head=8, n_queries=1)`,
`nn.LayerNorm(768)`, forward `ln_contrast(attn_pool_contrast(trunk.forward_features(x))[:, 0])`).

The tower pools inside itself (registry pooling `timm_head`): `forward` is the 768-wide embedding,
`forward_features` the trunk's tokens (1024 wide) for dense features.
"""

import torch
from torch import nn

from evalsuite.models.image import adapters

CONCH_V1_5 = "conch_v1_5"  # registry `head` name
_QUERY_DIM = 768  # d_model of CONCH's contrastive pooler, the width of the embedding
_HEADS = 8
_QUERIES = 1


class AttentionalPooler(nn.Module):
    """Learnt queries attending over tokens (CoCa's pooler as CONCH ships it): LayerNorm on queries and
    tokens, bias-free projections, softmax(q k^T / sqrt(head_dim)) v per head, bias-free output projection."""

    def __init__(self, d_model: int, context_dim: int, n_head: int = _HEADS, n_queries: int = _QUERIES):
        super().__init__()
        self.query = nn.Parameter(torch.randn(n_queries, d_model))
        self.heads = n_head
        self.scale = (d_model // n_head) ** -0.5
        inner_dim = (d_model // n_head) * n_head
        self.ln_k = nn.LayerNorm(context_dim)
        self.ln_q = nn.LayerNorm(d_model)
        self.to_q = nn.Linear(d_model, inner_dim, bias=False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, d_model, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """[batch, queries, d_model] from [batch, tokens, context_dim]."""
        batch = tokens.shape[0]
        queries = self.to_q(self.ln_q(self.query)).expand(batch, -1, -1)
        keys, values = self.to_kv(self.ln_k(tokens)).chunk(2, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (queries, keys, values))
        attention = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.to_out((attention @ v).transpose(1, 2).flatten(2))


class ConchVisionTower(nn.Module):
    """timm ViT trunk + CONCH's contrastive pooler + LayerNorm; state-dict keys as in CONCH v1.5's file."""

    def __init__(self, trunk: nn.Module):
        super().__init__()
        self.trunk = trunk
        self.attn_pool_contrast = AttentionalPooler(_QUERY_DIM, trunk.embed_dim)
        self.ln_contrast = nn.LayerNorm(_QUERY_DIM)
        self.num_features = _QUERY_DIM

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.ln_contrast(self.attn_pool_contrast(self.trunk.forward_features(images))[:, 0])

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        return self.trunk.forward_features(images)

    # What Backbone.dense_features reads from a timm ViT, taken from the trunk. `embed_dim` is
    # deliberately absent: the embedding is the pooler's, so token pooling rules do not apply.
    @property
    def num_prefix_tokens(self) -> int:
        return self.trunk.num_prefix_tokens

    @property
    def blocks(self) -> nn.Module:
        return self.trunk.blocks

    @property
    def norm(self) -> nn.Module:
        return self.trunk.norm

    def fit_state_dict(self, state: dict) -> dict:
        """The published file with its position embedding as TRIDENT computes it for this trunk's input size."""
        return adapters.trident_conch_pos_embed(state, self.trunk, key="trunk.pos_embed")


HEADS = {CONCH_V1_5: ConchVisionTower}
