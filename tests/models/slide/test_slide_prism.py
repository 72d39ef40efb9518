"""The `prism` entry: the published size on the meta device holds the key names and shapes of PRISM's checkpoint
(config.json's perceiver_config, the shared layers stored once); a small PRISM with random weights saved in the
published layout (`image_resampler.`, with `img_norm`, a text decoder and the contrastive heads the loader drops)
loads back through the builder with identical embeddings, both with the shared layers stored once (safetensors) and
under every layer's name (torch.save); the forward against a re-computation from PRISM's definition with torch
primitives, reading the shared layers by their owners' names; a set function of the tiles. PRISM's code is on its hub
repository only (PyPI's prism-embedder vendors it but does not import here): no comparison against it here."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models.registry import REGISTRY
from evalsuite.models.slide import encoder as slide_encoder
from evalsuite.models.slide import prism
from evalsuite.models.slide.entries import SLIDE_ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: a second OpenMP thread only waits

SMALL = {"latent_seq": 6, "latent_dim": 16, "context_dim": 12, "mhsa_heads": 2, "perceiver_depth": 4,
         "transformer_depth": 2, "xattn_heads": 1, "mlp_mult": 1}
P = "image_resampler.perceiver."


def published_shapes(latent_seq=512, dim=1280, context=2560, depth=8, blocks=6, text_dim=1024, latents=5120,
                     every_layer=False) -> dict:
    """PRISM's state dict (perceiver.py PerceiverResampler under `image_resampler.`; modeling_prism.py's contrastive
    heads and temperature; a few tensors of the BioGPT decoder, names not confirmed). Layers 0-1 own a cross-attention
    (2-7 reuse layer 1's), layer 0 the self-attention stack; `every_layer`: stored under the reusing layers' names too."""
    def feed_forward(prefix):
        return {prefix + "norm.weight": (dim,), prefix + "norm.bias": (dim,), prefix + "net.0.weight": (2 * dim, dim),
                prefix + "net.0.bias": (2 * dim,), prefix + "net.2.weight": (dim, dim), prefix + "net.2.bias": (dim,)}

    shapes = {P + "latents": (latent_seq + 1, dim)}
    for layer in range(depth if every_layer else 2):
        x = f"{P}layers.{layer}.xattn."
        shapes.update({x + "xattn.x_norm.weight": (dim,), x + "xattn.x_norm.bias": (dim,),
                       x + "xattn.to_q.weight": (dim, dim), x + "xattn.to_kv.weight": (2 * dim, context),
                       x + "xattn.to_out.weight": (dim, dim), **feed_forward(x + "ff.")})
        for block in range(blocks) if every_layer or layer == 0 else ():
            t = f"{P}layers.{layer}.tf.{block}."
            shapes.update({t + "mhsa.norm.weight": (dim,), t + "mhsa.norm.bias": (dim,),
                           t + "mhsa.mha.in_proj_weight": (3 * dim, dim), t + "mhsa.mha.out_proj.weight": (dim, dim),
                           **feed_forward(t + "ff.")})
    for norm in ("cls_norm", "img_norm"):
        shapes.update({f"image_resampler.{norm}.weight": (dim,), f"image_resampler.{norm}.bias": (dim,)})
    shapes.update({"img_to_latents.to_latents.weight": (latents, dim),
                   "text_to_latents.to_latents.weight": (latents, text_dim), "temperature": (),
                   "text_decoder.model.biogpt.embed_tokens.weight": (42384, text_dim)})
    return shapes


def small_spec():
    return dataclasses.replace(SLIDE_ENCODERS["prism"], tile_dim=SMALL["context_dim"], embed_dim=SMALL["latent_dim"],
                               config=dict(SMALL))


def small_published_shapes(every_layer=False):
    return published_shapes(SMALL["latent_seq"], SMALL["latent_dim"], SMALL["context_dim"], SMALL["perceiver_depth"],
                            SMALL["transformer_depth"], text_dim=8, latents=10, every_layer=every_layer)


def test_published_size_has_the_key_names_and_shapes_of_the_published_checkpoint():
    spec = SLIDE_ENCODERS["prism"]
    assert spec.tile_dim == REGISTRY[spec.tile_encoder].embed_dim == 2560 and spec.embed_dim == 1280
    assert not spec.uses_coords and spec.tiling == {"target_mpp": 0.5, "tile_size_px": 224}
    with torch.device("meta"):
        model = prism.build(spec)
    fake = {key: torch.empty(shape, device="meta") for key, shape in published_shapes().items()}
    expected = {key: tuple(value.shape) for key, value in prism.published_keys(fake).items()}
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == expected
    assert not any(key.startswith(("img_norm", "text", "img_to", "temperature")) for key in expected)


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """(the published-layout state of a small PRISM with random weights, with every shared layer's copy; its file
    as safetensors with each shared tensor once, and as a torch.save .pth with every copy)."""
    spec = small_spec()
    monkeypatch.setitem(slide_encoder.SLIDE_ENCODERS, "prism", spec)
    generator = torch.Generator().manual_seed(3)
    owners = {key: torch.randn(shape, generator=generator) for key, shape in small_published_shapes().items()}
    every_layer = {key: owners[_owner_key(key)] for key in small_published_shapes(every_layer=True)}
    save_file(owners, tmp_path / "model.safetensors")
    torch.save(every_layer, tmp_path / "prism.pth")
    return every_layer, tmp_path


def _owner_key(key: str) -> str:
    """The key under which the layer that owns a shared module stores `key` (itself for an unshared one)."""
    if not key.startswith(prism.RESAMPLER_PREFIX):
        return key
    return prism.RESAMPLER_PREFIX + prism._owner_name(key.removeprefix(prism.RESAMPLER_PREFIX))


def _reference(state: dict, tiles: torch.Tensor) -> torch.Tensor:
    """PRISM's PerceiverResampler.forward from its definition, reading every layer's tensors under its own name."""
    def norm(x, prefix):
        return F.layer_norm(x, x.shape[-1:], state[prefix + "weight"], state[prefix + "bias"])

    def feed_forward(x, prefix):
        hidden, gates = F.linear(norm(x, prefix + "norm."), state[prefix + "net.0.weight"],
                                 state[prefix + "net.0.bias"]).chunk(2, dim=-1)
        return F.linear(hidden * F.gelu(gates), state[prefix + "net.2.weight"], state[prefix + "net.2.bias"])

    def attention(q, k, v, heads):  # [n, dim] each; softmax(q k^T / sqrt(d)) v per head
        q, k, v = (t.reshape(len(t), heads, -1).transpose(0, 1) for t in (q, k, v))
        weights = (q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).softmax(dim=-1)
        return (weights @ v).transpose(0, 1).reshape(len(q[0]), -1)

    x = state[P + "latents"]
    for layer in range(SMALL["perceiver_depth"]):
        c = f"{P}layers.{layer}.xattn."
        k, v = F.linear(tiles, state[c + "xattn.to_kv.weight"]).chunk(2, dim=-1)
        q = F.linear(norm(x, c + "xattn.x_norm."), state[c + "xattn.to_q.weight"])
        x = x + F.linear(attention(q, k, v, SMALL["xattn_heads"]), state[c + "xattn.to_out.weight"])
        x = x + feed_forward(x, c + "ff.")
        for block in range(SMALL["transformer_depth"]):
            t = f"{P}layers.{layer}.tf.{block}."
            q, k, v = F.linear(norm(x, t + "mhsa.norm."), state[t + "mhsa.mha.in_proj_weight"]).chunk(3, dim=-1)
            x = x + F.linear(attention(q, k, v, SMALL["mhsa_heads"]), state[t + "mhsa.mha.out_proj.weight"])
            x = x + feed_forward(x, t + "ff.")
    return norm(x[0], "image_resampler.cls_norm.")


def test_both_layouts_load_through_the_builder_and_give_prisms_embedding(saved):
    every_layer, folder = saved
    tiles = torch.randn(23, SMALL["context_dim"], generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        from_safetensors = slide_encoder.build_slide_encoder("prism", weights=str(folder)).model(tiles, None, None)
        from_pth = slide_encoder.build_slide_encoder("prism", weights=str(folder / "prism.pth")).model(tiles, None, 0)
    assert from_safetensors.shape == (SMALL["latent_dim"],) and from_safetensors.dtype == torch.float32
    assert torch.equal(from_safetensors, from_pth)
    torch.testing.assert_close(from_safetensors, _reference(every_layer, tiles), atol=1e-5, rtol=0)


def test_a_shared_copy_that_differs_or_a_wrong_checkpoint_is_a_one_line_error(saved, tmp_path):
    every_layer, _ = saved
    differing = dict(every_layer, **{P + "layers.3.xattn.xattn.to_q.weight": torch.zeros(16, 16)})
    torch.save(differing, tmp_path / "differing.pth")
    save_file({"vision_encoder.cls_token": torch.zeros(1, 1, 768)}, tmp_path / "titan.safetensors")
    for name, message in (("differing.pth", "layers.3.xattn.xattn.to_q.weight' should be the same tensor as"),
                          ("titan.safetensors", "missing keys")):
        with pytest.raises(EvalsuiteError, match=message) as raised:
            slide_encoder.build_slide_encoder("prism", weights=str(tmp_path / name))
        assert "\n" not in str(raised.value)


def test_a_set_function_of_the_tiles_blind_to_positions_and_one_tile_works():
    torch.manual_seed(1)
    model = prism.build(small_spec())
    tiles = torch.randn(9, SMALL["context_dim"])
    with torch.no_grad():
        embedding = model(tiles, torch.zeros(9, 2), 256)
        torch.testing.assert_close(model(tiles[torch.randperm(9)], torch.rand(9, 2) * 1e4, 512), embedding)
        assert not torch.allclose(model(tiles[:5], None, None), embedding, atol=1e-4)
        one = model(tiles[:1], torch.zeros(1, 2), 256)
        assert one.shape == (SMALL["latent_dim"],) and torch.isfinite(one).all()
        with pytest.raises(ValueError, match="tiles >= 1"):
            model(tiles[:0], torch.zeros(0, 2), 256)
