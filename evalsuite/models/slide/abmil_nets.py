"""Gated-attention MIL pieces shared by MahmoodLab's ABMIL slide encoders (FEATHER, MADELEINE).

Both codes score each tile with Ilse et al.'s gated attention (https://arxiv.org/abs/1802.04712),
`w^T (tanh(V h) * sigmoid(U h)) + b`, softmax the scores over the slide's tiles and sum the tiles with those weights.
They keep the three layers under the same names (MIL-Lab `src/models/layers.py` GlobalGatedAttention, MADELEINE
`madeleine/models/abmil.py` BatchedABMIL): `attention_a.0` (V), `attention_b.0` (U), `attention_c` (w, b). Their
dropout layers hold no tensors and are the identity in eval mode, so they are left out here; the published key
indices (`.0`) stay the same.
"""

import torch
from torch import nn


class GatedAttentionScores(nn.Module):
    """One unnormalised attention score per tile: [tiles, in_dim] -> [tiles]."""

    def __init__(self, in_dim: int, hidden_dim: int):
        super().__init__()
        self.attention_a = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.Tanh())
        self.attention_b = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.Sigmoid())
        self.attention_c = nn.Linear(hidden_dim, 1)  # one attention branch: both codes build n_classes=1

    def forward(self, tiles: torch.Tensor) -> torch.Tensor:
        return self.attention_c(self.attention_a(tiles) * self.attention_b(tiles)).squeeze(-1)


def attention_pool(tiles: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """[tiles, dim] weighted by softmax(scores) over the tiles -> [dim]: a set function of the tiles (no order)."""
    return torch.softmax(scores, dim=0) @ tiles


def check_tiles(features: torch.Tensor, tile_dim: int, model_name: str) -> None:
    """A slide's features as the contract gives them: [tiles >= 1, tile_dim]; anything else would pool silently
    into a wrong or empty embedding (softmax over no tiles sums to nothing)."""
    if features.dim() != 2 or features.shape[1] != tile_dim or features.shape[0] == 0:
        raise ValueError(f"{model_name} reads [tiles >= 1, {tile_dim}] tile features; got {tuple(features.shape)}")
