"""The `chief` entry: the published size on the meta device holds the key names and shapes of CHIEF.py's
CHIEF(size_arg="small") that the `WSI_feature` path uses; a small CHIEF with random weights saved as
CHIEF_pretraining.pth (a plain state dict, the anatomical-site table, its projection and the pretraining heads
included) loads back through the builder with identical embeddings; the forward against a re-computation of
`WSI_feature` from its definition with torch primitives (CHIEF is GitHub-only: no package to compare against);
the site side never enters the embedding; a set function of the tiles that ignores positions."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from slide_round_trip import embed_loaded_twice

from evalsuite.errors import EvalsuiteError
from evalsuite.models.registry import REGISTRY
from evalsuite.models.slide import chief
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide.entries import SLIDE_ENCODERS

SMALL = {"hidden_dim": 8, "attn_hidden_dim": 6}
TILE_DIM = 10
SITES, SITE_DIM = 19, 768  # configs/anatomic_mapping.yaml; CLIP text embeddings (Text_emdding.pth, fixed in CHIEF.py)


def published_shapes(tile_dim: int = 768, hidden: int = 512, attn_hidden: int = 256) -> dict:
    """CHIEF(size_arg="small", dropout=True, n_classes=2).state_dict(): attention_net = [Linear, ReLU, Dropout,
    Attn_Net_Gated], classifiers, one instance classifier per class, att_head, text_to_vision, organ_embedding."""
    shapes = {"attention_net.0.weight": (hidden, tile_dim), "attention_net.0.bias": (hidden,)}
    for branch in ("a", "b"):
        shapes.update({f"attention_net.3.attention_{branch}.0.weight": (attn_hidden, hidden),
                       f"attention_net.3.attention_{branch}.0.bias": (attn_hidden,)})
    shapes.update({"attention_net.3.attention_c.weight": (1, attn_hidden), "attention_net.3.attention_c.bias": (1,),
                   "classifiers.weight": (2, hidden), "classifiers.bias": (2,),
                   "att_head.fc1.weight": (attn_hidden, hidden), "att_head.fc1.bias": (attn_hidden,),
                   "att_head.fc2.weight": (1, attn_hidden), "att_head.fc2.bias": (1,),
                   "text_to_vision.0.weight": (hidden, SITE_DIM), "text_to_vision.0.bias": (hidden,),
                   "organ_embedding": (SITES, SITE_DIM)})
    for index in range(2):
        shapes.update({f"instance_classifiers.{index}.weight": (2, hidden), f"instance_classifiers.{index}.bias": (2,)})
    return shapes


def small_spec():
    return dataclasses.replace(SLIDE_ENCODERS["chief"], tile_dim=TILE_DIM, embed_dim=TILE_DIM, config=dict(SMALL))


def test_published_size_has_the_key_names_and_shapes_of_chiefs_model():
    spec = SLIDE_ENCODERS["chief"]
    assert spec.tile_dim == REGISTRY[spec.tile_encoder].embed_dim == 768 and spec.embed_dim == 768
    assert spec.magnification == "10x" and spec.tiling["tile_size_px"] == 256 and not spec.uses_coords
    with torch.device("meta"):
        model = chief.build(spec)
    fake = {key: torch.empty(shape, device="meta") for key, shape in published_shapes().items()}
    expected = {key: tuple(value.shape) for key, value in chief.published_keys(fake).items()}
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == expected
    assert sorted(expected) == sorted(k for k in published_shapes() if k.startswith("attention_net."))


def _reference(state: dict, tiles: torch.Tensor, site: int) -> dict:
    """CHIEF.forward from its definition: scores from the hidden features, softmax over the tiles; `WSI_feature`
    is the weighted sum of the input tiles, `WSI_feature_anatomical` that of the hidden ones plus the site's
    projected text embedding."""
    h = F.relu(F.linear(tiles, state["attention_net.0.weight"], state["attention_net.0.bias"]))
    a = torch.tanh(F.linear(h, state["attention_net.3.attention_a.0.weight"],
                            state["attention_net.3.attention_a.0.bias"]))
    b = torch.sigmoid(F.linear(h, state["attention_net.3.attention_b.0.weight"],
                               state["attention_net.3.attention_b.0.bias"]))
    scores = F.linear(a * b, state["attention_net.3.attention_c.weight"], state["attention_net.3.attention_c.bias"])
    weights = F.softmax(scores.T, dim=1)  # [1, tiles]
    site_embedding = F.relu(F.linear(state["organ_embedding"][site], state["text_to_vision.0.weight"],
                                     state["text_to_vision.0.bias"]))
    return {"WSI_feature": (weights @ tiles)[0], "WSI_feature_anatomical": (weights @ h)[0] + site_embedding}


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """(published-layout state, CHIEF_pretraining.pth) of a small CHIEF with random weights."""
    spec = small_spec()
    monkeypatch.setitem(slide_encoder.SLIDE_ENCODERS, spec.name, spec)
    generator = torch.Generator().manual_seed(4)
    shapes = published_shapes(TILE_DIM, SMALL["hidden_dim"], SMALL["attn_hidden_dim"])
    state = {key: torch.randn(shape, generator=generator) for key, shape in shapes.items()}
    torch.save(state, tmp_path / "CHIEF_pretraining.pth")  # the authors load it as a plain state dict
    return state, tmp_path / "CHIEF_pretraining.pth"


def test_round_trip_through_the_published_layout_and_against_the_definition(saved):
    state, path = saved
    tiles, embedding, again = embed_loaded_twice("chief", path, TILE_DIM)
    assert embedding.shape == (TILE_DIM,) and embedding.dtype == torch.float32
    assert torch.equal(embedding, again)
    for site in (0, 13):  # TRIDENT's and the authors' example site: WSI_feature does not depend on it
        torch.testing.assert_close(embedding, _reference(state, tiles, site)["WSI_feature"], atol=1e-6, rtol=0)
    anatomical = [_reference(state, tiles, site)["WSI_feature_anatomical"] for site in (0, 13)]
    assert not torch.allclose(*anatomical)  # the site enters only the output evalsuite does not take


def test_a_wrong_checkpoint_is_a_one_line_error(saved, tmp_path):
    state, _ = saved
    wrong = {key: value for key, value in state.items() if key != "attention_net.3.attention_c.bias"}
    torch.save(wrong, tmp_path / "wrong.pth")
    with pytest.raises(EvalsuiteError, match="missing keys 1 \\[attention_net.3.attention_c.bias\\]") as raised:
        slide_encoder.build_slide_encoder("chief", weights=str(tmp_path / "wrong.pth"))
    assert "\n" not in str(raised.value)


def test_without_weights_the_error_names_the_authors_folder():
    with pytest.raises(EvalsuiteError) as raised:
        slide_encoder.build_slide_encoder("chief")
    assert "\n" not in str(raised.value) and chief.WEIGHTS_FOLDER in str(raised.value)


def test_a_set_function_of_the_tiles_blind_to_positions_and_one_tile_works():
    model = chief.build(small_spec())
    tiles = torch.randn(7, TILE_DIM)
    with torch.no_grad():
        embedding = model(tiles, torch.zeros(7, 2), 256)
        shuffled = torch.randperm(7)
        torch.testing.assert_close(model(tiles[shuffled], torch.rand(7, 2) * 1e4, 512), embedding)
        torch.testing.assert_close(model(tiles[:1], torch.zeros(1, 2), 256), tiles[0])  # one tile: itself
        with pytest.raises(ValueError, match="tiles >= 1"):
            model(torch.randn(3, TILE_DIM + 1), torch.zeros(3, 2), 256)
