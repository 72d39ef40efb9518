"""The `musk` entry (issue 42): torchscale's BEiT-3 with MUSK's heads. MUSK's real size (675M parameters) is built on
the meta device for its key names and shapes; a small config (the same code, fewer and narrower layers) with random
weights is saved in the published layout (beit3.*, vision_head.weight, language_head.weight, logit_scale) and loaded
back through build_vlm with identical encodes; the tokenizer through the real loader on a small sentencepiece model;
one-line errors, also without torchscale (installed outside pip's resolver, see evalsuite.models.vision_language.musk)."""

import importlib.util
import io
import math
import sys

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.vision_language import musk as vlm_musk

needs_torchscale = pytest.mark.skipif(importlib.util.find_spec("torchscale") is None,
                                      reason=f"torchscale is not installed ({vlm_musk.INSTALL})")
# MUSK's layers at a small size: 384 px as the entry's preprocessing gives, fewer patches, 2 layers 64 wide.
SMALL = {**vlm_musk.ENCODER_CONFIG, "patch_size": 64, "vocab_size": 64, "encoder_embed_dim": 64,
         "encoder_attention_heads": 4, "encoder_ffn_embed_dim": 128, "encoder_layers": 2}
CORPUS = ["an H&E image of tumor tissue", "stroma with fibroblasts", "lymphocytes in the stroma", "adipose tissue",
          "necrosis and debris", "normal colon mucosa", "smooth muscle"]


def _sentencepiece_model(folder):
    """A small sentencepiece model (unigram, <unk> 0, <s> 1, </s> 2, as XLM-R's) saved as MUSK names its file."""
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 20), model_writer=model, vocab_size=40,
                                   model_type="unigram", minloglevel=2)
    (folder / vlm_musk.TOKENIZER_NAME).write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(vlm_musk, "ENCODER_CONFIG", SMALL)


@pytest.fixture
def saved(small, tmp_path):
    """A small MUSK with random weights (seed 7) saved as model.safetensors beside tokenizer.spm."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    _sentencepiece_model(tmp_path)
    reference = vlm_musk.Musk()
    with torch.no_grad():
        reference.logit_scale.fill_(math.log(50.0))
    safetensors_torch.save_file({k: v.contiguous() for k, v in reference.state_dict().items()},
                                str(tmp_path / "model.safetensors"))
    return reference.eval(), tmp_path / "model.safetensors"


@needs_torchscale
def test_musk_at_its_real_size_has_the_published_names_and_shapes():
    """musk_large_patch16_384 (MUSK's modeling.py): 974 tensors, 675,188,737 parameters, as MUSK's own module has."""
    with torch.device("meta"):
        model = vlm_musk.Musk()
    state = model.state_dict()
    assert len(state) == 974 and sum(p.numel() for p in model.parameters()) == 675_188_737
    shapes = {"beit3.text_embed.weight": (64010, 1024), "beit3.vision_embed.cls_token": (1, 1, 1024),
              "beit3.vision_embed.proj.weight": (1024, 3, 16, 16),
              "beit3.encoder.embed_positions.A.weight": (24 * 24 + 1 + 2, 1024),  # patches, CLS, fairseq's 2
              "beit3.encoder.embed_positions.B.weight": (1024, 1024),
              "beit3.encoder.layers.23.self_attn.q_proj.A.weight": (1024, 1024),
              "beit3.encoder.layers.23.self_attn.inner_attn_ln.B.bias": (1024,),
              "beit3.encoder.layers.0.ffn.B.fc2.weight": (1024, 4096),
              "beit3.encoder.layers.0.ffn.A.ffn_layernorm.weight": (4096,),
              "beit3.encoder.layer_norm.A.weight": (1024,), "vision_head.weight": (1024, 1024),
              "language_head.weight": (1024, 1024), "logit_scale": ()}
    assert {key: tuple(state[key].shape) for key in shapes} == shapes
    assert "vision_head.bias" not in state and "language_head.bias" not in state
    assert all(key.startswith("beit3.") for key in state if "_head." not in key and key != "logit_scale")


@needs_torchscale
def test_round_trip_through_build_vlm_gives_the_same_towers(saved):
    reference, path = saved
    backbone = build_backbone("musk", weights=str(path))
    assert backbone.weights_id.startswith("sha256:") and backbone.label == "musk+model"
    assert backbone.probe_features == "before_projection" and backbone.embed_dim == SMALL["encoder_embed_dim"]
    assert backbone.data_config == {"input_size": (3, 384, 384), "interpolation": "bicubic",
                                    "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    assert backbone.text.logit_scale == pytest.approx(50.0) and backbone.text.context_length_tokens == 100
    images = torch.rand(2, 3, 384, 384)
    prompts = ["an H&E image of tumor tissue", "stroma", "necrosis and debris in the colon mucosa " * 4]
    tokens = backbone.text.tokenizer(prompts)
    with torch.no_grad():
        image_cls = reference.beit3(visual_tokens=images)["encoder_out"][:, 0]
        text_cls = reference.beit3(textual_tokens=tokens["input_ids"],
                                   text_padding_position=tokens["padding_mask"])["encoder_out"][:, 0]
        # The image probes read the CLS token before vision_head (MUSK's with_head=False for linear probes and
        # MIL); the text-reading probes apply the head's weight to those rows (with_head=True, zero-shot).
        before = backbone.pooled_features(images)
        torch.testing.assert_close(before, image_cls, rtol=0, atol=0)
        torch.testing.assert_close(backbone.text.image_to_joint(before), reference.encode_image(images))
        text = torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu")))
        torch.testing.assert_close(text, text_cls @ reference.language_head.weight.T, rtol=0, atol=0)
        # The padding mask keeps a prompt's embedding the same whatever longer prompt shares its batch.
        alone = torch.from_numpy(backbone.text.encode(prompts[1:2], torch.device("cpu")))
        torch.testing.assert_close(alone[0], text[1], rtol=1e-5, atol=1e-6)


@needs_torchscale
def test_a_checkpoint_with_other_keys_or_another_image_size_is_one_line_naming_the_file(saved):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    reference, path = saved
    state = reference.state_dict()
    state["vision_head.bias"] = state.pop("language_head.weight")[:, 0].contiguous()
    safetensors_torch.save_file(state, str(path))
    with pytest.raises(EvalsuiteError, match=r"model.safetensors do not fit Musk: missing keys.*language_head.weight"
                                             r".*unexpected keys.*vision_head.bias") as error:
        build_backbone("musk", weights=str(path))
    assert "\n" not in str(error.value)
    # A position table for 224 px (14 x 14 patches of 16 px at MUSK's size; here 3 x 3 + CLS + 2) is refused, not
    # interpolated: the entry builds MUSK's 384 px model.
    state = {k: v.contiguous() for k, v in reference.state_dict().items()}
    state["beit3.encoder.embed_positions.A.weight"] = torch.zeros(3 * 3 + 1 + 2, SMALL["encoder_embed_dim"])
    safetensors_torch.save_file(state, str(path))
    with pytest.raises(EvalsuiteError, match="wrong shapes .*embed_positions.A.weight"):
        build_backbone("musk", weights=str(path))


def test_the_tokenizer_gives_musks_layout_through_the_real_loader(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("google.protobuf")
    sentencepiece = _sentencepiece_model(tmp_path)
    tokenizer = vlm_musk.MuskTokenizer("XLMRobertaTokenizer (MUSK's tokenizer.spm)")
    tokenizer.beside = tmp_path
    assert "sha256:" in tokenizer.cache_id
    prompt = "an H&E image of tumor tissue"
    out = tokenizer([prompt, "stroma " * 200, "zzq"])
    ids, mask = out["input_ids"], out["padding_mask"]
    assert ids.shape == mask.shape == (3, 100) and ids.dtype == mask.dtype == torch.long
    # XLM-R's ids: <s> 0, <pad> 1, </s> 2, <unk> 3, every other piece its sentencepiece id + 1 (fairseq's offset).
    pieces = [i + 1 for i in sentencepiece.encode(prompt)]
    expected = [0, *pieces, 2]
    assert ids[0].tolist() == expected + [1] * (100 - len(expected))
    assert mask[0].tolist() == [0] * len(expected) + [1] * (100 - len(expected))
    # At most 98 pieces between <s> and </s>; no padding then.
    assert ids[1, 0] == 0 and ids[1, 99] == 2 and mask[1].sum() == 0
    assert ids[1, 1:99].tolist() == [i + 1 for i in sentencepiece.encode("stroma " * 200)][:98]
    assert 3 in ids[2, 1:-1].tolist()  # unknown characters are <unk>


def test_the_tokenizer_without_its_file_says_where_to_put_it(tmp_path):
    tokenizer = vlm_musk.MuskTokenizer("x")
    tokenizer.beside = tmp_path
    with pytest.raises(EvalsuiteError, match="needs MUSK's tokenizer file tokenizer.spm .*xiangjx/musk"):
        tokenizer(["stroma"])


def test_without_torchscale_the_entry_gives_the_install_command(monkeypatch):
    for name in [name for name in sys.modules if name == "torchscale" or name.startswith("torchscale.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torchscale", None)  # an import of it raises ImportError
    with pytest.raises(EvalsuiteError) as error:
        build_backbone("musk", random_init=True)
    assert str(error.value).endswith("pip install --no-deps torchscale==0.3.0 fairscale==0.4.0")
    assert "\n" not in str(error.value)
