"""The `titan` entry: the published size on the meta device holds the key names and shapes of TITAN's checkpoint
(config.json's vision_config); a small TITAN with random weights saved in the published layout (`vision_encoder.`,
`blocks.modules_list.N`, with the captioning pooler, the text projection and a text tower the loader drops) loads back
through the builder with identical embeddings; the grid and the ALiBi attention against re-computations from TITAN's
definition (dense grid, index_add, background mask; softmax(qk/sqrt(d) - slope * distance)); the forward's reading of
positions. TITAN's code is on its hub repository only (no package): no comparison against it here."""

import dataclasses
import math

import pytest
import torch
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models.registry import REGISTRY
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide import titan
from evalsuite.models.slide.entries import SLIDE_ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: a second OpenMP thread only waits

SMALL = {"mlp_patch_embed_dim": 12, "embed_dim": 24, "depth": 2, "num_heads": 12, "mlp_ratio": 2.0,
         "attn_pooler_heads": 4}
PATCH_LEVEL0 = 512  # a 20x slide's tile side at level 0 (TITAN's README)


def published_shapes(tile_dim=768, width=768, depth=6, mlp_ratio=4.0, caption_queries=128, vocab=32007,
                     text_tokens=128) -> dict:
    """TITAN's state dict (vision_transformer.py VisionTransformer under `vision_encoder.`, CustomSequential's
    `modules_list`, timm's Mlp, two AttentionalPoolers, `proj`) and a few tensors of the text tower (their names are
    not confirmed; the loader drops the prefix)."""
    v, hidden = "vision_encoder.", int(width * mlp_ratio)
    shapes = {v + "cls_token": (1, 1, width), v + "patch_embed.0.weight": (width, tile_dim),
              v + "patch_embed.0.bias": (width,), v + "norm.weight": (width,), v + "norm.bias": (width,),
              v + "proj": (width, width)}
    for index in range(depth):
        block = f"{v}blocks.modules_list.{index}."
        shapes.update({block + "norm1.weight": (width,), block + "norm1.bias": (width,),
                       block + "attn.qkv.weight": (3 * width, width), block + "attn.qkv.bias": (3 * width,),
                       block + "attn.proj.weight": (width, width), block + "attn.proj.bias": (width,),
                       block + "norm2.weight": (width,), block + "norm2.bias": (width,),
                       block + "mlp.fc1.weight": (hidden, width), block + "mlp.fc1.bias": (hidden,),
                       block + "mlp.fc2.weight": (width, hidden), block + "mlp.fc2.bias": (width,)})
    for pool, queries in (("attn_pool.", caption_queries), ("attn_pool_contrastive.", 1)):
        shapes.update({v + pool + "query": (queries, width), v + pool + "attn.in_proj_weight": (3 * width, width),
                       v + pool + "attn.in_proj_bias": (3 * width,), v + pool + "attn.out_proj.weight": (width, width),
                       v + pool + "attn.out_proj.bias": (width,), v + pool + "ln_q.weight": (width,),
                       v + pool + "ln_q.bias": (width,), v + pool + "ln_k.weight": (width,),
                       v + pool + "ln_k.bias": (width,)})
    shapes.update({"text_encoder.token_embedding.weight": (vocab, width),
                   "text_encoder.positional_embedding": (text_tokens, width), "text_encoder.ln_final.weight": (width,)})
    return shapes


def small_spec():
    return dataclasses.replace(SLIDE_ENCODERS["titan"], tile_dim=SMALL["mlp_patch_embed_dim"],
                               embed_dim=SMALL["embed_dim"], config=dict(SMALL))


def small_slide(tiles=30, side=9, seed=0):
    """(features, coords): tiles on distinct cells of a side x side grid at 20x, off the grid's origin."""
    generator = torch.Generator().manual_seed(seed)
    cells = torch.randperm(side * side, generator=generator)[:tiles]
    coords = torch.stack([cells // side, cells % side], dim=1).float() * PATCH_LEVEL0 + 3000.0
    return torch.randn(tiles, SMALL["mlp_patch_embed_dim"], generator=generator), coords


def test_published_size_has_the_key_names_and_shapes_of_the_published_checkpoint():
    spec = SLIDE_ENCODERS["titan"]
    assert spec.tile_dim == REGISTRY[spec.tile_encoder].embed_dim == 768 and spec.embed_dim == 768
    assert spec.uses_coords and spec.tiling == {"target_mpp": 0.5, "tile_size_px": 512} and spec.magnification == "20x"
    with torch.device("meta"):
        model = titan.build(spec)
    fake = {key: torch.empty(shape, device="meta") for key, shape in published_shapes().items()}
    expected = {key: tuple(value.shape) for key, value in titan.published_keys(fake).items()}
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == expected
    assert not any(key.startswith(("attn_pool.", "text_encoder", "proj")) for key in expected)


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """(the small TITAN, its state in the published layout as model.safetensors)."""
    spec = small_spec()
    monkeypatch.setitem(slide_encoder.SLIDE_ENCODERS, "titan", spec)
    torch.manual_seed(7)
    source = titan.build(spec)
    state = {"vision_encoder." + key.replace("blocks.", "blocks.modules_list.", 1): tensor.clone()
             for key, tensor in source.state_dict().items()}
    dropped = published_shapes(SMALL["mlp_patch_embed_dim"], SMALL["embed_dim"], SMALL["depth"], SMALL["mlp_ratio"],
                               caption_queries=5, vocab=50, text_tokens=9)
    state.update({key: torch.randn(shape) for key, shape in dropped.items() if key not in state})
    save_file(state, tmp_path / "model.safetensors")
    return source, tmp_path / "model.safetensors"


def test_round_trip_through_the_published_layout_gives_the_same_embeddings(saved):
    source, path = saved
    built = slide_encoder.build_slide_encoder("titan", weights=str(path))
    features, coords = small_slide()
    with torch.no_grad():
        embedding = built.model(features, coords, PATCH_LEVEL0)
        assert torch.equal(embedding, source(features, coords, PATCH_LEVEL0))
    assert embedding.shape == (SMALL["embed_dim"],) and embedding.dtype == torch.float32


def test_a_wrong_checkpoint_is_a_one_line_error(saved, tmp_path):
    state = {"image_resampler.perceiver.latents": torch.zeros(3, 4), "vision_encoder.cls_token": torch.zeros(1, 1, 9)}
    save_file(state, tmp_path / "wrong.safetensors")
    with pytest.raises(EvalsuiteError, match="missing keys .*wrong shapes 1 \\[cls_token\\]") as raised:
        slide_encoder.build_slide_encoder("titan", weights=str(tmp_path / "wrong.safetensors"))
    assert "\n" not in str(raised.value)


def _dense_grid(features, coords, patch_size_level0):
    """TITAN's preprocess_features from its definition: an [H, W, C] grid of zeros, each tile added at its cell,
    the cells whose features are all zero as background, the rest in row-major order."""
    cells = torch.div(coords - coords.min(dim=0).values, patch_size_level0, rounding_mode="floor").long()
    rows, columns = (cells.max(dim=0).values + 1).tolist()
    grid = torch.zeros(rows, columns, features.shape[1])
    for tile, (row, column) in enumerate(cells.tolist()):
        grid[row, column] += features[tile]
    foreground = (grid != 0).any(dim=-1)
    return grid[foreground], foreground.nonzero()


def test_the_grid_is_titans_overlapping_tiles_summed_and_empty_cells_dropped_in_any_tile_order():
    # a 7 x 5 lattice at half a tile's stride: 2 to 4 tiles per cell; one all-zero tile; one whole cell of zeros
    coords = torch.stack(torch.meshgrid(torch.arange(7), torch.arange(5), indexing="ij"), -1).reshape(-1, 2) * 256.0
    features = torch.randn(len(coords), 6)
    features[3] = 0
    features[(coords[:, 0] >= 1536) & (coords[:, 1] < 512)] = 0
    shuffled = torch.randperm(len(coords))
    tokens, cells = titan.grid_tokens(features[shuffled], coords[shuffled] + 77.0, PATCH_LEVEL0)
    expected_tokens, expected_cells = _dense_grid(features, coords, PATCH_LEVEL0)
    assert torch.equal(cells, expected_cells) and len(cells) == 4 * 3 - 1
    torch.testing.assert_close(tokens, expected_tokens, atol=1e-6, rtol=0)


def test_alibi_slopes_for_twelve_heads_are_those_of_eight_then_every_other_of_sixteen():
    assert titan.alibi_slopes(8) == [2.0 ** -k for k in range(1, 9)]
    assert titan.alibi_slopes(12) == pytest.approx([2.0 ** -k for k in range(1, 9)] + [2.0 ** -k for k in
                                                                                       (0.5, 1.5, 2.5, 3.5)])


def test_attention_is_softmax_of_scaled_scores_minus_slope_times_grid_distance():
    torch.manual_seed(0)
    width, heads = 24, 12
    attention = titan.BiasedAttention(width, heads)
    cells = torch.tensor([[0, 0], [0, 3], [2, 1], [5, 5]])
    x = torch.randn(len(cells) + 1, width)  # the CLS token first
    distance = torch.zeros(len(x), len(x))
    for i, (a, b) in enumerate(cells.tolist()):
        for j, (c, d) in enumerate(cells.tolist()):
            distance[i + 1, j + 1] = math.hypot(a - c, b - d)
    q, k, v = attention.qkv(x).reshape(len(x), 3, heads, width // heads).permute(1, 2, 0, 3)
    slopes = torch.tensor(titan.alibi_slopes(heads)).view(heads, 1, 1)
    scores = q @ k.transpose(1, 2) / math.sqrt(width // heads) - slopes * distance
    expected = attention.proj((scores.softmax(dim=-1) @ v).transpose(0, 1).reshape(len(x), width))
    with torch.no_grad():
        torch.testing.assert_close(attention(x, titan.token_distances(cells)), expected, atol=1e-6, rtol=0)


def test_the_embedding_reads_positions_not_tile_order_nor_the_slides_offset():
    torch.manual_seed(1)
    model = titan.build(small_spec())
    features, coords = small_slide()
    with torch.no_grad():
        embedding = model(features, coords, PATCH_LEVEL0)
        order = torch.randperm(len(features))
        torch.testing.assert_close(model(features[order], coords[order] + 12_345.0, PATCH_LEVEL0), embedding)
        spread = model(features, coords * 2, PATCH_LEVEL0)  # the same tiles, twice as far apart
        assert not torch.allclose(spread, embedding, atol=1e-4)
        with_zero_tile = model(torch.cat([features, torch.zeros(1, features.shape[1])]),
                               torch.cat([coords, torch.tensor([[0.0, 0.0]])]), PATCH_LEVEL0)
        torch.testing.assert_close(with_zero_tile, embedding)  # an all-zero tile is background
        one = model(features[:1], coords[:1], PATCH_LEVEL0)
        assert one.shape == (SMALL["embed_dim"],) and torch.isfinite(one).all()
        with pytest.raises(ValueError, match="tiles >= 1"):
            model(features[:0], coords[:0], PATCH_LEVEL0)
