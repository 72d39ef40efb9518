"""The mizero probe (issue 42, MI-Zero slide-level zero-shot): top-K pooling against a hand-computed case and a
numpy re-computation of CONCH's definition, K clipped to a slide's tiles as CONCH clips it, K and the prompt set
chosen on val (train never read), and the slide card's `zeroshot:` block."""

import dataclasses

import numpy as np
import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import SlideBags
from evalsuite.models.vision_language.towers import ImageToJoint
from evalsuite.probes import PROBES
from evalsuite.probes.bags.mizero import DEFAULT_TOPJ, MIZeroProbe, topj_pooled_cosines
from evalsuite.probes.recipes import check_recipe_fits, load_recipe
from evalsuite.probes.texts.class_texts import ClassTexts, ensemble_class_embeddings
from evalsuite.tasks.cards import load_card


def _texts(embeddings: dict, logit_scale: float = 100.0) -> ClassTexts:
    return ClassTexts(embeddings, logit_scale, {name: 1 for name in embeddings}, {name: "k" for name in embeddings},
                      "test")


def _bags(per_slide: list) -> SlideBags:
    offsets = np.concatenate([[0], np.cumsum([len(tiles) for tiles in per_slide])])
    return SlideBags(np.concatenate(per_slide).astype(np.float16), offsets)


def _conch_mizero(tiles: np.ndarray, classes: np.ndarray, j: int, logit_scale: float) -> tuple:
    """CONCH's run_mizero for one slide and one j, re-written in numpy from its definition: tiles normalised,
    cosines with the (normalised) class embeddings, per class the mean of the min(j, tiles) highest cosines, the
    argmax, and softmax(logit_scale x pooled)."""
    x = tiles.astype(np.float64)
    cosines = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ classes.astype(np.float64).T
    top = -np.sort(-cosines, axis=0)[: min(j, len(tiles))]
    pooled = top.mean(axis=0)
    scaled = logit_scale * pooled
    proba = np.exp(scaled - scaled.max())
    return pooled, proba / proba.sum()


def test_topj_pooling_equals_a_hand_computed_case():
    # Class 0's tile cosines 0.1, 0.5, 0.3: top-1 0.5, top-2 (0.5 + 0.3) / 2; class 1's 0.9, 0.2, 0.4: top-1 0.9,
    # top-2 (0.9 + 0.4) / 2. j = 5 > 3 tiles is clipped to 3: the mean of every tile.
    cosines = torch.tensor([[0.1, 0.9], [0.5, 0.2], [0.3, 0.4]])
    got = topj_pooled_cosines(cosines, (1, 2, 5))
    np.testing.assert_allclose(got.numpy(), [[0.5, 0.9], [0.4, 0.65], [0.3, 0.5]], atol=1e-7)


@pytest.mark.parametrize("topj", DEFAULT_TOPJ)
def test_slide_probabilities_equal_a_numpy_recomputation_of_conchs_definition(topj):
    rng = np.random.default_rng(topj)
    slides = [rng.normal(size=(n, 16)) for n in (1, 7, 60, 130, 12)]  # fewer and more tiles than j
    classes = ensemble_class_embeddings(rng.normal(size=(9, 16)), np.repeat(np.arange(3), 3), 3)
    bags = _bags(slides)
    probe = MIZeroProbe(3, topj=[topj], class_texts=_texts({"templates": classes}, 37.5))
    probe.fit(None, None, None, None)  # one prompt set and one j: nothing is read
    expected = [_conch_mizero(np.asarray(bags.bag(i)), classes, topj, 37.5) for i in range(len(bags))]
    np.testing.assert_allclose(probe.pooled_cosines(bags), [pooled for pooled, _ in expected], atol=1e-6)
    np.testing.assert_allclose(probe.predict_proba(bags), [proba for _, proba in expected], atol=1e-6)
    assert probe.selected_params_["topj"] == topj and probe.selected_params_["trained_on"] == "nothing (zero-shot)"


def test_tiles_cached_before_a_projection_are_projected_as_conchs_forward_project():
    """CONCH's run_mizero projects stored tile features (`forward_project`) before the cosines: bags of the features
    before the projection, with the projection in the class texts, score as bags of the projected tiles."""
    rng = np.random.default_rng(3)
    before = [rng.normal(size=(n, 16)).astype(np.float16) for n in (4, 9, 2)]
    projection = rng.normal(size=(16, 8)).astype(np.float32)
    classes = ensemble_class_embeddings(rng.normal(size=(6, 8)), np.repeat(np.arange(3), 2), 3)
    texts = dataclasses.replace(_texts({"templates": classes}, 20.0), image_to_joint=ImageToJoint(
        torch.from_numpy(projection)))
    probe = MIZeroProbe(3, topj=[2], class_texts=texts).fit(None, None, None, None)
    expected = [_conch_mizero(tiles.astype(np.float32) @ projection, classes, 2, 20.0)[1] for tiles in before]
    np.testing.assert_allclose(probe.predict_proba(_bags(before)), expected, atol=1e-5)


def test_j_beyond_a_slides_tiles_is_clipped_as_conch_clips_it():
    rng = np.random.default_rng(1)
    tiles = rng.normal(size=(3, 8))
    classes = ensemble_class_embeddings(rng.normal(size=(2, 8)), np.arange(2), 2)
    pooled = {}
    for j in (3, 50, 100):
        probe = MIZeroProbe(2, topj=[j], class_texts=_texts({"t": classes})).fit(None, None, None, None)
        pooled[j] = probe.pooled_cosines(_bags([tiles]))
    np.testing.assert_array_equal(pooled[50], pooled[3])
    np.testing.assert_array_equal(pooled[100], pooled[3])
    x = tiles.astype(np.float16).astype(np.float64)
    all_tiles = ((x / np.linalg.norm(x, axis=1, keepdims=True)) @ classes.T).mean(axis=0)
    np.testing.assert_allclose(pooled[3][0], all_tiles, atol=1e-6)


def _one_tumour_tile_slides():
    """Two classes along axes 0 and 1. Every slide is mostly background tiles leaning to class 0; a class-1 slide
    adds one tile on axis 1. Top-1 pooling finds that tile; pooling 50 tiles drowns it in the background."""
    background = np.tile([[1.0, 0.9]], (20, 1))  # cosines 0.743 with class 0, 0.669 with class 1
    tumour = np.vstack([background, [[0.0, 1.0]]])
    labels = np.array([0, 1, 0, 1])
    return _bags([background, tumour, background, tumour]), labels


def test_val_chooses_k_and_the_prompt_set_by_the_selection_metric_and_records_every_score():
    bags, labels = _one_tumour_tile_slides()
    right, swapped = np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32)[::-1].copy()
    probe = MIZeroProbe(2, topj=[50, 1], class_texts=_texts({"swapped": swapped, "right": right}))
    probe.fit(None, None, bags, labels, "balanced_accuracy")  # train is None: it is never read
    params = probe.selected_params_
    assert (params["prompt_set"], params["topj"]) == ("right", 1)
    assert params["val_by_prompt_set_and_topj"] == {"swapped": {"50": 0.5, "1": 0.0}, "right": {"50": 0.5, "1": 1.0}}
    assert params["val_balanced_accuracy"] == 1.0
    assert probe.predict_proba(bags).argmax(axis=1).tolist() == labels.tolist()


def test_ties_keep_the_first_k_of_the_recipe():
    bags, labels = _one_tumour_tile_slides()
    probe = MIZeroProbe(2, topj=[2, 1], class_texts=_texts({"t": np.eye(2, dtype=np.float32)}))
    probe.fit(None, None, bags, labels, "balanced_accuracy")  # top-2 of class 1: (1 + 0.669) / 2 > 0.743
    assert probe.selected_params_["val_by_prompt_set_and_topj"] == {"t": {"2": 1.0, "1": 1.0}}
    assert probe.selected_params_["topj"] == 2


class _CountingBags:
    """Bags that record which slide each read was and what it returned."""

    def __init__(self, bags: SlideBags):
        self.inner, self.reads = bags, []

    def __len__(self):
        return len(self.inner)

    def bag(self, index: int):
        rows = self.inner.bag(index)
        self.reads.append((index, rows.dtype, len(rows)))
        return rows


def test_bags_are_read_float16_one_slide_at_a_time():
    bags, labels = _one_tumour_tile_slides()
    counting = _CountingBags(bags)
    probe = MIZeroProbe(2, topj=[1], class_texts=_texts({"t": np.eye(2, dtype=np.float32)})).fit(None, None, None,
                                                                                                None)
    probe.predict_proba(counting)
    assert counting.reads == [(i, np.float16, int(n)) for i, n in enumerate(bags.tile_counts)]


@pytest.mark.parametrize("topj", [[], [0], [5, 5], [1.5], "10", [True]])
def test_a_bad_topj_is_a_one_line_error(topj):
    with pytest.raises(EvalsuiteError, match="topj must be distinct positive tile counts"):
        MIZeroProbe(2, topj=topj, class_texts=_texts({"t": np.eye(2, dtype=np.float32)}))


def test_the_probe_without_class_texts_is_a_one_line_error():
    with pytest.raises(EvalsuiteError, match="mizero needs the class texts of a vision-language model"):
        MIZeroProbe(2)


def test_the_recipe_is_a_registered_slide_probe_with_conchs_topj():
    recipe = load_recipe("mizero")
    assert PROBES[recipe.probe] is MIZeroProbe and MIZeroProbe.inputs == "bags"
    assert tuple(recipe.params["topj"]) == DEFAULT_TOPJ
    card = load_card("demo_slide")
    assert check_recipe_fits(recipe, card) is recipe
    with pytest.raises(EvalsuiteError, match="reads vectors but slide task 'demo_slide' caches bags; .*mizero"):
        check_recipe_fits(load_recipe("zeroshot"), card)


def test_a_slide_card_takes_a_zeroshot_block_and_a_survival_card_does_not(tmp_path):
    assert set(load_card("demo_slide").extra["zeroshot"]["class_names"]) == {"stroma", "tumour"}
    card = tmp_path / "surv.yaml"
    card.write_text("name: s\nkind: survival\nreader: {name: slide_csv}\nsplits: [train, val, test]\n"
                    "selection_metric: c_index\nprobes: [meanpool]\nzeroshot: {class_names: {}, templates: []}\n")
    with pytest.raises(EvalsuiteError, match="field 'zeroshot' applies to"):
        load_card(str(card))
