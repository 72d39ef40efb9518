"""The `quiltnet-b-16-pmb` entry: QuiltNet-B-16-PMB composed from timm and transformers under open_clip's names.

The reference is open_clip's own CustomTextCLIP, built from the hub's open_clip_config.json (commit 813c35d) with
transformers' AutoConfig answering from a local BertConfig instead of the hub: at the published size (meta device)
its state dict has exactly our keys and shapes; at a tiny size (timm's ViT and the BERT shrunk alike) its state
dict, saved as open_clip_pytorch_model.bin with a vocab.txt beside it, loads through build_backbone and gives
open_clip's encode_image and encode_text, and our tokenizer gives open_clip's HFTokenizer's ids.
"""

import dataclasses
import functools

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.registry import REGISTRY
from evalsuite.models.vision_language import quilt_pmb
from evalsuite.models.vision_language.entries import CLIP_MEAN, CLIP_STD, VLMS

open_clip = pytest.importorskip("open_clip")
transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")
from open_clip import hf_model  # noqa: E402
from open_clip.model import CustomTextCLIP  # noqa: E402
from open_clip.tokenizer import HFTokenizer  # noqa: E402

NAME = "quiltnet-b-16-pmb"
# open_clip_config.json of wisdomik/QuiltNet-B-16-PMB at 813c35d (model_cfg; preprocess_cfg is CLIP's mean/std).
HUB_MODEL_CFG = {
    "embed_dim": 512,
    "vision_cfg": {"timm_model_name": "vit_base_patch16_224", "timm_model_pretrained": False, "timm_pool": "",
                   "timm_proj": "linear", "image_size": 224},
    "text_cfg": {"hf_model_name": "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract",
                 "hf_tokenizer_name": "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract",
                 "hf_proj_type": "mlp", "hf_pooler_type": "cls_last_hidden_state_pooler", "context_length": 256}}
TINY_VIT = {"img_size": 32, "embed_dim": 32, "depth": 1, "num_heads": 2}
TINY_BERT = {**quilt_pmb.PUBMEDBERT_CONFIG, "vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 1,
             "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 256}
# A BERT WordPiece vocabulary in the layout of vocab.txt (one token a line, id = line number).
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "an", "h", "&", "e", "image", "of", "tumor", ".", "str",
         "##oma", "adipose", "tissue"]


def _open_clip_model(monkeypatch, bert: dict, embed_dim: int = 512) -> torch.nn.Module:
    """open_clip's CustomTextCLIP of the hub config, its BERT config read from `bert` instead of the hub."""
    monkeypatch.setattr(hf_model.AutoConfig, "from_pretrained", lambda *args, **kwargs: transformers.BertConfig(**bert))
    text_cfg = {**HUB_MODEL_CFG["text_cfg"], "hf_model_pretrained": False}  # what create_model sets without weights
    return CustomTextCLIP(embed_dim=embed_dim, vision_cfg=HUB_MODEL_CFG["vision_cfg"], text_cfg=text_cfg)


def _vocab_folder(folder):
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": true, "tokenizer_class": "BertTokenizer"}')
    return folder


def test_entry_is_the_hub_config():
    spec = VLMS[NAME]
    assert REGISTRY[NAME] is spec and spec.library == quilt_pmb.LIBRARY
    assert spec.embed_dim == HUB_MODEL_CFG["embed_dim"]
    assert spec.context_length_tokens == quilt_pmb.CONTEXT_TOKENS == HUB_MODEL_CFG["text_cfg"]["context_length"]
    assert spec.pretrained_cfg.input_size_px == HUB_MODEL_CFG["vision_cfg"]["image_size"]
    assert (spec.pretrained_cfg.mean, spec.pretrained_cfg.std) == (CLIP_MEAN, CLIP_STD)
    assert quilt_pmb.VIT_ARCHITECTURE == HUB_MODEL_CFG["vision_cfg"]["timm_model_name"]


def test_published_size_has_open_clips_keys_and_shapes(monkeypatch):
    with torch.device("meta"):
        reference = _open_clip_model(monkeypatch, quilt_pmb.PUBMEDBERT_CONFIG)
        ours = quilt_pmb.QuiltPmbModel(None, 512, quilt_pmb.VIT_KWARGS, quilt_pmb.PUBMEDBERT_CONFIG)
    shapes = {key: tuple(value.shape) for key, value in ours.state_dict().items()}
    assert shapes == {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    assert shapes["visual.head.proj.weight"] == (512, 768) and shapes["text.proj.0.weight"] == (640, 768)
    assert not any(key.startswith("text.transformer.pooler") for key in shapes)  # cls_last_hidden_state_pooler
    # float32 weights: 783.6 MB, the hub's open_clip_pytorch_model.bin is listed as 784 MB (with BERT's pooler: 786).
    assert round(sum(value.numel() for value in ours.state_dict().values()) * 4 / 1e6) == 784


@pytest.fixture
def published(monkeypatch, tmp_path):
    """open_clip's tiny CustomTextCLIP (seed 7) saved as the hub holds it, with the position_ids buffer older
    transformers wrote and a vocab.txt beside it; our entry shrunk to the same sizes."""
    monkeypatch.setattr(timm, "create_model", functools.partial(timm.create_model, **TINY_VIT))
    torch.manual_seed(7)
    reference = _open_clip_model(monkeypatch, TINY_BERT).eval()
    state = {**reference.state_dict(), "text.transformer.embeddings.position_ids": torch.arange(256)[None]}
    torch.save(state, tmp_path / "open_clip_pytorch_model.bin")
    monkeypatch.setattr(quilt_pmb, "PUBMEDBERT_CONFIG", TINY_BERT)
    spec = VLMS[NAME]
    small = dataclasses.replace(spec, pretrained_cfg=dataclasses.replace(spec.pretrained_cfg, input_size_px=32))
    monkeypatch.setitem(REGISTRY, NAME, small)
    return reference, _vocab_folder(tmp_path)


def test_published_file_loads_and_recomputes_open_clips_embeddings(published):
    reference, folder = published
    backbone = build_backbone(NAME, weights=str(folder / "open_clip_pytorch_model.bin"))
    assert backbone.weights_id.startswith("sha256:") and backbone.embed_dim == 512
    assert backbone.data_config["mean"] == CLIP_MEAN and backbone.data_config["input_size"] == (3, 32, 32)
    prompts = ["An H&E image of Tumor.", "adipose  tissue", "stroma"]
    reference_ids = HFTokenizer(str(folder), context_length=256)(prompts)
    assert torch.equal(backbone.text.tokenizer(prompts), reference_ids)
    assert reference_ids[0, :11].tolist() == [2, 5, 6, 7, 8, 9, 10, 11, 12, 3, 0]  # lower-cased, [PAD] after [SEP]
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(images), reference.encode_image(images),
                                   rtol=1e-5, atol=1e-5)
        expected_text = reference.encode_text(reference_ids)
    torch.testing.assert_close(torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu"))), expected_text,
                               rtol=1e-5, atol=1e-5)
    assert backbone.text.logit_scale == pytest.approx(1 / 0.07, rel=1e-5)  # open_clip's initial value, as saved
    assert backbone.text.tokenizer_id.startswith(VLMS[NAME].tokenizer + "; sha256:")
    assert backbone.text.context_length_tokens == 256 and backbone.probe_features is None


def test_without_a_vocab_the_text_tower_says_what_to_put_where(published):
    reference, folder = published
    (folder / "vocab.txt").unlink()
    backbone = build_backbone(NAME, weights=str(folder / "open_clip_pytorch_model.bin"))
    with pytest.raises(EvalsuiteError, match=f"no vocab.txt in {folder}; put vocab.txt of wisdomik/QuiltNet-B-16-PMB "
                                             "next to the --weights file") as error:
        backbone.text.encode(["tumor"], torch.device("cpu"))
    assert "\n" not in str(error.value)
    random = build_backbone(NAME, random_init=True)
    with pytest.raises(EvalsuiteError, match=r"no vocab.txt \(none with --random-init\)"):
        random.text.encode(["tumor"], torch.device("cpu"))


def test_a_vocab_larger_than_the_embedding_is_refused(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]"] + [f"w{i}" for i in range(40)]) + "\n")
    tokenizer = quilt_pmb.PubMedBertTokenizer(VLMS[NAME].tokenizer, vocab_size=40)
    tokenizer.beside = tmp_path
    with pytest.raises(EvalsuiteError, match="vocab.txt is not PubMedBERT's vocab.txt: it has 41 lines"):
        tokenizer(["tumor"])


def test_another_models_file_is_one_line_naming_it(published, tmp_path):
    path = tmp_path / "other" / "open_clip_pytorch_model.bin"
    path.parent.mkdir()
    torch.save({"visual.proj": torch.zeros(768, 512)}, path)  # a QuiltNet-B-16 (open_clip ViT) key
    with pytest.raises(EvalsuiteError, match="open_clip_pytorch_model.bin do not fit QuiltPmbModel") as error:
        build_backbone(NAME, weights=str(path))
    assert "\n" not in str(error.value)


def test_without_weights_names_the_file_to_get():
    with pytest.raises(EvalsuiteError, match="needs --weights FILE .*open_clip_pytorch_model.bin of "
                                             "wisdomik/QuiltNet-B-16-PMB"):
        build_backbone(NAME)
