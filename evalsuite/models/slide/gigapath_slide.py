"""Prov-GigaPath's slide encoder (Xu et al., Nature 2024): a LongNet over the tiles' Prov-GigaPath features, built in
plain torch (models/slide/longnet.py) under the module names of the published `slide_encoder.pth`, which loads key
for key. No code of prov-gigapath is used or copied; what is built was read from GitHub prov-gigapath/prov-gigapath
at 09d8e876afb98a1dda01cc531b1087c58fffc9f7: `gigapath/slide_encoder.py` (LongNetViT, `gigapath_slide_enc12l768d`,
`create_model`), `gigapath/pos_embed.py`, `gigapath/pipeline.py`, `gigapath/preprocessing/data/create_tiles_dataset.py`,
`demo/run_gigapath.ipynb`, `demo/4_load_slide_encoder.py`, and its bundled torchscale (longnet.py says which files).
The original is GitHub-only and needs flash-attn on a CUDA GPU; tests/models/slide/test_slide_gigapath.py recomputes
the encoder with PyPI's torchscale 0.3.0 (the same encoder layers) around an independent dilated attention.

Forward (LongNetViT.forward with global_pool=True, all_layer_embed=False):
  - `patch_embed.proj`: Linear 1536 -> 768 per tile;
  - plus a fixed 2-D sin-cos embedding of the tile's grid cell (MAE's table for a 1000 x 1000 grid; computed here per
    tile rather than held as the original's 1,000,001 x 768 buffer): cell = floor(coords_level0 / 256), flat index
    x_cell * 1000 + y_cell; half the channels encode (flat mod 1000), half (flat div 1000), each as [sin, cos] of
    the position times 10000^(-i / (width / 4)). 256 is `tile_size` of `gigapath_slide_enc12l768d`, and gigapath's
    own pipeline passes level-0 coordinates (create_tiles_dataset.py), so a 0.25 um/px scan tiled at 0.5 um/px
    steps two cells per tile; config grid_px_level0=None divides by patch_size_level0 instead (one cell per tile,
    what TRIDENT does). A flat index outside the grid, which the original reads out of its table, is refused;
  - `cls_token` (its position row is zero) before the tiles, then the 12-layer LongNet (768 wide, 16 heads, FFN 3072,
    dilation ratios 1, 2, 4, 8, 16 over segments of 1024, 5792, 32768, 185363, 1048576 tokens:
    `get_optimal_segment_length(262144, 256)`, which the notebook's output prints);
  - the slide embedding: the mean over the tile tokens (CLS left out) of the encoder's output (the last layer through
    the encoder's `layer_norm`), through `norm` (LayerNorm eps 1e-6), 768 wide. The CLS token is not read: the authors
    note it was not trained in pretraining (demo/4_load_slide_encoder.py, run_gigapath.ipynb) and use global_pool.
    Other readouts the authors' code offers: `pipeline.run_inference_with_slide_encoder` (all_layer_embed=True)
    returns per layer `norm(mean(layer output))` without the encoder's `layer_norm`, "last_layer_embed" being layer
    12; the fine-tuning default reads layer 11 (feat_layer 11), as TRIDENT does. config readout=k gives layer k.

The checkpoint `slide_encoder.pth` holds {"model": state dict} with LongNetViT's keys (cls_token, patch_embed.proj.*,
encoder.layers.N.*, encoder.layer_norm.*, norm.*); the position table is a non-persistent buffer, not saved. There is
no text tower; published_keys drops only a `pos_embed` should a file hold one.
"""

import torch
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models.slide.longnet import _SCORES_PER_CHUNK, LongNetEncoder
from evalsuite.models.slide.spec import SlideEncoderSpec

REPO = "https://github.com/prov-gigapath/prov-gigapath/blob/09d8e876afb98a1dda01cc531b1087c58fffc9f7"
CONFIG = {
    "width": 768, "depth": 12, "heads": 16, "ffn_hidden": 3072,  # LongNet_12_layers_768_dim (LongNetConfig.py)
    "segment_lengths": (1024, 5792, 32768, 185363, 1048576),  # get_optimal_segment_length(262144, 256)
    "dilation_ratios": (1, 2, 4, 8, 16),  # make_longnet_from_name's default
    "layernorm_eps": 1e-5, "norm_eps": 1e-6,  # torchscale's layernorm_eps; the model's partial(LayerNorm, eps=1e-6)
    "grid_cells": 1000,  # slide_ngrids: the position table covers 1000 x 1000 cells
    "grid_px_level0": 256,  # coords_to_pos(coords, tile_size=256); None: patch_size_level0
    "readout": "final",  # "final": encoder output through its layer_norm; k: layer k's output (0 = the input)
}


class GigaPathSlideEncoder(nn.Module):
    """LongNetViT with global pooling: `patch_embed.proj`, `cls_token`, `encoder` (LongNet), `norm`."""

    def __init__(self, tile_dim: int, config: dict):
        super().__init__()
        width = config["width"]
        if width % 4:
            raise ValueError(f"the 2-D sin-cos embedding needs a width divisible by 4, got {width}")
        self.config = dict(config)
        self.patch_embed = nn.ModuleDict({"proj": nn.Linear(tile_dim, width)})
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.encoder = LongNetEncoder(width, config["depth"], config["heads"], config["ffn_hidden"],
                                      config["segment_lengths"], config["dilation_ratios"], config["layernorm_eps"])
        self.norm = nn.LayerNorm(width, eps=config["norm_eps"])

    def forward(self, features: torch.Tensor, coords_level0: torch.Tensor, patch_size_level0: int) -> torch.Tensor:
        grid_px = self.config["grid_px_level0"] or patch_size_level0
        tiles = self.patch_embed["proj"](features) + self.position_rows(coords_level0, grid_px).to(features.dtype)
        tokens = torch.cat([self.cls_token[0], tiles]).unsqueeze(0)  # the CLS position row is zero
        final, states = self.encoder(tokens)
        readout = self.config["readout"]
        chosen = final if readout == "final" else states[readout]
        return self.norm(chosen[0, 1:].mean(0))

    def position_rows(self, coords_level0: torch.Tensor, grid_px: int) -> torch.Tensor:
        """[tiles, width]: the rows of the original's sin-cos table its coords_to_pos picks."""
        cells = self.config["grid_cells"]
        cell = torch.floor(coords_level0.float() / grid_px).long()  # in float32, as the original divides
        flat = cell[:, 0] * cells + cell[:, 1]
        outside = (flat < 0) | (flat >= cells * cells)
        if bool(outside.any()):
            x, y = coords_level0[outside.nonzero()[0, 0]].tolist()
            raise EvalsuiteError(f"gigapath-slide: a tile at level-0 ({x:g}, {y:g}) falls outside the slide encoder's "
                                 f"{cells} x {cells} position grid of {grid_px} px cells; its slides must be smaller")
        width = self.patch_embed["proj"].out_features
        return torch.cat([sincos_1d(flat % cells, width // 2), sincos_1d(flat // cells, width // 2)], dim=1)


def sincos_1d(positions: torch.Tensor, width: int) -> torch.Tensor:
    """[n, width]: [sin(p w_i), cos(p w_i)] with w_i = 10000^(-i / (width/2)), in float64 as the original's numpy."""
    rates = 1.0 / 10000 ** (torch.arange(width // 2, dtype=torch.float64) / (width / 2))
    angles = positions.to(torch.float64).unsqueeze(1) * rates
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).float()


def build(spec: SlideEncoderSpec) -> GigaPathSlideEncoder:
    return GigaPathSlideEncoder(spec.tile_dim, spec.config).float().eval()


def published_keys(state: dict) -> dict:
    """slide_encoder.pth's "model" state dict already has this module's names; a saved position table is dropped
    (fixed sin-cos values, computed per tile here)."""
    return {key: value for key, value in state.items() if key != "pos_embed"}


SPECS = (
    SlideEncoderSpec(
        name="gigapath-slide",
        module="gigapath_slide",
        tile_encoder="prov-gigapath",
        tile_dim=1536,
        tiling={"target_mpp": 0.5, "tile_size_px": 256},  # demo/1_slide_mpp_check.py; tile_one_slide(tile_size=256)
        embed_dim=768,
        config=CONFIG,
        hub_id="hf-hub:prov-gigapath/prov-gigapath",
        licence="Apache-2.0",
        gated=True,
        checkpoint_layout=("slide_encoder.pth (hub prov-gigapath/prov-gigapath, beside the tile encoder's weights): "
                           "{'model': state dict} with cls_token, patch_embed.proj.*, encoder.layers.0-11.*, "
                           "encoder.layer_norm.*, norm.*"),
        uses_coords=True,
        sources=(f"{REPO}/gigapath/slide_encoder.py", f"{REPO}/gigapath/pos_embed.py",
                 f"{REPO}/gigapath/pipeline.py", f"{REPO}/gigapath/preprocessing/data/create_tiles_dataset.py",
                 f"{REPO}/gigapath/torchscale/model/LongNet.py", f"{REPO}/gigapath/torchscale/model/LongNetConfig.py",
                 f"{REPO}/gigapath/torchscale/architecture/encoder.py",
                 f"{REPO}/gigapath/torchscale/component/dilated_attention.py",
                 f"{REPO}/gigapath/torchscale/component/multihead_attention.py",
                 f"{REPO}/demo/run_gigapath.ipynb", f"{REPO}/demo/4_load_slide_encoder.py", f"{REPO}/LICENSE",
                 "https://huggingface.co/prov-gigapath/prov-gigapath"),
        unconfirmed=("the checkpoint file itself was not opened (keys from create_model loading it with no missing or "
                     "unexpected key printed in run_gigapath.ipynb, 86,330,880 parameters, 345 MB); whether it holds "
                     "only tensors besides 'model' (evalsuite reads it with weights_only=True); the grid unit the "
                     "pretraining used (the released pipeline: level-0 px / 256; TRIDENT: level-0 px / tile size); "
                     "the hub card's licence field (the repository's LICENSE is Apache-2.0 since 2025-03-22)"),
        extra={"hub_files": ("slide_encoder.pth",)},
    ),
)


def forward_bytes(spec, tiles: int) -> int:
    """Per token the input row and about 40 widths (all 13 layer outputs kept, q/k/v, five branch outputs, their stack
    and weighted copy), plus three copies of the largest chunk of attention scores (longnet.py holds at most
    _SCORES_PER_CHUNK at once); fitted to the peaks benchmarks/slide_encoders.py measured up to 35,000 tiles."""
    config, tokens = spec.config, tiles + 1
    largest = 0
    for segment_length, ratio in zip(config["segment_lengths"], config["dilation_ratios"]):
        segment = min(segment_length, tokens)
        rows, keys = -(-tokens // segment) * config["heads"], -(-segment // ratio)
        largest = max(largest, min(rows, max(1, _SCORES_PER_CHUNK // (keys * keys))) * keys * keys)
    return 4 * (tokens * (spec.tile_dim + 40 * int(config["width"])) + 3 * largest)
