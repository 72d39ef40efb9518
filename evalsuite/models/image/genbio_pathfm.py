"""GenBio-PathFM's registry entry: a one-channel DINOv3-style ViT-G/16 run on each RGB channel.

The network (genbio-ai/genbio-pathfm at 1d65d00, `genbio_pathfm/model.py` `GenBio_PathFM_Inference`; vendored
unchanged in mahmoodlab/TRIDENT at a91fa84, `trident/patch_encoder_models/model_zoo/genbio_pathfm/genbio_pathfm.py`,
and used by THUNDER at e584c7e, `src/thunder/models/pretrained_models.py` `get_genbio_pathfm`) is DINOv3's
VisionTransformer with `in_chans=1`, width 1536, depth 40, 24 heads, patch 16, 4 storage (register) tokens, no
absolute position embedding but RoPE (base 100, coordinates normalised per side), SwiGLU FFN of ratio 4 aligned to
64 (`swiglu64`: hidden 4096), no qkv bias, LayerScale 1e-5, LayerNorm eps 1e-6 (`layernorm`). timm builds the same
tensors as an Eva model (timm's DINOv3 port, `vit_7b_patch16_dinov3`: depth 40, no qkv bias, SwiGLU aligned to 64,
4 registers, RoPE base 100) at GenBio's width, heads, MLP ratio and norm. The published forward runs it on each
colour channel and concatenates the three class tokens (4608 wide); `forward_with_patches` concatenates the three
channels' patch tokens per position, the segmentation features THUNDER reads. evalsuite.models.image.channelwise
wraps the timm trunk to return that concatenation for every token, so `cls` pooling is the card's embedding and the
dense features are the per-channel patch tokens concatenated ([B, 14, 14, 4608] at 224 px).

Pixels: `Resize((224, 224))` (torchvision's default bilinear; TRIDENT: bilinear, antialiased), then the mean/std
below (genbio-ai/genbio-pathfm README; TRIDENT `utils/constants.py` GENBIO_PATHFM_MEAN/STD). TRIDENT reads 224 px
tiles at 20x. The file is `model.pth` (the DINOv3 state dict the README's `hf_hub_download` fetches).
"""

from evalsuite.models.image.spec import ModelSpec, PretrainedCfg
from evalsuite.models.pooling import CLS

GENBIO_MEAN = (0.697, 0.575, 0.728)
GENBIO_STD = (0.188, 0.240, 0.187)
_WIDTH = 1536
_CHANNELS = 3  # R, G, B, each through the one-channel trunk
_REPO = "https://github.com/genbio-ai/genbio-pathfm"
_TRIDENT_GENBIO = ("https://github.com/mahmoodlab/TRIDENT/blob/a91fa8490e0210ebbbe58452c3babe009e0ab7ca/trident/"
                   "patch_encoder_models/model_zoo/genbio_pathfm/genbio_pathfm.py")
_THUNDER_MODELS = ("https://github.com/MICS-Lab/thunder/blob/e584c7efe871999875646b0f4f821a6ec205b8a5/src/thunder/"
                   "models/pretrained_models.py")

GENBIO_SPECS = [
    ModelSpec(
        name="genbio-pathfm",
        architecture="vit_7b_patch16_dinov3",
        # GenBio_PathFM_Inference's VisionTransformer(...) arguments in timm Eva terms: timm's SwiGLU hidden width is
        # int(1536 x mlp_ratio) rounded up to 64, 4096 as DINOv3's swiglu64 makes of ffn_ratio 4 (int(1536 x 4 x 2/3)).
        timm_kwargs={"img_size": 224, "in_chans": 1, "embed_dim": _WIDTH, "depth": 40, "num_heads": 24,
                     "mlp_ratio": 2.6667, "swiglu_align_to": 64, "qkv_bias": False, "init_values": 1e-5,
                     "num_reg_tokens": 4, "norm_layer": "LayerNorm"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:genbio-ai/genbio-pathfm", input_size_px=224, mean=GENBIO_MEAN,
                                     std=GENBIO_STD, interpolation="bilinear",
                                     licence="GenBio AI Community License (non-commercial)", gated=None),
        # Tokens of the channel-wise wrapper are 3 x 1536 wide; the class token is the card's 4608-wide embedding.
        patch_size_px=16, num_prefix_tokens=5, token_dim=_CHANNELS * _WIDTH, pooling=CLS,
        embed_dim=_CHANNELS * _WIDTH, head="channelwise", hub_files=("model.pth",),
        sources=("https://huggingface.co/genbio-ai/genbio-pathfm", _REPO,
                 f"{_REPO}/blob/1d65d002f28f6a4b481ca6cc434267b453c30b60/genbio_pathfm/model.py",
                 _TRIDENT_GENBIO, _THUNDER_MODELS,
                 "https://www.biorxiv.org/content/10.64898/2026.03.17.712534v1"),
        unconfirmed="the hub card itself (read: the GitHub README, TRIDENT's and THUNDER's loaders) and whether the "
                    "hub repository is gated; numerics: the published code computes RoPE (periods, sin/cos) in "
                    "bfloat16 and rotates q/k in bfloat16 even in a float32 run (pos_embed_rope_dtype='bf16'), timm "
                    "in float32, so embeddings agree to bfloat16 rounding of the rotary terms, not bit for bit",
    ),
]
