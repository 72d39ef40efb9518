"""A one-channel ViT run on each colour channel of a tile, its tokens concatenated channel after channel.

GenBio-PathFM's network sees grey images: its published forward (genbio-ai/genbio-pathfm at 1d65d00,
`genbio_pathfm/model.py` `GenBio_PathFM_Inference.forward` / `forward_with_patches`; the same code in
mahmoodlab/TRIDENT at a91fa84, `trident/patch_encoder_models/model_zoo/genbio_pathfm/genbio_pathfm.py`) folds the
three channels of a normalised RGB tile into the batch (`x.view(B * 3, 1, H, W)`), runs the one-channel ViT once, and
concatenates, in R, G, B order, the three class tokens (the tile embedding, 3 x 1536 = 4608) and the three
channels' patch tokens position by position ([B, 196, 4608]). THUNDER (MICS-Lab/thunder at e584c7e,
`src/thunder/models/pretrained_models.py`) takes exactly these two outputs for its linear probes and segmentation.

`ChannelwiseViT` does the same around a timm trunk and returns the concatenation for every token, so
`forward_features` is [B, prefix + patches, channels x width] in the layout of a timm ViT: the registry's token rules
(evalsuite.models.pooling) apply unchanged. `cls` is the card's embedding (the class tokens concatenated);
`patch_tokens` gives each grid cell the channels' patch tokens concatenated (`forward_with_patches`' patch output);
`mean_patch` is the concatenation of the channels' mean patch tokens. Intermediate layers (`layers` of a
segmentation card) are folded the same way, each through the trunk's final norm.

The published file is in DINOv3's own parameter names (`storage_tokens`, `ls1.gamma`, `mlp.w1`...); `fit_state_dict`
renames them to timm's Eva (timm's DINOv3) names under `trunk.`, as timm's own `eva.checkpoint_filter_fn` maps
DINOv3 files. The RoPE periods the file stores are dropped: timm computes them from the configuration.
"""

import torch
from torch import nn

from evalsuite.errors import EvalsuiteError

CHANNELWISE = "channelwise"  # registry `head` name (evalsuite.models.image.architecture)
RGB_CHANNELS = 3
TRUNK = "trunk."

# DINOv3 parameter names -> timm Eva names (substrings; timm 1.0 eva.py checkpoint_filter_fn renames the same).
_DINOV3_TO_EVA = (("storage_tokens", "reg_token"), (".ls1.gamma", ".gamma_1"), (".ls2.gamma", ".gamma_2"),
                  (".mlp.w1.", ".mlp.fc1_g."), (".mlp.w2.", ".mlp.fc1_x."), (".mlp.w3.", ".mlp.fc2."))
# Buffers DINOv3 saves that timm computes from the configuration (non-persistent in timm).
_COMPUTED_BUFFERS = ("rope_embed.periods",)


class ChannelwiseViT(nn.Module):
    """`trunk` (a timm ViT built with in_chans=1) applied to each of `channels` input channels; tokens concatenated
    along the width in channel order. State-dict keys: the trunk's, under `trunk.`."""

    def __init__(self, trunk: nn.Module, channels: int = RGB_CHANNELS):
        super().__init__()
        self.trunk = trunk
        self.channels = channels
        # What Backbone and the pooling rules read: the width of each concatenated token.
        self.embed_dim = self.num_features = channels * trunk.embed_dim

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """[batch, prefix + patches, channels x width] from [batch, channels, height, width]."""
        return self._fold(self.trunk.forward_features(self._unfold(images)))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """The channels' class tokens concatenated: the published forward's embedding."""
        return self.forward_features(images)[:, 0]

    def norm(self, tokens: torch.Tensor) -> torch.Tensor:
        """The trunk's final norm of one block's per-channel tokens, folded back per tile (Backbone's `layers`)."""
        return self._fold(self.trunk.norm(tokens))

    # What Backbone (dense features, layers) and feature extraction read from a timm ViT, taken from the trunk.
    @property
    def num_prefix_tokens(self) -> int:
        return self.trunk.num_prefix_tokens

    @property
    def blocks(self) -> nn.Module:
        return self.trunk.blocks

    @property
    def patch_embed(self) -> nn.Module:
        return self.trunk.patch_embed

    def fit_state_dict(self, state: dict) -> dict:
        """The trunk's checkpoint (timm names, or DINOv3's own) as this module's state dict."""
        if all(key.startswith(TRUNK) for key in state):
            return state  # already this module's layout (a state dict saved from it)
        return {TRUNK + _eva_name(key): value for key, value in state.items() if key not in _COMPUTED_BUFFERS}

    def _unfold(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim != 4 or images.shape[1] != self.channels:
            raise EvalsuiteError(f"a channel-wise ViT takes [batch, {self.channels}, height, width] images, got shape "
                                 f"{tuple(images.shape)}; pass RGB tiles")
        batch, channels, height, width = images.shape
        # Channel c of tile b becomes image b * channels + c: the published `x.view(B * 3, 1, H, W)` order.
        return images.reshape(batch * channels, 1, height, width)

    def _fold(self, tokens: torch.Tensor) -> torch.Tensor:
        """[batch x channels, tokens, width] -> [batch, tokens, channels x width], channel c in columns c x width on."""
        per_channel = tokens.unflatten(0, (-1, self.channels))
        return per_channel.permute(0, 2, 1, 3).flatten(2)


def _eva_name(key: str) -> str:
    for dinov3, eva in _DINOV3_TO_EVA:
        key = key.replace(dinov3, eva)
    return key
