"""The zeroshot probe (issue 42): its scores against an independent numpy re-computation, prompt ensembling against
a hand-computed case, the card's prompt block checks, and (CLIP architecture) open_clip's own zero-shot classifier
built from the same prompts."""

import dataclasses

import numpy as np
import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.probes.recipes import load_recipe
from evalsuite.probes.texts.class_texts import ClassTexts, ensemble_class_embeddings, prompt_sets, with_class_texts
from evalsuite.probes.texts.zeroshot import ZeroShotProbe
from evalsuite.tasks.cards import load_card


def _texts(embeddings: dict, logit_scale: float = 100.0) -> ClassTexts:
    return ClassTexts(embeddings, logit_scale, {name: 1 for name in embeddings}, {name: "k" for name in embeddings},
                      "test")


def test_ensembling_is_the_normalised_mean_of_normalised_prompt_embeddings():
    # Class 0 has prompts (3, 4) and (0, 2): unit vectors (0.6, 0.8) and (0, 1); mean (0.3, 0.9), norm sqrt(0.9).
    # Class 1 has one prompt (-5, 0): unit (-1, 0).
    prompts = np.array([[3.0, 4.0], [0.0, 2.0], [-5.0, 0.0]])
    got = ensemble_class_embeddings(prompts, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(got, [[0.3 / np.sqrt(0.9), 0.9 / np.sqrt(0.9)], [-1.0, 0.0]], atol=1e-7)


def test_scores_equal_a_numpy_recomputation():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(300, 16)).astype(np.float16)  # the cache's dtype
    classes = ensemble_class_embeddings(rng.normal(size=(12, 16)), np.repeat(np.arange(4), 3), 4)
    probe = ZeroShotProbe(4, batch_size=64, class_texts=_texts({"templates": classes}, 37.5))
    probe.fit(None, None, None, None)  # nothing to fit: train and val are not read with one prompt set
    x = images.astype(np.float64)
    logits = 37.5 * (x / np.linalg.norm(x, axis=1, keepdims=True)) @ classes.astype(np.float64).T
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probe.logits(images), logits, atol=1e-4, rtol=1e-6)
    np.testing.assert_allclose(probe.predict_proba(images), expected, atol=1e-6)
    assert probe.selected_params_["trained_on"] == "nothing (zero-shot)"


def test_val_chooses_between_prompt_sets_by_the_selection_metric():
    images = np.eye(2, dtype=np.float16)
    labels = np.array([0, 1])
    right, swapped = np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32)[::-1].copy()
    probe = ZeroShotProbe(2, class_texts=_texts({"swapped": swapped, "right": right}))
    probe.fit(None, None, images, labels, "balanced_accuracy")
    assert probe.selected_params_["prompt_set"] == "right"
    assert probe.selected_params_["val_by_prompt_set"] == {"swapped": 0.0, "right": 1.0}


def test_the_probe_without_class_texts_is_a_one_line_error():
    with pytest.raises(EvalsuiteError, match="needs the class texts of a vision-language model"):
        ZeroShotProbe(3)


def test_demo_prompts_are_names_times_templates_class_by_class():
    card = load_card("demo")
    (prompt_set,) = prompt_sets(card)
    assert len(prompt_set.texts) == 3 * 3 * 6 and prompt_set.texts[0] == "connective tissue."
    assert prompt_set.texts[1] == "an image of connective tissue."
    assert list(np.bincount(prompt_set.prompt_class)) == [18, 18, 18]


@pytest.mark.parametrize("block, fragment", [
    (None, "needs a `zeroshot:` block"),
    ({"class_names": {"connective": ["a"]}, "templates": ["CLASSNAME."]}, "must map every class"),
    ({"class_names": {"connective": ["a"], "inflammatory": ["b"], "neoplastic": ["c"]}, "templates": ["a {}."]},
     "must hold CLASSNAME exactly once"),
])
def test_a_bad_prompt_block_names_the_card_and_the_fix(block, fragment):
    card = load_card("demo")
    card = dataclasses.replace(card, extra={**card.extra, "zeroshot": block})
    with pytest.raises(EvalsuiteError, match=fragment) as error:
        prompt_sets(card)
    assert str(card.path) in str(error.value) and "\n" not in str(error.value)


def test_a_model_without_a_text_tower_is_refused_before_any_forward(tmp_path):
    backbone = type("Backbone", (), {"name": "uni", "text": None})()
    with pytest.raises(EvalsuiteError, match="'uni' has none; use --model clip-vit-b-16"):
        with_class_texts([load_recipe("zeroshot")], load_card("demo"), backbone, tmp_path, "cpu")


@pytest.mark.slow
def test_class_embeddings_equal_open_clips_zero_shot_classifier_and_are_cached(tmp_path):
    open_clip = pytest.importorskip("open_clip")
    from evalsuite.models.backbones import build_backbone

    backbone = build_backbone("clip-vit-b-16", random_init=True)
    card = load_card("demo")
    (recipe,) = with_class_texts([load_recipe("zeroshot")], card, backbone, tmp_path, torch.device("cpu"))
    ours = recipe.context["class_texts"].embeddings["templates"]
    # open_clip's classifier takes one name per class: compare class by class with each name alone.
    block = card.extra["zeroshot"]
    templates = [t.replace("CLASSNAME", "{}") for t in block["templates"]]
    names = [block["class_names"][c][0] for c in card.classes]
    theirs = open_clip.build_zero_shot_classifier(backbone.text.clip, backbone.text.tokenizer, names, templates,
                                                  num_classes_per_batch=None).T.numpy()
    first_name = dataclasses.replace(card, extra={**card.extra, "zeroshot": {
        **block, "class_names": {c: [n] for c, n in zip(card.classes, names)}}})
    (single,) = with_class_texts([load_recipe("zeroshot")], first_name, backbone, tmp_path, torch.device("cpu"))
    # Ours read float16 text embeddings back from the cache: equal to 1e-3 of a unit vector's entries.
    np.testing.assert_allclose(single.context["class_texts"].embeddings["templates"], theirs, atol=1e-3)
    assert ours.shape == theirs.shape and not np.allclose(ours, theirs, atol=1e-3)  # three names differ from one
    cached = list((tmp_path / "cache").iterdir())
    assert len([p for p in cached if not p.name.startswith(".")]) == 2  # one text cache per prompt list
