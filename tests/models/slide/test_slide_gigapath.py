"""The `gigapath-slide` entry: Prov-GigaPath's slide encoder (LongNet). The published size on the meta device has
LongNetViT's keys and the parameter count the authors' notebook prints; a small config with random weights saved as
slide_encoder.pth ({"model": state dict}) loads back through build_slide_encoder with identical embeddings; the
encoder is recomputed with PyPI torchscale 0.3.0's Encoder (the same layers gigapath bundles) around a dilated
attention written here by enumeration, with MAE's sin-cos table built here as a whole table; the forward depends on
coordinates, works for one tile, and refuses tiles beyond the position grid in one line."""

import dataclasses
import importlib.util
import math

import numpy as np
import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide import gigapath_slide
from evalsuite.models.slide.entries import SLIDE_ENCODERS

NAME = "gigapath-slide"
TILE_DIM = 12
# Two layers 16 wide, 4 heads; segment lengths that make the original pad segments (5 with ratio 2), pad heads
# (ratio 8 over 4 heads) and cut the sequence into several segments, for 13 tokens (CLS + 12 tiles).
SMALL = {**gigapath_slide.CONFIG, "width": 16, "depth": 2, "heads": 4, "ffn_hidden": 32,
         "segment_lengths": (4, 5, 8, 64), "dilation_ratios": (1, 2, 4, 8), "grid_cells": 50}
pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: a second OpenMP thread only waits
needs_torchscale = pytest.mark.skipif(
    importlib.util.find_spec("torchscale") is None or importlib.util.find_spec("fairscale") is None,
    reason="PyPI torchscale is not installed (pip install --no-deps torchscale==0.3.0 fairscale==0.4.0)")


def small_spec(**config):
    spec = SLIDE_ENCODERS[NAME]
    return dataclasses.replace(spec, tile_dim=TILE_DIM, embed_dim=SMALL["width"], config={**SMALL, **config})


def slide(tiles=12, seed=0, patch_px=256):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(tiles, TILE_DIM, generator=generator)
    cells = torch.randperm(20 * 20, generator=generator)[:tiles]  # within half the small grid's 50 x 50 cells
    coords = torch.stack([cells // 20, cells % 20], dim=1).float() * patch_px
    return features, coords


def random_model(spec, seed=3):
    torch.manual_seed(seed)
    model = gigapath_slide.build(spec)
    with torch.no_grad():  # LayerNorms and the CLS token away from their initial values, so that loading shows
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.eval()


def test_published_size_has_longnetvit_keys_and_the_notebooks_parameter_count():
    spec = SLIDE_ENCODERS[NAME]
    assert (spec.tile_encoder, spec.tile_dim, spec.embed_dim, spec.uses_coords) == ("prov-gigapath", 1536, 768, True)
    assert spec.tiling == {"target_mpp": 0.5, "tile_size_px": 256} and spec.magnification == "20x"
    with torch.device("meta"):
        model = gigapath_slide.build(spec)
    state = model.state_dict()
    # run_gigapath.ipynb: "Number of trainable LongNet parameters: 85148160", "Slide encoder param # 86330880".
    assert sum(p.numel() for p in model.encoder.parameters()) == 85_148_160
    assert sum(p.numel() for p in model.parameters()) == 86_330_880 and len(state) == 247
    layer = {"self_attn.q_proj.weight": (768, 768), "self_attn.k_proj.bias": (768,),
             "self_attn.v_proj.weight": (768, 768), "self_attn.out_proj.weight": (768, 768),
             "self_attn.inner_attn_ln.weight": (768,),
              "self_attn_layer_norm.bias": (768,), "ffn.fc1.weight": (3072, 768), "ffn.fc2.weight": (768, 3072),
              "ffn.ffn_layernorm.weight": (3072,), "final_layer_norm.weight": (768,)}
    shapes = {"cls_token": (1, 1, 768), "patch_embed.proj.weight": (768, 1536), "patch_embed.proj.bias": (768,),
              "encoder.layer_norm.weight": (768,), "norm.weight": (768,), "norm.bias": (768,),
              **{f"encoder.layers.11.{key}": shape for key, shape in layer.items()}}
    assert {key: tuple(state[key].shape) for key in shapes} == shapes
    assert not any(key.startswith("encoder.layers.12.") for key in state)
    # The file's "model" dict, a saved position table added, maps onto the module's keys exactly.
    published = {**{key: torch.empty(0) for key in state}, "pos_embed": torch.empty(0)}
    assert set(gigapath_slide.published_keys(published)) == set(state)


def test_segment_lengths_are_gigapaths_formula_for_its_largest_slide():
    """get_optimal_segment_length(262144, 256): 5 lengths log-spaced from 1024 to (262144 // 256) ** 2, truncated."""
    tokens = (262144 // 256) ** 2
    lengths = tuple(int(x) for x in 2.0 ** np.linspace(10, math.log2(tokens), 5))
    assert lengths == gigapath_slide.CONFIG["segment_lengths"] == (1024, 5792, 32768, 185363, 1048576)


@pytest.fixture
def saved(monkeypatch, tmp_path):
    """A small model with random weights saved as the authors publish it: slide_encoder.pth = {"model": state}."""
    spec = small_spec()
    monkeypatch.setitem(SLIDE_ENCODERS, NAME, spec)
    model = random_model(spec)
    path = tmp_path / "slide_encoder.pth"
    torch.save({"model": model.state_dict()}, path)
    return model, path


def test_round_trip_through_build_slide_encoder_gives_identical_embeddings(saved):
    reference, path = saved
    loaded = slide_encoder.build_slide_encoder(NAME, weights=str(path))
    assert loaded.weights_id.startswith("sha256:") and loaded.embed_dim == SMALL["width"]
    assert not loaded.model.training and not any(p.requires_grad for p in loaded.model.parameters())
    features, coords = slide()
    with torch.no_grad():
        expected = reference(features, coords, 256)
        got = loaded.model(features, coords, 256)
    assert got.shape == (SMALL["width"],) and got.dtype == torch.float32
    assert torch.equal(got, expected)


def test_a_wrong_checkpoint_is_one_line_naming_the_file(saved):
    reference, path = saved
    state = reference.state_dict()
    state["head.weight"] = state.pop("norm.weight")
    torch.save({"model": state}, path)
    with pytest.raises(EvalsuiteError, match=r"slide_encoder.pth do not fit .*missing keys.*norm.weight"
                                             r".*unexpected keys.*head.weight") as error:
        slide_encoder.build_slide_encoder(NAME, weights=str(path))
    assert "\n" not in str(error.value)


def test_the_embedding_depends_on_where_the_tiles_lie_and_one_tile_works():
    model = random_model(small_spec())
    features, coords = slide()
    with torch.no_grad():
        base = model(features, coords, 256)
        moved = model(features, coords + torch.tensor([256.0, 0.0]), 256)
        within_cells = model(features, coords + 255.0, 256)  # the same cells: floor(coords / 256)
        one = model(features[:1], coords[:1], 256)
    assert not torch.allclose(base, moved, atol=1e-4)
    assert torch.equal(base, within_cells)
    assert one.shape == (SMALL["width"],) and torch.isfinite(one).all()


def test_the_grid_unit_is_256_level0_px_as_gigapaths_pipeline_or_the_tile_size_when_asked():
    features, coords = slide(patch_px=512)  # a 0.25 um/px scan: tiles of 256 px at 0.5 um/px are 512 px at level 0
    pipeline = random_model(small_spec())
    per_tile = random_model(small_spec(grid_px_level0=None))
    with torch.no_grad():
        # gigapath's pipeline divides level-0 coordinates by 256 whatever the tile's level-0 size: cells 2 apart.
        assert torch.equal(pipeline(features, coords, 512), pipeline(features, coords, 999))
        assert torch.equal(pipeline(features, coords, 512), per_tile(features, coords, 256))
        # TRIDENT's unit, the tile's level-0 size: one cell per tile, another embedding.
        assert torch.equal(per_tile(features, coords, 512), per_tile(features, coords / 2, 256))
        assert not torch.allclose(per_tile(features, coords, 512), pipeline(features, coords, 512), atol=1e-4)


def test_the_embedding_depends_on_the_tiles_order_as_the_originals_does():
    """Dilated attention reads positions in sequence order (segments, residues): the tiles' order is part of the
    input, as in gigapath's own code, which does not sort them."""
    model = random_model(small_spec())
    features, coords = slide()
    order = torch.randperm(len(features), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert not torch.allclose(model(features, coords, 256), model(features[order], coords[order], 256), atol=1e-4)


def test_a_tile_beyond_the_position_grid_is_refused_in_one_line():
    model = random_model(small_spec())
    features, coords = slide()
    coords[3] = torch.tensor([50 * 256.0, 0.0])  # x cell 50 of a 50 x 50 grid
    with pytest.raises(EvalsuiteError, match=r"\(12800, 0\) falls outside .* 50 x 50 position grid") as error:
        model(features, coords, 256)
    assert "\n" not in str(error.value)


def reference_dilated_attention(q, k, v, segment_lengths, ratios):
    """[L, H, D] -> [L, H, D]: the original's dilated attention by enumeration, in float64. Per branch the sequence
    is laid out as zero-padded segments of zero-padded length; head h reads the slots congruent to its group mod r;
    every slot's query attends to its segment's slots of that residue (zeros included); the result of slot (j, t)
    lands at j * padded + t; all branches' terms for a position form one softmax."""
    length, heads, dim = q.shape
    numerator = torch.zeros(length, heads, dim, dtype=torch.float64)
    denominator = torch.zeros(length, heads, 1, dtype=torch.float64)
    zero = torch.zeros(dim, dtype=torch.float64)
    for segment_length, ratio in zip(segment_lengths, ratios):
        width = min(segment_length, length)
        padded = math.ceil(width / ratio) * ratio
        for segment in range(math.ceil(length / width)):
            for head in range(heads):
                residue = head // math.ceil(heads / ratio)
                slots = [t for t in range(padded) if t % ratio == residue]
                tokens = [segment * width + t if t < width and segment * width + t < length else None for t in slots]
                keys = torch.stack([k[i, head].double() if i is not None else zero for i in tokens])
                values = torch.stack([v[i, head].double() if i is not None else zero for i in tokens])
                for slot, token in zip(slots, tokens):
                    position = segment * padded + slot
                    if position >= length:
                        continue
                    query = q[token, head].double() if token is not None else zero
                    weights = torch.exp(keys @ query / math.sqrt(dim))
                    numerator[position, head] += weights @ values
                    denominator[position, head] += weights.sum()
    return (numerator / denominator).float()


def torchscale_reference(model, config):
    """PyPI torchscale's Encoder with the module's weights loaded strictly, its attention core replaced."""
    from torchscale.architecture.config import EncoderConfig
    from torchscale.architecture.encoder import Encoder, EncoderLayer
    from torchscale.component.multihead_attention import MultiheadAttention

    class DilatedByEnumeration(MultiheadAttention):
        def forward(self, query, key, value, **_):
            project = [proj(x)[0].unflatten(-1, (self.num_heads, -1)) for proj, x in
                       ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value))]
            attended = reference_dilated_attention(*project, config["segment_lengths"], config["dilation_ratios"])
            return self.out_proj(self.inner_attn_ln(attended.flatten(1).unsqueeze(0))), None

    class Layer(EncoderLayer):
        def build_self_attention(self, embed_dim, args):
            return DilatedByEnumeration(args, embed_dim, args.encoder_attention_heads, self_attention=True,
                                        subln=args.subln)

    class LongNet(Encoder):
        def build_encoder_layer(self, args, depth, is_moe_layer=False, is_encoder_decoder=False):
            return Layer(args, depth, is_moe_layer=is_moe_layer, is_encoder_decoder=is_encoder_decoder)

    args = EncoderConfig(encoder_embed_dim=config["width"], encoder_attention_heads=config["heads"],
                         encoder_ffn_embed_dim=config["ffn_hidden"], encoder_layers=config["depth"])
    encoder = LongNet(args).eval()
    encoder.load_state_dict(model.encoder.state_dict(), strict=True)
    return encoder


def mae_table(width, cells):
    """MAE's 2-D sin-cos table for a cells x cells grid, a zero row first (the CLS token's)."""
    rates = 1.0 / 10000 ** (np.arange(width // 4) / (width / 4))
    column, row = np.meshgrid(np.arange(cells), np.arange(cells))  # row-major cells: flat index row * cells + column

    def encode(values):
        angles = values.reshape(-1)[:, None] * rates[None]
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)

    table = np.concatenate([encode(column), encode(row)], axis=1)
    return torch.from_numpy(np.concatenate([np.zeros((1, width)), table])).float()


@needs_torchscale
def test_recomputed_with_pypi_torchscale_and_an_enumerated_dilated_attention():
    config = small_spec().config
    model = random_model(small_spec())
    encoder = torchscale_reference(model, config)
    features, coords = slide()
    table = mae_table(config["width"], config["grid_cells"])
    rows = (torch.floor(coords / 256)[:, 0] * config["grid_cells"] + torch.floor(coords / 256)[:, 1]).long() + 1
    with torch.no_grad():
        tiles = model.patch_embed["proj"](features) + table[rows]
        tokens = torch.cat([model.cls_token[0] + table[:1], tiles]).unsqueeze(0)
        out = encoder(src_tokens=None, token_embeddings=tokens, return_all_hiddens=True)
        final = model.norm(out["encoder_out"][0, 1:].mean(0))
        layer_one = model.norm(out["encoder_states"][1][0, 1:].mean(0))
        torch.testing.assert_close(model(features, coords, 256), final, rtol=0, atol=1e-5)
        model.config["readout"] = 1
        torch.testing.assert_close(model(features, coords, 256), layer_one, rtol=0, atol=1e-5)
