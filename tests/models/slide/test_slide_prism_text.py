"""PRISM's text side (models/slide/prism_text.py) at a tiny size: the text latents against a re-computation with PyPI
transformers' BioGptModel (twice the unimodal layers, the hidden state after the unimodal ones at the class token,
positions counted over non-pad tokens as PRISM's BioGPT does), on a padded batch of prompts of different lengths; the
published key layout (with the image resampler, the cross-attention layers and the heads the loader drops) loaded back
key for key; BioGPT's tokenizer on tiny vocab.json/merges.txt files laid out as Prism.zero_shot lays out a prompt set."""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.slide import prism_text
from evalsuite.models.slide.entries import SLIDE_ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: a second OpenMP thread only waits

SMALL = {"hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32, "unimodal_layers": 2,
         "vocab_size": 30, "max_position_embeddings": 24, "pad_token_id": 1, "cls_token_id": 29,
         "scale_embedding": True, "dim_latents": 12}
IMAGE_DIM = 8
PAD, EOS = 1, 2
# Prompts as the tokenizer lays them out after the cut: the longest lost its last `</s>`, the others keep theirs.
IDS = torch.tensor([[EOS, 5, 6, 7, 8, 9, 10],
                    [EOS, 11, 12, EOS, PAD, PAD, PAD],
                    [EOS, 13, 14, 15, 16, EOS, PAD]])


def small_spec():
    return dataclasses.replace(SLIDE_ENCODERS["prism"], embed_dim=IMAGE_DIM, extra={"text": dict(SMALL)})


def small_text(seed=0):
    return checkpoints.seeded(lambda: prism_text.build_text(small_spec()), seed)


def reference_latents(text, ids):
    """PRISM's BioGPT.forward + text_to_latents with transformers' BioGptModel holding the same decoder weights."""
    from transformers import BioGptConfig, BioGptModel

    config = BioGptConfig(vocab_size=SMALL["vocab_size"], hidden_size=SMALL["hidden_size"],
                          num_hidden_layers=2 * SMALL["unimodal_layers"], intermediate_size=SMALL["intermediate_size"],
                          num_attention_heads=SMALL["num_attention_heads"], hidden_act="gelu",
                          max_position_embeddings=SMALL["max_position_embeddings"], pad_token_id=PAD,
                          scale_embedding=True, attn_implementation="eager")
    reference = BioGptModel(config).eval()
    decoder = {k: v for k, v in text.state_dict().items() if k.startswith(("embed_", "layers."))}
    assert not reference.load_state_dict(decoder, strict=False).unexpected_keys
    ids = torch.cat([ids, torch.full((len(ids), 1), SMALL["cls_token_id"])], dim=1)  # BioGPT.forward's cls
    mask = (ids != PAD).long()
    positions = torch.cumsum(mask, dim=1) * mask - 1  # BioGptLearnedPositionalEmbedding in PRISM's biogpt_hf.py
    with torch.no_grad():
        out = reference(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=True)
    embedding = out.hidden_states[SMALL["unimodal_layers"]][:, -1]  # hidden_states[first_x_attn_layer][:, -1]
    return F.normalize(embedding @ text.text_to_latents.to_latents.weight.T, dim=-1)


def test_published_size_shapes():
    """config.json's biogpt_config and dim_latents (on the meta device: no memory, no time)."""
    with torch.device("meta"):
        text = prism_text.build_text(SLIDE_ENCODERS["prism"])
    shapes = {key: tuple(tensor.shape) for key, tensor in text.state_dict().items()}
    assert shapes["embed_tokens.weight"] == (42384, 1024) and shapes["embed_positions.weight"] == (1026, 1024)
    assert shapes["layers.11.fc1.weight"] == (4096, 1024) and "layers.12.fc1.weight" not in shapes
    assert shapes["text_to_latents.to_latents.weight"] == (5120, 1024)
    assert shapes["img_to_latents.to_latents.weight"] == (5120, 1280) and shapes["temperature"] == ()
    assert (text.cls_id, text.pad_id, text.embed_scale) == (42383, 1, 32.0)
    assert prism_text.text_tokenizer(SLIDE_ENCODERS["prism"]).max_prompt_tokens == 1024


def test_text_latents_match_transformers_biogpt():
    text = small_text()
    with torch.no_grad():
        latents = text.encode_text(IDS)
    assert latents.shape == (3, SMALL["dim_latents"]) and latents.dtype == torch.float32
    torch.testing.assert_close(latents, reference_latents(text, IDS), atol=1e-5, rtol=0)
    torch.testing.assert_close(latents.norm(dim=-1), torch.ones(3))
    # the class token's embedding does not depend on how many pads precede it
    with torch.no_grad():
        alone = text.encode_text(IDS[1:2, :4])
    torch.testing.assert_close(alone[0], latents[1], atol=1e-5, rtol=0)


def test_image_projection_and_logit_scale():
    text = small_text()
    slide = torch.randn(2, IMAGE_DIM)
    projection = text.image_projection()
    assert projection.shape == (IMAGE_DIM, SMALL["dim_latents"])
    torch.testing.assert_close(slide @ projection, text.img_to_latents.to_latents(slide))
    with torch.no_grad():
        text.temperature.fill_(2.5)
    assert text.logit_scale() == pytest.approx(torch.tensor(2.5).exp().item())


def published_state(text) -> dict:
    """`text` in PRISM's checkpoint layout, with what PrismText does not read."""
    state = {}
    for key, tensor in text.state_dict().items():
        published = key if key.split(".")[0] in ("text_to_latents", "img_to_latents", "temperature") else \
            prism_text.DECODER_PREFIX + key
        state[published] = tensor.clone()
    dim, layers = SMALL["hidden_size"], SMALL["unimodal_layers"]
    for layer in range(layers, 2 * layers):  # the multimodal half: dropped
        for name, shape in (("self_attn.q_proj.weight", (dim, dim)), ("x_attn.k_proj.weight", (dim, IMAGE_DIM)),
                            ("x_attn_layer_norm.weight", (dim,)), ("fc1.weight", (SMALL["intermediate_size"], dim))):
            state[f"{prism_text.DECODER_PREFIX}layers.{layer}.{name}"] = torch.randn(shape)
    state.update({prism_text.DECODER_PREFIX + "layer_norm.weight": torch.ones(dim),
                  prism_text.TIED_EMBEDDING: state[prism_text.DECODER_PREFIX + "embed_tokens.weight"],
                  "image_resampler.perceiver.latents": torch.randn(3, IMAGE_DIM),
                  "image_resampler.img_norm.weight": torch.ones(IMAGE_DIM)})
    return state


def test_published_layout_round_trip(tmp_path):
    text = small_text(seed=1)
    with torch.no_grad():
        text.temperature.fill_(3.0)
    state = published_state(text)
    torch.save(state, tmp_path / "prism.pth")
    loaded = small_text(seed=2)
    checkpoints.load_key_for_key(loaded, tmp_path / "prism.pth", prepare=prism_text.published_text_keys)
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode_text(IDS), text.encode_text(IDS), atol=0, rtol=0)
    torch.testing.assert_close(loaded.image_projection(), text.image_projection(), atol=0, rtol=0)
    assert loaded.logit_scale() == text.logit_scale()

    # only the tied twin of the token embedding stored (a safetensors file keeps one name of a shared tensor)
    del state[prism_text.DECODER_PREFIX + "embed_tokens.weight"]
    assert torch.equal(prism_text.published_text_keys(state)["embed_tokens.weight"], text.embed_tokens.weight)

    del state["text_to_latents.to_latents.weight"]
    torch.save(state, tmp_path / "missing.pth")
    with pytest.raises(EvalsuiteError, match="missing keys.*text_to_latents.to_latents.weight"):
        checkpoints.load_key_for_key(small_text(), tmp_path / "missing.pth", prepare=prism_text.published_text_keys)


def test_published_keys_refuse_cross_attention_in_unimodal_layer():
    state = published_state(small_text())
    state[prism_text.DECODER_PREFIX + "layers.0.x_attn.k_proj.weight"] = torch.zeros(1)
    with pytest.raises(EvalsuiteError, match="cross-attention in layer 0"):
        prism_text.published_text_keys(state)


# A BioGPT-format vocabulary: fairseq's special tokens first, word-final pieces with `</w>`; merges "a b count".
VOCAB = ["<s>", "<pad>", "</s>", "<unk>", "l", "o", "w", "lo", "low</w>", "a</w>", "b</w>", "c</w>", ".</w>",
         "madeupword0006</w>"]


@pytest.fixture
def tokenizer_folder(tmp_path):
    pytest.importorskip("sacremoses")
    folder = tmp_path / "weights" / "biogpt"
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(VOCAB)}))
    (folder / "merges.txt").write_text("l o 30\nlo w</w> 20\n")
    return folder


def test_tokenizer_lays_out_prompts_as_prism(tokenizer_folder, monkeypatch):
    monkeypatch.delenv(prism_text.TOKENIZER_ENV, raising=False)
    tokenizer = prism_text.text_tokenizer(small_spec())
    tokenizer.beside = tokenizer_folder.parent  # finds <beside>/biogpt
    ids = {token: i for i, token in enumerate(VOCAB)}
    a, b, c, dot, low = (ids[t] for t in ("a</w>", "b</w>", "c</w>", ".</w>", "low</w>"))
    texts = ["a b c.", "low", "a low."]
    assert tokenizer.prompt_token_ids(texts) == [[EOS, a, b, c, dot, EOS], [EOS, low, EOS], [EOS, a, low, dot, EOS]]
    batch = tokenizer(texts)
    # padded to the longest (6), the last column cut: the longest loses its `</s>`, the others a pad
    assert batch.tolist() == [[EOS, a, b, c, dot], [EOS, low, EOS, PAD, PAD], [EOS, a, low, dot, EOS]]
    assert tokenizer.max_prompt_tokens == SMALL["max_position_embeddings"]
    assert tokenizer.cache_id.startswith(prism_text.TOKENIZER_NAME + "; sha256:")

    # the folder itself, or one named by the environment variable
    tokenizer.beside = tokenizer_folder
    assert tokenizer.prompt_token_ids(["c"]) == [[EOS, c, EOS]]
    fresh = prism_text.text_tokenizer(small_spec())
    monkeypatch.setenv(prism_text.TOKENIZER_ENV, str(tokenizer_folder))
    before = fresh.cache_id
    assert before == tokenizer.cache_id
    (tokenizer_folder / "merges.txt").write_text("l o 30\n")
    assert fresh.cache_id != before  # the hash follows the files' bytes


def test_tokenizer_files_missing_is_one_line_error(tmp_path, monkeypatch):
    monkeypatch.delenv(prism_text.TOKENIZER_ENV, raising=False)
    tokenizer = prism_text.text_tokenizer(small_spec())
    tokenizer.beside = tmp_path
    assert tokenizer.cache_id == prism_text.TOKENIZER_NAME
    with pytest.raises(EvalsuiteError) as error:
        tokenizer(["a"])
    message = str(error.value)
    assert "\n" not in message and "vocab.json and merges.txt" in message and prism_text.TOKENIZER_REVISION in message
    monkeypatch.setenv(prism_text.TOKENIZER_ENV, str(tmp_path))
    with pytest.raises(EvalsuiteError, match=f"{prism_text.TOKENIZER_ENV}=.* lacks vocab.json and merges.txt"):
        prism_text.text_tokenizer(small_spec())(["a"])
