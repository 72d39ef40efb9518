"""Zero-shot with the slide encoders' own text towers (issue 51): TITAN's and PRISM's class probabilities through
evalsuite's class texts and zeroshot probe, against each model's zero-shot computation re-written from its code with
the same seeded random text tower (TITAN: modeling_titan.py `zero_shot_classifier` and `zero_shot`; PRISM:
modeling_prism.py `zero_shot`); TITAN's text tensors in the published layout loaded back key for key; a slide encoder
without a text tower gets none (MADELEINE's tile encoder CONCH has one, which must not stand in for it).

The pipeline caches prompt embeddings and slide embeddings in float16 (probes/texts/text_cache.py, the slide-embedding
cache): the references read the same float16 slide embeddings, and the tolerance 1e-3 on probabilities covers the
float16 rounding of the cached prompt rows."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conch_tokenizer_file import write_conch_tokenizer
from test_slide_prism_text import SMALL, VOCAB

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.slide.entries import SLIDE_ENCODERS
from evalsuite.models.slide.text_tower import SlideTextTower
from evalsuite.models.vision_language import conch as vlm_conch
from evalsuite.models.vision_language import tokenizer_files
from evalsuite.probes.recipes import load_recipe
from evalsuite.probes.texts.class_texts import PLACEHOLDER, with_class_texts
from evalsuite.probes.texts.zeroshot import ZeroShotProbe
from evalsuite.tasks.cards import load_card

pytest.importorskip("open_clip")
pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SLIDES = 5


@pytest.fixture(autouse=True)
def tokenizers_placed_by_the_test(monkeypatch):
    monkeypatch.delenv(vlm_conch.TOKENIZER_ENV, raising=False)
    monkeypatch.delenv("EVALSUITE_BIOGPT_TOKENIZER", raising=False)
    monkeypatch.setattr(tokenizer_files, "installed_package_files", lambda *where: [])


# Two names for one class and one for the other, two templates: 6 prompts of different lengths, a few tokens each
# (the text towers' cost grows with prompts x context; TITAN pads every prompt to 128 ids).
PROMPTS = {"class_names": {"stroma": ["low", "a b"], "tumour": ["c"]}, "templates": ["CLASSNAME.", "a low CLASSNAME"]}


def _card():
    card = load_card("demo_slide")
    return dataclasses.replace(card, extra={**card.extra, "zeroshot": {"source": "test", **PROMPTS}})


def _zeroshot_probabilities(tower, slides: np.ndarray, out_dir) -> tuple[np.ndarray, object]:
    """evalsuite's path: the card's prompts through with_class_texts (text cache under out_dir) and the probe."""
    card = _card()
    backbone = SimpleNamespace(name="tile-encoder", weights_id="tiles", text=tower, slide_encoder=None)
    (recipe,) = with_class_texts([load_recipe("zeroshot")], card, backbone, out_dir, torch.device("cpu"))
    texts = recipe.context["class_texts"]
    probe = ZeroShotProbe(card.num_classes, class_texts=texts).fit(None, None, None, None)
    return probe.predict_proba(slides), texts


def _prompts(card) -> dict:
    block = card.extra["zeroshot"]
    return {c: [[t.replace(PLACEHOLDER, name) for t in block["templates"]] for name in block["class_names"][c]]
            for c in card.classes}


def _slides(width: int) -> np.ndarray:
    return torch.randn(SLIDES, width, generator=torch.Generator().manual_seed(3)).numpy().astype(np.float16)


def test_titan_zero_shot_is_titans_classifier_and_softmax(tmp_path, monkeypatch):
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(write_conch_tokenizer(tmp_path / vlm_conch.TOKENIZER_NAME)))
    spec = SLIDE_ENCODERS["titan"]
    tower = SlideTextTower(spec, None, "random-init:seed0")
    slides = _slides(spec.embed_dim)
    ours, texts = _zeroshot_probabilities(tower, slides, tmp_path / "out")

    net = tower.network
    with torch.no_grad():  # modeling_titan.py: zero_shot_classifier, then zero_shot
        classifier = []
        for per_name in _prompts(_card()).values():
            rows = torch.stack([F.normalize(net.text_encoder(tower.tokenizer(prompts)[:, :-1]), dim=-1)
                                for prompts in per_name])
            mean = rows.mean(dim=(0, 1))
            classifier.append(mean / mean.norm())
        slide = F.normalize(torch.from_numpy(slides).float() @ net.image_proj, dim=-1)  # @ vision_encoder.proj
        reference = F.softmax(slide @ torch.stack(classifier, dim=1), dim=-1).numpy()
    assert texts.logit_scale == 1.0  # TITAN's zero_shot: no temperature
    np.testing.assert_allclose(ours, reference, atol=1e-3)
    assert np.abs(ours - 0.5).max() > 1e-3  # the scores differ between slides: the check is not of constants


def test_prism_zero_shot_sums_each_classes_prompt_probabilities(tmp_path, monkeypatch):
    pytest.importorskip("sacremoses")
    folder = tmp_path / "biogpt"
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(VOCAB)}))
    (folder / "merges.txt").write_text("l o 30\nlo w</w> 20\n")
    monkeypatch.setenv("EVALSUITE_BIOGPT_TOKENIZER", str(folder))
    base = SLIDE_ENCODERS["prism"]
    spec = dataclasses.replace(base, embed_dim=8, extra={**base.extra, "text": {**base.extra["text"], **SMALL}})
    tower = SlideTextTower(spec, None, "random-init:seed0")
    slides = _slides(spec.embed_dim)
    ours, texts = _zeroshot_probabilities(tower, slides, tmp_path / "out")

    net, prompts = tower.network, _prompts(_card())
    flat = [p for per_name in prompts.values() for names in per_name for p in names]
    owner = np.repeat(np.arange(len(prompts)), [sum(map(len, v)) for v in prompts.values()])
    with torch.no_grad():  # modeling_prism.py zero_shot: one batch, softmax over all prompts, summed per class
        text = net.encode_text(tower.tokenizer(flat))
        image = F.normalize(torch.from_numpy(slides).float() @ net.image_projection(), dim=-1)
        prompt_probabilities = F.softmax(image @ text.T * net.logit_scale(), dim=-1).numpy()
    reference = np.stack([prompt_probabilities[:, owner == c].sum(axis=1) for c in range(len(prompts))], axis=1)
    assert texts.rule == "sum_prompt_probabilities" and texts.embeddings["templates"].shape[0] == len(flat)
    np.testing.assert_allclose(ours, reference, atol=1e-3)


def test_titan_text_in_the_published_layout_loads_key_for_key(tmp_path):
    spec = SLIDE_ENCODERS["titan"]
    source = SlideTextTower(spec, None, "random-init:seed0").network
    state = {("vision_encoder.proj" if k == "image_proj" else k): v.half() for k, v in source.state_dict().items()}
    state.update({"vision_encoder.norm.weight": torch.ones(768).half(),  # the slide ViT: read by titan.py, not here
                  "vision_encoder.attn_pool.query": torch.zeros(128, 768).half()})
    torch.save(state, tmp_path / "model.pth")
    loaded = SlideTextTower(spec, tmp_path / "model.pth", "w").network.state_dict()
    assert torch.equal(loaded["image_proj"], state["vision_encoder.proj"].float())
    key = "text_encoder.transformer.resblocks.11.mlp.c_proj.weight"
    assert torch.equal(loaded[key], state[key].float())
    del state["text_encoder.cls_emb"]
    torch.save(state, tmp_path / "broken.pth")
    with pytest.raises(EvalsuiteError, match="text_encoder.cls_emb"):
        SlideTextTower(spec, tmp_path / "broken.pth", "w").network


def test_titan_without_conchs_tokenizer_file_names_titan_and_the_file(tmp_path):
    tower = SlideTextTower(SLIDE_ENCODERS["titan"], tmp_path / "model.pth", "w")
    with pytest.raises(EvalsuiteError) as error:
        tower.prompt_token_ids(["tumor"])
    message = str(error.value)
    assert "\n" not in message and "model 'titan' needs CONCH's tokenizer file" in message


def test_titan_reads_a_tokenizer_json_beside_its_weights_checked_as_conchs(tmp_path):
    write_conch_tokenizer(tmp_path / "TITAN" / "tokenizer.json")
    tower = SlideTextTower(SLIDE_ENCODERS["titan"], tmp_path / "TITAN" / "model.safetensors", "w")
    assert tower.prompt_token_ids(["tumor"])[0][0] == 1  # <start_of_text>, as CONCH's file lays a prompt out
    assert "sha256:" in tower.tokenizer_id
    (tmp_path / "TITAN" / "tokenizer.json").write_text("{}")
    with pytest.raises(EvalsuiteError, match="cannot read CONCH's tokenizer"):
        SlideTextTower(SLIDE_ENCODERS["titan"], tmp_path / "TITAN" / "model.safetensors", "w").prompt_token_ids(["a"])


def test_madeleines_backbone_has_no_text_tower_though_its_tile_encoder_has_one():
    backbone = build_backbone("madeleine", None, True)
    assert backbone.slide_encoder.spec.tile_encoder == "conch" and backbone.text is None
