"""Segmenter-style mask transformer head (Strudel et al. 2021, "Segmenter"), written for evalsuite.

Patch tokens [B, h, w, D] are projected to `d_model`; one learned embedding per class is
appended to the h*w patch tokens; `n_layers` pre-norm transformer blocks (multi-head
self-attention + MLP) run over the joint sequence; after a final LayerNorm the patch and the
class outputs each pass through their own linear projection, are L2-normalised, and the mask
of class c at a patch is their dot product (a cosine similarity), followed by a LayerNorm over
the classes. The masks [B, C, h, w] are the logits (upsampled to the label resolution by the
trainer in `evalsuite.probes.tokens.seg_train`). No positional embedding is added: the backbone's
tokens already carry their position.
"""

import torch
import torch.nn.functional as F

from evalsuite.probes.base import DROPOUT, NON_NEGATIVE, Bound
from evalsuite.probes.tokens.seg_train import SegmentationProbe


class Block(torch.nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.attn = torch.nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(d_model)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, d_ff), torch.nn.GELU(), torch.nn.Dropout(dropout),
                                       torch.nn.Linear(d_ff, d_model), torch.nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class MaskTransformerHead(torch.nn.Module):
    def __init__(self, dim: int, num_classes: int, d_model: int = 256, n_layers: int = 2, n_heads: int = 8,
                 d_ff: int = 1024, dropout: float = 0.0):
        super().__init__()
        self.num_classes = num_classes
        self.proj_in = torch.nn.Linear(dim, d_model)
        self.class_embed = torch.nn.Parameter(torch.randn(1, num_classes, d_model) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = torch.nn.LayerNorm(d_model)
        scale = d_model ** -0.5
        self.proj_patch = torch.nn.Parameter(scale * torch.randn(d_model, d_model))
        self.proj_classes = torch.nn.Parameter(scale * torch.randn(d_model, d_model))
        self.mask_norm = torch.nn.LayerNorm(num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """[B, h, w, D] -> mask logits [B, C, h, w]."""
        batch, grid_h, grid_w, _ = tokens.shape
        x = self.proj_in(tokens.reshape(batch, grid_h * grid_w, -1))
        x = torch.cat([x, self.class_embed.expand(batch, -1, -1)], dim=1)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        patches = F.normalize(x[:, : grid_h * grid_w] @ self.proj_patch, dim=-1)
        classes = F.normalize(x[:, grid_h * grid_w :] @ self.proj_classes, dim=-1)
        masks = self.mask_norm(patches @ classes.transpose(1, 2))  # [B, h*w, C]
        return masks.transpose(1, 2).reshape(batch, self.num_classes, grid_h, grid_w)


class SegMaskTransformerProbe(SegmentationProbe):
    # torch's multi-head attention splits d_model into n_heads equal parts; n_layers 0: class tokens, no blocks.
    PARAM_RULES = {"d_model": Bound(1, multiple_of="n_heads"), "dropout": DROPOUT, "n_layers": NON_NEGATIVE}

    def __init__(self, num_classes: int, d_model: int = 256, n_layers: int = 2, n_heads: int = 8, d_ff: int = 1024,
                 dropout: float = 0.0, **params):
        super().__init__(num_classes, **params)
        self.architecture = {"d_model": int(d_model), "n_layers": int(n_layers), "n_heads": int(n_heads),
                             "d_ff": int(d_ff), "dropout": float(dropout)}

    def build_head(self, dim: int) -> torch.nn.Module:
        return MaskTransformerHead(dim, self.num_classes, **self.architecture)
