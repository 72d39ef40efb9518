"""FEATHER (MahmoodLab; Shao et al., "Do Multiple Instance Learning Models Transfer?", ICML 2025): a gated ABMIL
trained supervised on a 108-way pan-cancer classification of 24K slides (PC-108 24K), published per tile encoder as
`abmil.base.<encoder>.pc108-24k`. Built here from torch alone; no code of MIL-Lab or TRIDENT is used or copied. The
network and forward below were read from:

- mahmoodlab/MIL-Lab at dfc3c17: `src/models/abmil.py` (ABMIL, ABMILModel, ABMILGatedBaseConfig),
  `src/models/layers.py` (create_mlp, GlobalGatedAttention), `src/model_configs/abmil/base.yaml` (gate true,
  embed_dim 512, attn_dim 384, num_fc_layers 1, dropout 0.25), `src/_global_mappings.py` (in_dim per encoder:
  conch_v15 768, uni_v2 1536), `src/builder_utils.py` (loading: `model.` prefix, `model.classifier.*` dropped),
  README.md (the published models, gated on the hub, CC-BY-NC-ND-4.0).
- mahmoodlab/TRIDENT at a91fa84: `trident/slide_encoder_models/load.py` (FeatherSlideEncoder, hub
  `MahmoodLab/abmil.base.conch_v15.pc108-24k`, tile encoder conch_v15; FeatherUni2SlideEncoder, hub
  `MahmoodLab/abmil.base.uni_v2.pc108-24k`, tile encoder uni_v2; both fetch `model.safetensors` + `config.json` and
  return `forward_features(features)[0]` as the slide embedding, 512 wide, float32), README.md (`--patch_size 512
  --mag 20` for feather, `--patch_size 256 --mag 20` for feather_uni_v2), `trident/cli_doctor.py` (Feather among the
  gated repositories).

The forward (MIL-Lab's `forward_features`): tiles -> Linear(in, 512) -> ReLU (`patch_embed`, create_mlp with
end_with_fc=False) -> gated attention scores (`global_attn`, hidden 384) -> softmax over the tiles -> the weighted
sum of the embedded tiles: [512]. No positions are read. The 108-way `classifier` of the checkpoint (if present) is
not part of the slide embedding and is dropped by `published_keys`.

A third variant, `abmil.base.uni.pc108-24k` on UNI (1024-d), is listed in MIL-Lab's README but not in TRIDENT and
has no stated tiling; it is not an entry here.

MIL-Lab and TRIDENT are GitHub-only (PyPI's `trident` is an unrelated astronomy package; MIL-Lab installs as `src`),
and FEATHER's hub code (`modeling_abmil.py`, loaded with trust_remote_code) is gated: there is no re-computation
against the original package. tests/models/slide/test_slide_feather.py recomputes the forward from its definition.
"""

import torch
from torch import nn

from evalsuite.models.slide.abmil_nets import GatedAttentionScores, attention_pool, check_tiles
from evalsuite.models.slide.spec import SlideEncoderSpec

MIL_LAB = "https://github.com/mahmoodlab/MIL-Lab/blob/dfc3c17ca6876a8f9bd33a9162c40f2c22631d9d"
TRIDENT_AT = "https://github.com/mahmoodlab/TRIDENT/blob/a91fa8490e0210ebbbe58452c3babe009e0ab7ca"
# The published wrapper (ABMILModel, a transformers PreTrainedModel) holds the network as `self.model`.
PUBLISHED_PREFIX = "model."
CLASSIFIER_PREFIX = "classifier."  # the PC-108 head; MIL-Lab drops it on load unless keep_classifier
BASE_CONFIG = {"embed_dim": 512, "attn_dim": 384, "num_fc_layers": 1}  # abmil/base.yaml (gate: true)
_SOURCES = (f"{MIL_LAB}/src/models/abmil.py", f"{MIL_LAB}/src/models/layers.py",
            f"{MIL_LAB}/src/model_configs/abmil/base.yaml", f"{MIL_LAB}/src/_global_mappings.py",
            f"{MIL_LAB}/src/builder_utils.py", f"{MIL_LAB}/README.md",
            f"{TRIDENT_AT}/trident/slide_encoder_models/load.py", f"{TRIDENT_AT}/README.md",
            f"{TRIDENT_AT}/trident/cli_doctor.py", "https://arxiv.org/abs/2506.09022")
_LAYOUT = ("model.safetensors of the hub repository (transformers save of MIL-Lab's ABMILModel): "
           "model.patch_embed.0.{weight,bias}, model.global_attn.attention_{a,b}.0.{weight,bias}, "
           "model.global_attn.attention_c.{weight,bias}; model.classifier.* (the PC-108 head) dropped; keys without "
           "the model. prefix (MIL-Lab's pytorch_model.bin) read the same")
_UNCONFIRMED = ("the hub files themselves (gated; model.safetensors, config.json and modeling_abmil.py were not "
                "read): that the hub code is MIL-Lab's abmil.py, that config.json holds base.yaml's sizes, the key "
                "names (read from the code: the `model.` prefix of ABMILModel) and whether a classifier is stored; "
                "the licence from MIL-Lab's README, not the model card")


def _spec(name: str, tile_encoder: str, tile_dim: int, tile_size_px: int, hub_repo: str,
          unconfirmed: str = "") -> SlideEncoderSpec:
    return SlideEncoderSpec(
        name=name, module="feather", tile_encoder=tile_encoder, tile_dim=tile_dim,
        tiling={"target_mpp": 0.5, "tile_size_px": tile_size_px},  # TRIDENT's README: --mag 20 --patch_size ...
        embed_dim=BASE_CONFIG["embed_dim"], config=dict(BASE_CONFIG), hub_id=f"hf-hub:MahmoodLab/{hub_repo}",
        licence="CC-BY-NC-ND-4.0", gated=True, checkpoint_layout=_LAYOUT, uses_coords=False,
        sources=(f"https://huggingface.co/MahmoodLab/{hub_repo}", *_SOURCES),
        unconfirmed="; ".join(filter(None, (_UNCONFIRMED, unconfirmed))),
    )


SPECS = (
    _spec("feather-conch-v1.5", "conch-v1.5", 768, 512, "abmil.base.conch_v15.pc108-24k"),  # TRIDENT: feather
    _spec("feather-uni2", "uni2-h", 1536, 256, "abmil.base.uni_v2.pc108-24k",  # TRIDENT: feather_uni_v2
          unconfirmed="gating of this repository (MIL-Lab's README: every FEATHER model needs a granted request; "
                      "TRIDENT's doctor lists only the CONCH v1.5 one)"),
)


class Feather(nn.Module):
    """MIL-Lab's ABMIL without its classifier, under the published names less the `model.` prefix."""

    def __init__(self, tile_dim: int, embed_dim: int, attn_dim: int, num_fc_layers: int):
        super().__init__()
        self.tile_dim = tile_dim
        self.patch_embed = _patch_embed(tile_dim, embed_dim, num_fc_layers)
        self.global_attn = GatedAttentionScores(embed_dim, attn_dim)

    def forward(self, features: torch.Tensor, coords_level0: torch.Tensor | None = None,
                patch_size_level0: int | None = None) -> torch.Tensor:
        """[tiles, tile_dim] -> [embed_dim]; positions are not read (FEATHER is a set function of the tiles)."""
        check_tiles(features, self.tile_dim, "FEATHER")
        embedded = self.patch_embed(features)
        return attention_pool(embedded, self.global_attn(embedded))


def _patch_embed(tile_dim: int, embed_dim: int, num_fc_layers: int) -> nn.Sequential:
    """create_mlp(hid_dims=[embed_dim] * (num_fc_layers - 1), act=ReLU, end_with_fc=False): Linear, ReLU, Dropout
    per hidden layer, then Linear, ReLU. The dropouts become Identity so the Linear layers keep their published
    indices (0, 3, ...)."""
    layers, width = [], tile_dim
    for _ in range(num_fc_layers - 1):
        layers += [nn.Linear(width, embed_dim), nn.ReLU(), nn.Identity()]
        width = embed_dim
    return nn.Sequential(*layers, nn.Linear(width, embed_dim), nn.ReLU())


def build(spec: SlideEncoderSpec) -> Feather:
    config = spec.config
    return Feather(spec.tile_dim, config["embed_dim"], config["attn_dim"], config["num_fc_layers"]).float().eval()


def published_keys(state: dict) -> dict:
    """The published tensors under the module's names: the `model.` prefix removed, the classifier dropped."""
    renamed = {key.removeprefix(PUBLISHED_PREFIX): value for key, value in state.items()}
    return {key: value for key, value in renamed.items() if not key.startswith(CLASSIFIER_PREFIX)}
