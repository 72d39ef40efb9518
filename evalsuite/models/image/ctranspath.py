"""CTransPath's tile encoder: timm's Swin-T with a convolutional stem, and its published key layout.

CTransPath (Wang et al., Medical Image Analysis 2022) is `timm.create_model('swin_tiny_patch4_window7_224',
embed_layer=ConvStem)` with the classifier replaced by an identity: its tile embedding is the mean of the final
LayerNorm-ed tokens, 768 wide, at 224 px (Xiyue-Wang/TransPath at 26c6194, `ctran.py`, `get_features_CTransPath.py`:
ImageNet mean/std, `Resize(224)`; its README recommends tiles at 1.0 um/px). The stem (`ConvStem` there) replaces
the 4x4 patch projection by two 3x3 stride-2 convolutions (bias-free, BatchNorm, ReLU; widths embed_dim/8 and
embed_dim/4) and a 1x1 convolution to embed_dim, then the LayerNorm timm passes in. `ConvStem` below rebuilds it
for current timm, which asks its patch embedding for channels-last output and passes device/dtype; the registry
names it in `timm_kwargs` and `architecture.resolve_layers` resolves the name.

Published checkpoints (`ctranspath.pth`, TransPath's Google Drive; CHIEF's `CHIEF_CTransPath.pth`, same keys, other
weights: hms-dbmi/CHIEF issue 54) hold `{"model": state}` saved from timm 0.5.4 (the modified timm TransPath
ships, on PyPI as `timm-ctp`), whose Swin differs from current timm's only in names: patch merging sits at the end
of stage i there and at the start of stage i+1 here, and the relative-position indices and shifted-window masks
are saved buffers there and computed buffers here. `published_keys` renames those; `ConvStem.fit_state_dict`
hands it to `backbones.load_weights`, which asks a model's stem for it.
"""

import re

import torch
from torch import nn

STEM_STRIDE = 4  # two stride-2 convolutions
# timm 0.5.4 merges patches after stage i; current timm before stage i+1.
_OLD_DOWNSAMPLE = re.compile(r"^layers\.(\d+)\.downsample\.")
_OLD_BUFFERS = ("attn_mask", "relative_position_index")  # saved by timm 0.5.4, computed by current timm
_OLD_LAYOUT_KEY = "layers.0.downsample.reduction.weight"  # only timm 0.5.4 has a stage-0 merge


class ConvStem(nn.Module):
    """CTransPath's patch embedding: [B, 3, H, W] -> [B, H/4, W/4, embed_dim] (or [B, H/4 * W/4, embed_dim])."""

    def __init__(self, img_size=224, patch_size: int = STEM_STRIDE, in_chans: int = 3, embed_dim: int = 96,
                 norm_layer=None, strict_img_size: bool = True, output_fmt: str = "NLC", device=None, dtype=None):
        super().__init__()
        if patch_size not in (STEM_STRIDE, (STEM_STRIDE, STEM_STRIDE)) or embed_dim % 8:
            raise ValueError(f"ConvStem has stride {STEM_STRIDE} and needs embed_dim divisible by 8; got patch_size "
                             f"{patch_size}, embed_dim {embed_dim}")
        factory = {"device": device, "dtype": dtype}
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.patch_size = (STEM_STRIDE, STEM_STRIDE)
        self.grid_size = (self.img_size[0] // STEM_STRIDE, self.img_size[1] // STEM_STRIDE)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.strict_img_size = strict_img_size
        self.output_fmt = output_fmt  # current timm's Swin asks for "NHWC"; timm 0.5.4's took flattened tokens
        narrow, wide = embed_dim // 8, embed_dim // 4
        # Indices as in the published `patch_embed.proj.{0,1,3,4,6}` keys (ReLUs at 2 and 5 hold no tensors).
        self.proj = nn.Sequential(
            nn.Conv2d(in_chans, narrow, kernel_size=3, stride=2, padding=1, bias=False, **factory),
            nn.BatchNorm2d(narrow, **factory), nn.ReLU(inplace=True),
            nn.Conv2d(narrow, wide, kernel_size=3, stride=2, padding=1, bias=False, **factory),
            nn.BatchNorm2d(wide, **factory), nn.ReLU(inplace=True),
            nn.Conv2d(wide, embed_dim, kernel_size=1, **factory),
        )
        self.norm = norm_layer(embed_dim, **factory) if norm_layer else nn.Identity()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.strict_img_size and tuple(images.shape[-2:]) != self.img_size:
            raise ValueError(f"CTransPath's stem was built for {self.img_size} px tiles; "
                             f"got {tuple(images.shape[-2:])}")
        # Channels last: the LayerNorm normalises each position's embed_dim channels, as on flattened tokens.
        tokens = self.norm(self.proj(images).permute(0, 2, 3, 1))
        return tokens if self.output_fmt == "NHWC" else tokens.flatten(1, 2)

    @staticmethod
    def fit_state_dict(state: dict) -> dict:
        """The whole network's published checkpoint renamed for current timm (models/backbones.py asks the stem)."""
        return published_keys(state)


def published_keys(state: dict) -> dict:
    """A CTransPath checkpoint in timm 0.5.4's Swin names, in current timm's; a current-layout state passes through."""
    old_layout = _OLD_LAYOUT_KEY in state
    renamed = {}
    for key, tensor in state.items():
        if key.rsplit(".", 1)[-1] in _OLD_BUFFERS:
            continue  # current timm computes them from the window size and the stage's resolution
        if old_layout:
            key = _OLD_DOWNSAMPLE.sub(lambda match: f"layers.{int(match.group(1)) + 1}.downsample.", key)
        renamed[key] = tensor
    return renamed
