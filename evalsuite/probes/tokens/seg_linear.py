"""Linear segmentation probe: one linear classifier applied to every patch token (a 1x1 convolution).

Logits on the token grid are upsampled (bilinear) to the label resolution; training, the loss
and best-epoch selection are in `evalsuite.probes.tokens.seg_train`.
"""

import torch

from evalsuite.probes.tokens.seg_train import SegmentationProbe


class TokenLinearHead(torch.nn.Module):
    def __init__(self, dim: int, num_classes: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim, elementwise_affine=False)
        self.linear = torch.nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """[B, h, w, D] -> logits [B, C, h, w]."""
        return self.linear(self.norm(tokens)).permute(0, 3, 1, 2)


class SegLinearProbe(SegmentationProbe):
    def __init__(self, num_classes: int, normalize: bool = True, **params):
        super().__init__(num_classes, **params)
        self.normalize = bool(normalize)

    def build_head(self, dim: int) -> torch.nn.Module:
        head = TokenLinearHead(dim, self.num_classes)
        if not self.normalize:
            head.norm = torch.nn.Identity()
        return head
