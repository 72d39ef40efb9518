"""The `madeleine` entry: the published size on the meta device holds the key names and shapes MADELEINE's code gives
its model (4 heads of 512 on 512-d CONCH features); a small MADELEINE with random weights saved as MADELEINE's
`model.pt` (a DDP `module.` prefix and the pretraining token projector included) loads back through the builder
with identical embeddings; the forward against a re-computation of `encode_he` from its definition with torch
primitives, heads interleaved as einops splits them (MADELEINE and TRIDENT are GitHub-only: no package to compare
against); a set function of the tiles that ignores positions."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from slide_round_trip import embed_loaded_twice

from evalsuite.errors import EvalsuiteError
from evalsuite.models.registry import REGISTRY
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide import madeleine
from evalsuite.models.slide.entries import SLIDE_ENCODERS

SMALL = {"hidden_dim": 8, "n_heads": 3, "attn_hidden_dim": 8}
TILE_DIM = 10
TOKEN_DIM = 128  # MADELEINE's token_projector output (fixed in Model.py)


def published_shapes(tile_dim: int = 512, hidden: int = 512, heads: int = 4, attn_hidden: int = 512) -> dict:
    """MADELEINE(config, stain_encoding=False).state_dict(): ABMILEmbedder's pre_attn (Linear/LayerNorm at 0, 1, 4,
    5, 8, 9), one BatchedABMIL per head, projector, token_projector."""
    shapes = {}
    for index, (out, into) in zip((0, 4, 8), ((hidden, tile_dim), (hidden, hidden), (hidden * heads, hidden))):
        p = f"wsi_embedders.pre_attn.{index}."
        shapes.update({p + "weight": (out, into), p + "bias": (out,)})
        shapes.update({f"wsi_embedders.pre_attn.{index + 1}.weight": (out,),
                       f"wsi_embedders.pre_attn.{index + 1}.bias": (out,)})
    for head in range(heads):
        p = f"wsi_embedders.attn.{head}."
        shapes.update({p + "attention_a.0.weight": (attn_hidden, hidden), p + "attention_a.0.bias": (attn_hidden,),
                       p + "attention_b.0.weight": (attn_hidden, hidden), p + "attention_b.0.bias": (attn_hidden,),
                       p + "attention_c.weight": (1, attn_hidden), p + "attention_c.bias": (1,)})
    shapes.update({"projector.weight": (attn_hidden, attn_hidden * heads), "projector.bias": (attn_hidden,),
                   "token_projector.weight": (TOKEN_DIM, attn_hidden * heads), "token_projector.bias": (TOKEN_DIM,)})
    return shapes


def small_spec():
    return dataclasses.replace(SLIDE_ENCODERS["madeleine"], tile_dim=TILE_DIM, embed_dim=SMALL["attn_hidden_dim"],
                               config=dict(SMALL))


def test_published_size_has_the_key_names_and_shapes_of_madeleines_model():
    spec = SLIDE_ENCODERS["madeleine"]
    assert spec.tile_dim == REGISTRY[spec.tile_encoder].embed_dim == 512 and spec.embed_dim == 512
    assert spec.magnification == "10x" and spec.tiling["tile_size_px"] == 256 and not spec.uses_coords
    with torch.device("meta"):
        model = madeleine.build(spec)
    fake = {key: torch.empty(shape, device="meta") for key, shape in published_shapes().items()}
    expected = {key: tuple(value.shape) for key, value in madeleine.published_keys(fake).items()}
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == expected
    assert not any(key.startswith("token_projector.") for key in expected)


def _reference(state: dict, tiles: torch.Tensor, heads: int) -> torch.Tensor:
    """MADELEINE's encode_he from its definition: pre_attn (Linear, LayerNorm, GELU x 3), einops
    'b t (e c) -> b t e c' (head c reads channels c::heads), per head gated scores, softmax over the tiles and the
    weighted sum, view(bs, e * c) (the same interleaving back), projector."""
    h = tiles
    for index in (0, 4, 8):
        p = "wsi_embedders.pre_attn."
        h = F.linear(h, state[f"{p}{index}.weight"], state[f"{p}{index}.bias"])
        h = F.gelu(F.layer_norm(h, h.shape[-1:], state[f"{p}{index + 1}.weight"], state[f"{p}{index + 1}.bias"]))
    flat = torch.zeros(h.shape[-1])
    for head in range(heads):
        p = f"wsi_embedders.attn.{head}."
        x = h[:, head::heads]
        a = torch.tanh(F.linear(x, state[p + "attention_a.0.weight"], state[p + "attention_a.0.bias"]))
        b = torch.sigmoid(F.linear(x, state[p + "attention_b.0.weight"], state[p + "attention_b.0.bias"]))
        weights = F.softmax(F.linear(a * b, state[p + "attention_c.weight"], state[p + "attention_c.bias"]), dim=0)
        flat[head::heads] = (x * weights).sum(0)
    return F.linear(flat, state["projector.weight"], state["projector.bias"])


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """(published-layout state, model.pt) of a small MADELEINE with random weights, saved as DDP would (module.)."""
    spec = small_spec()
    monkeypatch.setitem(slide_encoder.SLIDE_ENCODERS, spec.name, spec)
    generator = torch.Generator().manual_seed(4)
    state = {key: torch.randn(shape, generator=generator)
             for key, shape in published_shapes(TILE_DIM, SMALL["hidden_dim"], SMALL["n_heads"],
                                                SMALL["attn_hidden_dim"]).items()}
    torch.save({f"module.{key}": value for key, value in state.items()}, tmp_path / "model.pt")
    return state, tmp_path / "model.pt"


def test_round_trip_through_the_published_layout_and_against_the_definition(saved):
    state, path = saved
    tiles, embedding, again = embed_loaded_twice("madeleine", path, TILE_DIM)
    assert embedding.shape == (SMALL["attn_hidden_dim"],) and embedding.dtype == torch.float32
    assert torch.equal(embedding, again)
    torch.testing.assert_close(embedding, _reference(state, tiles, SMALL["n_heads"]), atol=1e-6, rtol=0)


def test_a_wrong_checkpoint_is_a_one_line_error(saved, tmp_path):
    state, _ = saved
    wrong = {key: value for key, value in state.items() if key != "projector.bias"}
    torch.save(wrong, tmp_path / "wrong.pt")
    with pytest.raises(EvalsuiteError, match="missing keys 1 \\[projector.bias\\]") as raised:
        slide_encoder.build_slide_encoder("madeleine", weights=str(tmp_path / "wrong.pt"))
    assert "\n" not in str(raised.value)


def test_a_set_function_of_the_tiles_blind_to_positions_and_one_tile_works():
    model = madeleine.build(small_spec())
    tiles = torch.randn(7, TILE_DIM)
    with torch.no_grad():
        embedding = model(tiles, torch.zeros(7, 2), 256)
        shuffled = torch.randperm(7)
        torch.testing.assert_close(model(tiles[shuffled], torch.rand(7, 2) * 1e4, 512), embedding)
        one = model(tiles[:1], torch.zeros(1, 2), 256)  # softmax over one tile is 1: the projected embedded tile
        torch.testing.assert_close(one, model.projector(model.wsi_embedders.pre_attn(tiles[:1])[0]))
        with pytest.raises(ValueError, match="tiles >= 1"):
            model(torch.randn(3, TILE_DIM + 1), torch.zeros(3, 2), 256)
