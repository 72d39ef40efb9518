"""The `keep` entry (issue 42): KEEP's towers composed from timm and transformers with random weights, the state dict
written under the published module names and loaded back through build_vlm with identical encodes; the tokenizer
through the real loader (BERT WordPiece over a vocab.txt beside the weights); one-line errors. ViT-L is heavy at
random init: one model is built for the module and each tower runs one small forward."""

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.image.entries import IMAGENET_MEAN, IMAGENET_STD
from evalsuite.models.vision_language.entries import VLMS
from evalsuite.models.vision_language.keep import KeepTokenizer, create_keep, load_keep_weights

pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

# Key names of KEEP's checkpoint: its modules visual (timm ViT-L/16 with LayerScale), visual_head (Linear, GELU,
# Linear), text (transformers BertModel with its pooler) and the logit_scale parameter (modeling_keep.py).
PUBLISHED_KEYS = ["visual.cls_token", "visual.pos_embed", "visual.patch_embed.proj.weight",
                  "visual.blocks.23.attn.qkv.weight", "visual.blocks.23.ls2.gamma", "visual.norm.weight",
                  "visual_head.0.weight", "visual_head.2.bias", "text.embeddings.word_embeddings.weight",
                  "text.encoder.layer.11.attention.self.query.weight", "text.encoder.layer.11.output.LayerNorm.bias",
                  "text.pooler.dense.weight", "logit_scale"]
# A few words of a BERT WordPiece vocabulary, in the layout of KEEP's vocab.txt (one token a line, id = line).
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "an", "h", "&", "e", "image", "of", "tumor", ".", "str",
         "##oma"]


def _tokenizer_folder(folder):
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A KEEP model with random weights (seed 7), saved as model.safetensors in float16 beside a vocab.txt; the
    reference holds the float16-rounded values the file holds."""
    folder = _tokenizer_folder(tmp_path_factory.mktemp("keep"))
    reference, _ = create_keep(VLMS["keep"], seed=7)
    initial_scale = float(reference.logit_scale.detach().exp())
    state = {k: v.detach().half().contiguous() for k, v in reference.state_dict().items()}
    safetensors_torch.save_file(state, str(folder / "model.safetensors"))
    reference.load_state_dict(state)
    return reference.eval(), folder, initial_scale


@pytest.mark.slow
def test_round_trip_through_build_vlm_gives_the_same_towers(saved):
    reference, folder, initial_scale = saved
    assert initial_scale == pytest.approx(25.0)  # KEEP's initial temperature 0.04
    assert all(key in safetensors_torch.load_file(str(folder / "model.safetensors")) for key in PUBLISHED_KEYS)
    backbone = build_backbone("keep", weights=str(folder))
    assert backbone.weights_id.startswith("sha256:") and backbone.embed_dim == 768
    assert backbone.data_config == {"input_size": (3, 224, 224), "interpolation": "bicubic", "mean": IMAGENET_MEAN,
                                    "std": IMAGENET_STD}
    prompts = ["An H&E image of Tumor.", "stroma"]
    tokens = backbone.text.tokenizer(prompts)
    images = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(images), reference.encode_image(images))
        expected_text = reference.encode_text(tokens)
    torch.testing.assert_close(torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu"))), expected_text)
    assert expected_text.norm(dim=-1).tolist() == pytest.approx([1.0, 1.0])  # KEEP normalises both towers
    assert backbone.text.logit_scale == pytest.approx(float(reference.logit_scale.detach().exp()))
    assert backbone.text.context_length_tokens == 256
    # KEEP documents only encode_image (its visual head is an MLP, not a linear projection): the probes read it.
    assert backbone.probe_features is None and backbone.text.image_to_joint.is_identity


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_is_one_line_naming_the_file(saved, tmp_path):
    reference, _, _ = saved
    path = tmp_path / "wrong.safetensors"
    safetensors_torch.save_file({"visual_head.0.weight": torch.zeros(3, 3)}, str(path))
    with pytest.raises(EvalsuiteError, match="wrong.safetensors do not fit KeepModel: missing keys") as error:
        load_keep_weights(reference, path)
    assert "\n" not in str(error.value)


def test_tokenizer_is_bert_wordpiece_over_the_vocab_beside_the_weights(tmp_path):
    tokenizer = KeepTokenizer(_tokenizer_folder(tmp_path))
    tokens = tokenizer(["An H&E image of Tumor.", "stroma"])
    assert set(tokens) == {"input_ids", "token_type_ids", "attention_mask"}
    assert tokens["input_ids"].shape == (2, 256)
    # [CLS] an h & e image of tumor . [SEP], lower-cased, then [PAD] (0) to 256 tokens; "stroma" in two pieces.
    assert tokens["input_ids"][0, :11].tolist() == [2, 5, 6, 7, 8, 9, 10, 11, 12, 3, 0]
    assert tokens["input_ids"][1, :4].tolist() == [2, 13, 14, 3]
    assert tokens["attention_mask"][0].sum() == 10 and int(tokens["input_ids"][0, 10:].abs().sum()) == 0


def test_tokenizer_without_a_vocab_says_what_to_put_where(tmp_path):
    with pytest.raises(EvalsuiteError, match=f"no vocab.txt or tokenizer.json in {tmp_path}.*Astaxanthin/KEEP"):
        KeepTokenizer(tmp_path)(["tumor"])
    with pytest.raises(EvalsuiteError, match="none with --random-init"):
        KeepTokenizer()(["tumor"])


def test_keep_without_weights_names_the_file_to_get():
    with pytest.raises(EvalsuiteError, match="needs --weights FILE .*model.safetensors of Astaxanthin/KEEP"):
        build_backbone("keep")
