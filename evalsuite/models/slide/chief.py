"""CHIEF (Wang, Zhao et al., "A pathology foundation model for cancer diagnosis and prognosis prediction", Nature
2024): a gated-attention MIL aggregator over CTransPath-architecture tile features, pretrained weakly supervised on
60,530 slides of 19 anatomical sites. Built here from torch alone; no code of CHIEF or TRIDENT is used or copied.
The network and its slide embedding were read from:

- hms-dbmi/CHIEF at 1abed33: `models/CHIEF.py` (CHIEF, Attn_Net_Gated), `Get_CHIEF_WSI_level_feature.py` and
  `Get_CHIEF_WSI_level_feature_batch.py` (`CHIEF(size_arg="small", dropout=True, n_classes=2)`, strict load of
  `model_weight/CHIEF_pretraining.pth`, the slide feature is `result['WSI_feature']`, [1, 768]), README.md (weights
  and the tile encoder CHIEF-CTransPath `CHIEF_CTransPath.pth` in the authors' Google Drive folder, on request;
  the tile encoder's input: `Resize(224)`, ImageNet mean/std), `models/ctran.py`, `configs/anatomic_mapping.yaml`
  (19 sites), LICENSE (AGPL-3.0; README: "GPLv3 ... non-commercial academic purposes").
- mahmoodlab/TRIDENT at a91fa84: `trident/slide_encoder_models/load.py` (CHIEFSlideEncoder: the same build and
  strict load, `model(x, torch.tensor([0]))['WSI_feature']`, 768 wide; CHIEF reads `ctranspath` tiles), README.md
  (`--slide_encoder chief --patch_size 256 --mag 10`), `trident/patch_encoder_models/load.py` (its `ctranspath` is
  CHIEF_CTransPath.pth).

The forward CHIEF's code returns as `WSI_feature` (size "small": 768 -> 512 -> 256): tiles h [T, 768] ->
`attention_net` (Linear 768 -> 512, ReLU, Dropout, then Ilse's gated attention 512 -> 256 -> 1 score per tile)
-> softmax over the tiles -> the attention-weighted sum of the INPUT tile features h (not of the 512-wide hidden
ones): [768]. No positions are read. CHIEF's other outputs add the anatomical-site embedding (a stored table of 19
CLIP text embeddings, `organ_embedding`, through `text_to_vision`) to the weighted sum of the hidden features
(`WSI_feature_anatomical`, 512 wide) and classify it; the site never enters `WSI_feature`, so the site index the
authors pass (13, TRIDENT 0) does not change it. Dropped by `published_keys`: `organ_embedding`,
`text_to_vision.*`, `classifiers.*`, `instance_classifiers.*`, `att_head.*`. There is no text tower to drop: the
site embeddings are a table in the file.

CHIEF's tile encoder is CHIEF-CTransPath: the registry's `ctranspath` network with CHIEF's own weights
(`CHIEF_CTransPath.pth`, the same keys as TransPath's `ctranspath.pth` but other values: hms-dbmi/CHIEF issue 54).

CHIEF is GitHub-only (not on PyPI) and its model file loads a Drive file at construction: there is no
re-computation against the original package; tests/models/slide/test_slide_chief.py recomputes the forward from
the definition above.
"""

import torch
from torch import nn

from evalsuite.models.slide.abmil_nets import GatedAttentionScores, attention_pool, check_tiles
from evalsuite.models.slide.spec import SlideEncoderSpec

CHIEF_AT = "https://github.com/hms-dbmi/CHIEF/blob/1abed334e674ad2b6ee0430d1ce7d0b566420bb4"
TRIDENT_AT = "https://github.com/mahmoodlab/TRIDENT/blob/a91fa8490e0210ebbbe58452c3babe009e0ab7ca"
WEIGHTS_FOLDER = "https://drive.google.com/drive/folders/1uRv9A1HuTW5m_pJoyMzdN31bE1i-tDaV"
# The anatomical-site side and the heads of pretraining: none is on the `WSI_feature` path.
UNUSED_PREFIXES = ("organ_embedding", "text_to_vision.", "classifiers.", "instance_classifiers.", "att_head.")

SPECS = (
    SlideEncoderSpec(
        name="chief", module="chief", tile_encoder="ctranspath", tile_dim=768,
        tiling={"target_mpp": 1.0, "tile_size_px": 256},  # TRIDENT's README: 256 px tiles at 10x
        embed_dim=768,  # the attention-weighted mean of the tile features
        config={"hidden_dim": 512, "attn_hidden_dim": 256},  # CHIEF.py size_dict["small"] = [768, 512, 256]
        hub_id=None, licence="AGPL-3.0 (LICENSE; README: GPLv3, non-commercial academic use)", gated=True,
        checkpoint_layout="CHIEF_pretraining.pth from the authors' Google Drive folder: a plain torch state dict of "
                          "CHIEF(size_arg='small'): attention_net.0.{weight,bias}, "
                          "attention_net.3.attention_{a,b}.0.{weight,bias}, attention_net.3.attention_c.{weight,bias} "
                          "(used); organ_embedding, text_to_vision.0.*, classifiers.*, instance_classifiers.{0,1}.*, "
                          "att_head.fc{1,2}.* (dropped)",
        uses_coords=False,
        sources=(WEIGHTS_FOLDER, f"{CHIEF_AT}/models/CHIEF.py", f"{CHIEF_AT}/Get_CHIEF_WSI_level_feature.py",
                 f"{CHIEF_AT}/Get_CHIEF_WSI_level_feature_batch.py", f"{CHIEF_AT}/README.md",
                 f"{CHIEF_AT}/models/ctran.py", f"{CHIEF_AT}/LICENSE",
                 f"{TRIDENT_AT}/trident/slide_encoder_models/load.py",
                 f"{TRIDENT_AT}/trident/patch_encoder_models/load.py", f"{TRIDENT_AT}/README.md",
                 "https://github.com/hms-dbmi/CHIEF/issues/54", "https://doi.org/10.1038/s41586-024-07894-z"),
        unconfirmed="the tiling (CHIEF's code and README name no magnification or tile size: 1.0 um/px and 256 px "
                    "are TRIDENT's; TransPath recommends 1.0 um/px); CHIEF_pretraining.pth itself was not read (its "
                    "keys are those of CHIEF.py's module, which the authors load strictly); 'gated' stands for the "
                    "README's access request on Google Drive; the tile weights must be CHIEF_CTransPath.pth "
                    "(extra['tile_weights']), not TransPath's ctranspath.pth",
        extra={"tile_weights": "CHIEF_CTransPath.pth", "hub_files": ("CHIEF_pretraining.pth",)},  # what the `ctranspath` tile encoder must load for CHIEF
    ),
)


class Chief(nn.Module):
    """CHIEF's `WSI_feature` path under its published names."""

    def __init__(self, tile_dim: int, hidden_dim: int, attn_hidden_dim: int):
        super().__init__()
        self.tile_dim = tile_dim
        # Linear, ReLU, Dropout (identity in eval), gated attention: the published indices 0 and 3.
        self.attention_net = nn.Sequential(nn.Linear(tile_dim, hidden_dim), nn.ReLU(), nn.Identity(),
                                           GatedAttentionScores(hidden_dim, attn_hidden_dim))

    def forward(self, features: torch.Tensor, coords_level0: torch.Tensor | None = None,
                patch_size_level0: int | None = None) -> torch.Tensor:
        """[tiles, tile_dim] -> [tile_dim]; positions are not read (a set function of the tiles)."""
        check_tiles(features, self.tile_dim, "CHIEF")
        # The scores come from the hidden features; the sum runs over the input ones (CHIEF.py `slide_embeddings`).
        return attention_pool(features, self.attention_net(features))


def build(spec: SlideEncoderSpec) -> Chief:
    config = spec.config
    return Chief(spec.tile_dim, config["hidden_dim"], config["attn_hidden_dim"]).float().eval()


def published_keys(state: dict) -> dict:
    """CHIEF's aggregator tensors keep their names; the anatomical-site side and the pretraining heads are dropped."""
    return {key: value for key, value in state.items() if not key.startswith(UNUSED_PREFIXES)}
