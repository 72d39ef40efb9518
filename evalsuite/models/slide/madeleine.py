"""MADELEINE (MahmoodLab; Jaume, Vaidya et al., "Multistain Pretraining for Slide Representation Learning in
Pathology", ECCV 2024): a multi-head gated ABMIL over CONCH v1 tile features, pretrained by aligning H&E slides
with IHC-stained slides of the same tissue (breast, 10x). Built here from torch alone; no code of MADELEINE or
TRIDENT is used or copied. The network and forward below were read from:

- mahmoodlab/MADELEINE at 419287d: `madeleine/models/Model.py` (MADELEINE, ABMILEmbedder, `encode_he`,
  `create_model`: stain_encoding=False, strict load, a DDP `module.` prefix removed), `madeleine/models/abmil.py`
  (BatchedABMIL), `madeleine/models/factory.py` (hub `MahmoodLab/madeleine`: `model_config.json` + `model.pt`),
  `madeleine/utils/process_args.py` and `scripts/launch_pretrain_withoutStainEncodings.sh` (patch_embedding_dim 512,
  wsi_encoder_hidden_dim 512, n_heads 4, activation softmax), `madeleine/preprocessing/conch_patch_embedder.py`
  (tiles embedded by CONCH's `encode_image(proj_contrast=False, normalize=False)`), README.md (CONCH features at 10x
  on 256 px patches; CC-BY-NC-ND-4.0).
- mahmoodlab/TRIDENT at a91fa84: `trident/slide_encoder_models/load.py` (MadeleineSlideEncoder: tile encoder
  conch_v1, `model.encode_he(features)` is the slide embedding, 512 wide), `trident/patch_encoder_models/load.py`
  (conch_v1: `encode_image(proj_contrast=False, normalize=False)`, 512-d), README.md (`--patch_size 256 --mag 10`),
  `tests/test_slide_encoders.py` (512-d features in, bfloat16 precision).

The forward (`encode_he`, one H&E slide): tiles [T, 512] -> `pre_attn` (Linear 512 -> LayerNorm -> GELU, twice at
512, then Linear to 512 x 4 heads -> LayerNorm -> GELU) -> split into 4 heads of 512 the way einops'
`'b t (e c) -> b t e c'` splits it (channel e * heads + c belongs to head c: interleaved, not blocks) -> per head a
gated-attention score, softmax over the tiles, weighted sum -> [512, 4] flattened in that same interleaved order
-> `projector` Linear(2048, 512): [512]. No positions are read. Dropped by `published_keys`: `token_projector.*`
(the local-alignment head of pretraining, not on the slide-embedding path).

TRIDENT runs MADELEINE in bfloat16 (the precision of its `model_config.json`); the contract here is float32.
The registry's `conch` tile encoder gives the same output (the pooled features before the projection) at CONCH's
default 448 px input, as TRIDENT's conch_v1 does; MADELEINE's own extraction script built CONCH with
force_image_size=224 (256 px tiles resized to 224).

MADELEINE and TRIDENT are GitHub-only (PyPI's `madeleine` and `trident` are unrelated projects): there is no
re-computation against the original package. tests/models/slide/test_slide_madeleine.py recomputes the forward
from its definition.
"""

import torch
from torch import nn

from evalsuite.models.slide.abmil_nets import GatedAttentionScores, attention_pool, check_tiles
from evalsuite.models.slide.spec import SlideEncoderSpec

MADELEINE_AT = "https://github.com/mahmoodlab/MADELEINE/blob/419287dc60a57296d959840b893481019c4f0d21"
TRIDENT_AT = "https://github.com/mahmoodlab/TRIDENT/blob/a91fa8490e0210ebbbe58452c3babe009e0ab7ca"
UNUSED_PREFIXES = ("token_projector.",)  # pretraining's local (token) alignment head

SPECS = (
    SlideEncoderSpec(
        name="madeleine", module="madeleine", tile_encoder="conch", tile_dim=512,
        tiling={"target_mpp": 1.0, "tile_size_px": 256},  # MADELEINE's README and TRIDENT's: 10x, 256 px
        embed_dim=512,
        # launch_pretrain_*.sh: --wsi_encoder_hidden_dim 512 --n_heads 4; Model.py: attention hidden 512 (fixed)
        config={"hidden_dim": 512, "n_heads": 4, "attn_hidden_dim": 512},
        hub_id="hf-hub:MahmoodLab/madeleine", licence="CC-BY-NC-ND-4.0", gated=None,
        checkpoint_layout="model.pt of the hub repository (a torch state dict; model_config.json beside it): "
                          "wsi_embedders.pre_attn.{0,1,4,5,8,9}.{weight,bias}, "
                          "wsi_embedders.attn.{0-3}.attention_{a,b}.0.{weight,bias}, "
                          "wsi_embedders.attn.{0-3}.attention_c.{weight,bias}, projector.{weight,bias}; "
                          "token_projector.* dropped; a DDP module. prefix removed",
        uses_coords=False,
        sources=("https://huggingface.co/MahmoodLab/madeleine", f"{MADELEINE_AT}/madeleine/models/Model.py",
                 f"{MADELEINE_AT}/madeleine/models/abmil.py", f"{MADELEINE_AT}/madeleine/models/factory.py",
                 f"{MADELEINE_AT}/madeleine/utils/process_args.py",
                 f"{MADELEINE_AT}/scripts/launch_pretrain_withoutStainEncodings.sh",
                 f"{MADELEINE_AT}/madeleine/preprocessing/conch_patch_embedder.py", f"{MADELEINE_AT}/README.md",
                 f"{TRIDENT_AT}/trident/slide_encoder_models/load.py",
                 f"{TRIDENT_AT}/trident/patch_encoder_models/load.py", f"{TRIDENT_AT}/README.md",
                 f"{TRIDENT_AT}/tests/test_slide_encoders.py", "https://arxiv.org/abs/2408.02859"),
        unconfirmed="the hub's model_config.json and model.pt were not read: the sizes (hidden 512, 4 heads) are "
                    "the authors' pretraining script's, the key names MADELEINE's code's (token_projector assumed "
                    "stored, no stain embedding as create_model builds none), and that model.pt is a plain state "
                    "dict torch.load(weights_only=True) reads (MADELEINE loads it with weights_only=False); gating "
                    "(TRIDENT's doctor does not list it among the gated repositories); the licence is the GitHub "
                    "repository's; the CONCH input size of pretraining (224 px in MADELEINE's extraction script) "
                    "against the registry's 448 px, as TRIDENT feeds it",
        extra={"hub_files": ("model.pt",)},
    ),
)


class MadeleineEmbedder(nn.Module):
    """`wsi_embedders.*`: the shared pre-attention MLP and one gated-attention scorer per head."""

    def __init__(self, tile_dim: int, hidden_dim: int, n_heads: int, attn_hidden_dim: int):
        super().__init__()
        self.n_heads = n_heads
        # ABMILEmbedder's pre_attn; Identity in the Dropout slots keeps the published indices 0, 1, 4, 5, 8, 9.
        self.pre_attn = nn.Sequential(
            nn.Linear(tile_dim, hidden_dim), nn.LayerNorm(hidden_dim), nn.GELU(), nn.Identity(),
            nn.Linear(hidden_dim, hidden_dim), nn.LayerNorm(hidden_dim), nn.GELU(), nn.Identity(),
            nn.Linear(hidden_dim, hidden_dim * n_heads), nn.LayerNorm(hidden_dim * n_heads), nn.GELU())
        self.attn = nn.ModuleList(GatedAttentionScores(hidden_dim, attn_hidden_dim) for _ in range(n_heads))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """[tiles, tile_dim] -> [hidden_dim, n_heads]: each head's attention-pooled tiles."""
        # einops 'b t (e c) -> b t e c': head c owns channels c, c + n_heads, c + 2 n_heads, ...
        per_head = self.pre_attn(features).unflatten(-1, (-1, self.n_heads))  # [tiles, hidden, heads]
        pooled = [attention_pool(per_head[..., head], scorer(per_head[..., head]))
                  for head, scorer in enumerate(self.attn)]
        return torch.stack(pooled, dim=-1)


class Madeleine(nn.Module):
    """MADELEINE's H&E slide path (`encode_he`) under its published names."""

    def __init__(self, tile_dim: int, hidden_dim: int, n_heads: int, attn_hidden_dim: int):
        super().__init__()
        self.tile_dim = tile_dim
        self.wsi_embedders = MadeleineEmbedder(tile_dim, hidden_dim, n_heads, attn_hidden_dim)
        # Model.py sizes it attn_hidden_dim * n_heads -> attn_hidden_dim; its input is hidden_dim * n_heads wide,
        # which is the same only because both are 512 in MADELEINE: here it is sized from what it reads.
        self.projector = nn.Linear(hidden_dim * n_heads, attn_hidden_dim)

    def forward(self, features: torch.Tensor, coords_level0: torch.Tensor | None = None,
                patch_size_level0: int | None = None) -> torch.Tensor:
        """[tiles, tile_dim] -> [attn_hidden_dim]; positions are not read (a set function of the tiles)."""
        check_tiles(features, self.tile_dim, "MADELEINE")
        pooled = self.wsi_embedders(features)  # [hidden, heads]: flattened hidden-major as encode_he's view does
        return self.projector(pooled.flatten())


def build(spec: SlideEncoderSpec) -> Madeleine:
    config = spec.config
    return Madeleine(spec.tile_dim, config["hidden_dim"], config["n_heads"], config["attn_hidden_dim"]).float().eval()


def published_keys(state: dict) -> dict:
    """MADELEINE's tensors keep their names (the checkpoint reader already removed a `module.` prefix); the
    token projector of pretraining is dropped."""
    return {key: value for key, value in state.items() if not key.startswith(UNUSED_PREFIXES)}
