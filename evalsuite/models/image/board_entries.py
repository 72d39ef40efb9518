"""The encoders leading today's public boards (THUNDER's rank-sum, nanopath, Histoboard), one ModelSpec each, with
the same kinds of facts and sources as entries.py.

Read for these entries (commits of the snapshots read):
- mahmoodlab/TRIDENT a91fa84 trident/patch_encoder_models/load.py (GPFMInferenceEncoder); its open pull request #236
  (Digepath: `hf_hub:xtxx/Digepath`, ViT-L/16, init_values 1e-5, ImageNet mean/std, strict timm-layout load);
- LG-AI-EXAONE/EXAONE-Path-2.5 9089a14 README.md, exaonepath/models/patch_encoder_hf.py, patch_transformer.py;
- yanfang-research/PathOrchestra 3d3f24e README.md; Innse/mSTAR 6cb5016 README.md, Feature_extract/models/mSTAR.py;
- birkhoffkiki/GPFM 4f8be2b models/dinov2/__init__.py (build_transform), LICENSE;
- the hub cards of xtxx/Digepath and originbio/TinyPath.
MICS-Lab/thunder (6fe47e0) has none of these models.

EXAONE Path: LGAI-EXAONE/EXAONE-Path-2.0 is an end-to-end slide model (it reads a whole .svs), not a tile
encoder; 2.5 (December 2025, the newest) publishes its tile encoder on its own (`patch-encoder/`), entered here.
All six are plain timm ViTs; EXAONE's file keeps its ViT under `backbone.` (renamed by adapters.to_timm_vit).
"""

from evalsuite.models.image.spec import IMAGENET_MEAN, IMAGENET_STD, ModelSpec, PretrainedCfg
from evalsuite.models.pooling import CLS

TRIDENT = "https://github.com/mahmoodlab/TRIDENT/blob/a91fa8490e0210ebbbe58452c3babe009e0ab7ca/trident/" \
          "patch_encoder_models/load.py"
TRIDENT_DIGEPATH_PR = "https://github.com/mahmoodlab/TRIDENT/pull/236"
EXAONE_REPO = "https://github.com/LG-AI-EXAONE/EXAONE-Path-2.5/blob/9089a14405e1ae7dd3397009da1197feaa48ccad"
MSTAR_REPO = "https://github.com/Innse/mSTAR/blob/6cb5016a9a5e3bb2c6a9ac3cc6813d35b6c8b0b9"
GPFM_REPO = "https://github.com/birkhoffkiki/GPFM/blob/4f8be2b1f163f99ba35931f35abe60dc836f17da"
PATHORCHESTRA_REPO = "https://github.com/yanfang-research/PathOrchestra/blob/3d3f24ed9cc4e5261b74f3205a1adf0ac1015ba8"


def _hub(repo: str) -> str:
    return f"https://huggingface.co/{repo}"


BOARD_SPECS: list = [
    ModelSpec(
        name="exaone-path-2.5",
        # exaonepath/models/patch_transformer.py vit_base(patch_size=14, img_size=224): DINO's ViT-B (qkv bias,
        # LayerNorm eps 1e-6, GELU MLP x4, no layer scale, no registers), the tensors and names of timm's ViT-B.
        architecture="vit_base_patch16_224",
        timm_kwargs={"img_size": 224, "patch_size": 14},
        # README 3.1.1: Resize(256) (torchvision's default filter: bilinear), CenterCrop(224), ImageNet mean/std.
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:LGAI-EXAONE/EXAONE-Path-2.5", input_size_px=224,
                                     mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bilinear",
                                     licence="EXAONEPath AI Model License 1.0 - NC", gated=None),
        # The patch encoder's forward is the final-LayerNorm class token: 768.
        patch_size_px=14, num_prefix_tokens=1, token_dim=768, pooling=CLS, embed_dim=768,
        hub_files=("patch-encoder/model.safetensors",),
        sources=(_hub("LGAI-EXAONE/EXAONE-Path-2.5"), f"{EXAONE_REPO}/README.md",
                 f"{EXAONE_REPO}/exaonepath/models/patch_encoder_hf.py",
                 f"{EXAONE_REPO}/exaonepath/models/patch_transformer.py", "https://arxiv.org/abs/2512.14019"),
        unconfirmed="whether the hub repository is gated (EXAONEPath 1.0's is); the file name and its `backbone.` "
                    "key prefix are read from the authors' code (PatchEncoder saved by PyTorchModelHubMixin), not from "
                    "the file; the README's 256 px resize then 224 px centre crop is replaced by a direct resize",
    ),
    ModelSpec(
        name="pathorchestra",
        # README: timm.create_model("hf-hub:AI4Pathology/PathOrchestra", init_values=1e-5, dynamic_img_size=True), ViT-L/16.
        architecture="vit_large_patch16_224",
        timm_kwargs={"img_size": 224, "patch_size": 16, "init_values": 1e-5, "dynamic_img_size": True},
        # README: Resize(224) (bilinear), ImageNet mean/std, features = model(image).
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:AI4Pathology/PathOrchestra", input_size_px=224,
                                     mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bilinear",
                                     licence="unconfirmed (GitHub code: Apache-2.0)", gated=True),
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(_hub("AI4Pathology/PathOrchestra"), f"{PATHORCHESTRA_REPO}/README.md",
                 "https://www.nature.com/articles/s41746-025-02027-w"),
        unconfirmed="the hub config.json (gated): ViT-L/16 at 224 px with timm's class-token pooling assumed from the "
                    "README's ViT-l/16 and its model(image) embedding; the licence of the weights",
    ),
    ModelSpec(
        name="digepath",
        architecture="vit_large_patch16_224",
        timm_kwargs={"img_size": 224, "patch_size": 16, "init_values": 1e-5, "dynamic_img_size": True},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:xtxx/Digepath", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bicubic", licence="CC-BY-NC-4.0", gated=True),
        # Card: ViT-L/16, DINOv2 pre-training; TRIDENT #236: timm num_classes=0 output, 1024 (class token).
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        sources=(_hub("xtxx/Digepath"), TRIDENT_DIGEPATH_PR, "https://arxiv.org/abs/2505.21928"),
        unconfirmed="the resize filter (bicubic assumed, timm's for this architecture); gating from TRIDENT #236's "
                    "'gated Hugging Face loading', not from the hub page",
    ),
    ModelSpec(
        name="gpfm",
        # TRIDENT: timm vit_large_patch14_dinov2 (GELU MLP, layer scale) at 224 px, GPFM.pth loaded strictly.
        architecture="vit_large_patch14_dinov2",
        timm_kwargs={"img_size": 224, "init_values": 1e-5, "dynamic_img_size": True},
        # GPFM build_transform: Resize((224, 224), interpolation=3 = bicubic), ImageNet mean/std; TRIDENT the same.
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:majiabo/GPFM", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bicubic", licence="CC-BY-NC-ND-4.0",
                                     gated=None),
        patch_size_px=14, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        hub_files=("GPFM.pth",),
        sources=(_hub("majiabo/GPFM"), TRIDENT, f"{GPFM_REPO}/models/dinov2/__init__.py", f"{GPFM_REPO}/LICENSE",
                 "https://www.nature.com/articles/s41551-025-01488-4"),
        unconfirmed="gating of majiabo/GPFM; the licence is the GitHub repository's; that GPFM.pth holds only tensors "
                    "(TRIDENT reads it with weights_only=False; the authors' own loader reads a DINOv2 training "
                    "checkpoint, {'teacher': backbone.*}, which this entry does not read)",
    ),
    ModelSpec(
        name="mstar",
        architecture="vit_large_patch16_224",
        timm_kwargs={"img_size": 224, "patch_size": 16, "init_values": 1e-5, "dynamic_img_size": True},
        # README / Feature_extract/models/mSTAR.py: Resize(224) (bilinear), ImageNet mean/std, model(image) with
        # num_classes=0 (class token, 1024). The hub config's own mean/std are not the card's (not read).
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:Wangyh/mSTAR", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bilinear", licence="CC-BY-NC-ND-4.0",
                                     gated=True),
        patch_size_px=16, num_prefix_tokens=1, token_dim=1024, pooling=CLS, embed_dim=1024,
        hub_files=("model.safetensors", "pytorch_model.bin", "mSTAR.pth"),
        sources=(_hub("Wangyh/mSTAR"), f"{MSTAR_REPO}/README.md", f"{MSTAR_REPO}/Feature_extract/models/mSTAR.py",
                 "https://doi.org/10.1038/s41467-025-66220-x"),
        unconfirmed="which checkpoint file names the hub repository holds (the README's mSTAR.pth; timm loading from "
                    "the hub, announced by its owner, needs a timm file)",
    ),
    ModelSpec(
        name="tinypath",
        # Card: pruned from Prov-GigaPath, 33 blocks, width 640, 10 heads, patch 16, SwiGLU MLP, 103.6M parameters.
        # Prov-GigaPath's timm architecture with those sizes; the packed SwiGLU width 1536 (hidden 768) is the one
        # that gives 103,630,848 parameters.
        architecture="vit_giant_patch14_dinov2",
        timm_kwargs={"img_size": 224, "patch_size": 16, "embed_dim": 640, "depth": 33, "num_heads": 10,
                     "mlp_ratio": 2.4, "init_values": 1e-5},
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:originbio/TinyPath", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bicubic", licence="unconfirmed", gated=None),
        # Card: a 640-d class-token embedding and 196 patch tokens.
        patch_size_px=16, num_prefix_tokens=1, token_dim=640, pooling=CLS, embed_dim=640,
        sources=(_hub("originbio/TinyPath"), _hub("prov-gigapath/prov-gigapath")),
        unconfirmed="the hub config.json (not read): MLP width inferred from the card's 103.6M parameters, layer "
                    "scale as Prov-GigaPath's; mean/std and resize filter (Prov-GigaPath's ImageNet/bicubic assumed); "
                    "licence and gating of the hub repository",
    ),
]
