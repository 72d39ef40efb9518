"""The FEATHER entries (feather-conch-v1.5, feather-uni2): the published sizes on the meta device hold the key names
and shapes of MIL-Lab's ABMILModel and the parameter count MIL-Lab's README states; a small FEATHER with random
weights saved in the published layout (`model.` prefix, a PC-108 classifier) loads back through the builder with
identical embeddings; the forward against a re-computation from MIL-Lab's definition with torch primitives (MIL-Lab
and TRIDENT are GitHub-only: no package to compare against); a set function of the tiles that ignores positions."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models.registry import REGISTRY
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide import feather
from evalsuite.models.slide.entries import SLIDE_ENCODERS

NAMES = ("feather-conch-v1.5", "feather-uni2")
SMALL = {"embed_dim": 8, "attn_dim": 6, "num_fc_layers": 1}
CLASSES = 108  # PC-108: the classifier a checkpoint may carry, dropped on load


def published_shapes(tile_dim: int, embed_dim: int = 512, attn_dim: int = 384) -> dict:
    """MIL-Lab's ABMILModel state dict (abmil/base.yaml sizes): `model.` + create_mlp's Linear, GlobalGatedAttention."""
    return {
        "model.patch_embed.0.weight": (embed_dim, tile_dim), "model.patch_embed.0.bias": (embed_dim,),
        "model.global_attn.attention_a.0.weight": (attn_dim, embed_dim), "model.global_attn.attention_a.0.bias": (attn_dim,),
        "model.global_attn.attention_b.0.weight": (attn_dim, embed_dim), "model.global_attn.attention_b.0.bias": (attn_dim,),
        "model.global_attn.attention_c.weight": (1, attn_dim), "model.global_attn.attention_c.bias": (1,),
        "model.classifier.weight": (CLASSES, embed_dim), "model.classifier.bias": (CLASSES,),
    }


def small_spec(name: str):
    return dataclasses.replace(SLIDE_ENCODERS[name], tile_dim=12, embed_dim=SMALL["embed_dim"], config=dict(SMALL))


@pytest.mark.parametrize("name", NAMES)
def test_published_size_has_the_key_names_and_shapes_of_the_published_checkpoint(name):
    spec = SLIDE_ENCODERS[name]
    assert spec.tile_dim == REGISTRY[spec.tile_encoder].embed_dim and spec.embed_dim == 512 and not spec.uses_coords
    with torch.device("meta"):
        model = feather.build(spec)
    fake = {key: torch.empty(shape, device="meta") for key, shape in published_shapes(spec.tile_dim).items()}
    expected = {key: tuple(value.shape) for key, value in feather.published_keys(fake).items()}
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == expected
    # without the prefix (MIL-Lab's own pytorch_model.bin) the same tensors
    unprefixed = {key.removeprefix("model."): value for key, value in fake.items()}
    assert feather.published_keys(unprefixed).keys() == expected.keys()


def test_parameter_count_is_the_readmes_for_the_uni_variant():
    """MIL-Lab's README: FEATHER-24K has 0.9M parameters (the UNI variant's 1024-d input; the classifier excluded)."""
    spec = dataclasses.replace(SLIDE_ENCODERS["feather-conch-v1.5"], tile_dim=1024)
    with torch.device("meta"):
        count = sum(p.numel() for p in feather.build(spec).parameters())
    assert count == 919_169 and round(count / 1e6, 1) == 0.9


def _reference(state: dict, tiles: torch.Tensor) -> torch.Tensor:
    """MIL-Lab's ABMIL.forward_features from its definition: ReLU(Linear) patch embedding, tanh x sigmoid gated
    scores, softmax over the tiles, the score-weighted sum of the embedded tiles."""
    h = F.relu(F.linear(tiles, state["model.patch_embed.0.weight"], state["model.patch_embed.0.bias"]))
    p = "model.global_attn."
    a = torch.tanh(F.linear(h, state[p + "attention_a.0.weight"], state[p + "attention_a.0.bias"]))
    b = torch.sigmoid(F.linear(h, state[p + "attention_b.0.weight"], state[p + "attention_b.0.bias"]))
    scores = F.linear(a * b, state[p + "attention_c.weight"], state[p + "attention_c.bias"])  # [tiles, 1]
    return (F.softmax(scores.T, dim=-1) @ h)[0]


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """(published-layout state, model.safetensors) of a small feather-conch-v1.5 with random weights."""
    spec = small_spec("feather-conch-v1.5")
    monkeypatch.setitem(slide_encoder.SLIDE_ENCODERS, spec.name, spec)
    generator = torch.Generator().manual_seed(3)
    state = {key: torch.randn(shape, generator=generator)
             for key, shape in published_shapes(spec.tile_dim, SMALL["embed_dim"], SMALL["attn_dim"]).items()}
    save_file(state, tmp_path / "model.safetensors")
    return state, tmp_path / "model.safetensors"


def test_round_trip_through_the_published_layout_and_against_the_definition(saved):
    state, path = saved
    built = slide_encoder.build_slide_encoder("feather-conch-v1.5", weights=str(path))
    tiles = torch.randn(37, 12, generator=torch.Generator().manual_seed(5))
    coords = torch.randint(0, 10_000, (37, 2)).float()
    with torch.no_grad():
        embedding = built.model(tiles, coords, 512)
        again = slide_encoder.build_slide_encoder("feather-conch-v1.5", weights=str(path.parent)).model(tiles, coords,
                                                                                                       512)
    assert embedding.shape == (SMALL["embed_dim"],) and embedding.dtype == torch.float32
    assert torch.equal(embedding, again)
    torch.testing.assert_close(embedding, _reference(state, tiles), atol=1e-6, rtol=0)


def test_a_wrong_checkpoint_is_a_one_line_error(saved, tmp_path):
    state, _ = saved
    wrong = dict(state, **{"model.patch_embed.0.weight": torch.zeros(SMALL["embed_dim"], 13)})
    save_file(wrong, tmp_path / "wrong.safetensors")
    with pytest.raises(EvalsuiteError, match="wrong shapes 1 \\[patch_embed.0.weight\\]") as raised:
        slide_encoder.build_slide_encoder("feather-conch-v1.5", weights=str(tmp_path / "wrong.safetensors"))
    assert "\n" not in str(raised.value)


def test_a_set_function_of_the_tiles_blind_to_positions_and_one_tile_is_its_embedding():
    model = feather.build(small_spec("feather-uni2"))
    tiles = torch.randn(9, 12)
    with torch.no_grad():
        embedding = model(tiles, torch.zeros(9, 2), 256)
        shuffled = torch.randperm(9)
        torch.testing.assert_close(model(tiles[shuffled], torch.rand(9, 2) * 1e4, 512), embedding)
        one = model(tiles[:1], torch.zeros(1, 2), 256)
        torch.testing.assert_close(one, model.patch_embed(tiles[:1])[0])  # softmax over one tile is 1
        with pytest.raises(ValueError, match="tiles >= 1"):
            model(tiles[:0], torch.zeros(0, 2), 256)
