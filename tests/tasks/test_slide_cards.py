"""Slide and survival cards: the shipped ones load, bad tiling and misplaced fields are one-line errors, and a probe
must read what the card's kind caches."""

import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.probes.recipes import check_recipe_fits, load_recipe
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.kinds import KINDS

SLIDE = """name: s
kind: slide
reader: {name: slide_csv}
classes: [a, b]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [abmil]
"""


@pytest.mark.parametrize("name", ["demo_slide", "slide_csv", "slide_survival_csv", "camelyon16", "panda",
                                  "panda_small"])
def test_shipped_slide_cards_load(name):
    card = load_card(name)
    assert KINDS[card.kind].bags
    for probe in card.probes:
        check_recipe_fits(load_recipe(probe), card)


def test_a_survival_card_has_no_classes():
    assert load_card("slide_survival_csv").classes == []


def test_a_survival_card_with_prompts_is_told_which_kinds_take_them(tmp_path):
    path = tmp_path / "card.yaml"
    path.write_text(SLIDE.replace("kind: slide", "kind: survival").replace("classes: [a, b]\n", "")
                    .replace("balanced_accuracy", "c_index") + "zeroshot: {templates: ['{}']}\n")
    with pytest.raises(EvalsuiteError, match="field 'zeroshot' applies to classification and slide cards only"):
        load_card(str(path))


@pytest.mark.parametrize("extra, message", [
    ("tiling: {target_mpp: -1}\n", "tiling.target_mpp must be a positive float"),
    ("tiling: {tile_size_px: 22.5}\n", "tiling.tile_size_px must be a positive int"),
    ("tiling: {min_tissue_fraction: 1.5}\n", "min_tissue_fraction is a fraction"),
    ("tiling: {overlap: 0.5}\n", "field 'tiling' must be a mapping of"),
    ("layers: [-1]\n", "field 'layers' applies to segmentation cards only"),
])
def test_bad_slide_card_fields_are_one_line_errors(tmp_path, extra, message):
    path = tmp_path / "card.yaml"
    path.write_text(SLIDE + extra)
    with pytest.raises(EvalsuiteError, match=message) as caught:
        load_card(str(path))
    assert "\n" not in str(caught.value)


def test_survival_card_listing_classes_is_refused(tmp_path):
    path = tmp_path / "card.yaml"
    path.write_text(SLIDE.replace("kind: slide", "kind: survival").replace("balanced_accuracy", "c_index"))
    with pytest.raises(EvalsuiteError, match="a survival card has no 'classes'"):
        load_card(str(path))


@pytest.mark.parametrize("task, probe", [("demo_slide", "linear"), ("demo", "abmil"), ("demo_slide", "seg_linear")])
def test_a_probe_that_reads_other_features_is_refused(task, probe):
    with pytest.raises(EvalsuiteError, match=f"probe '{probe}' reads .* but .* task '{task}' caches"):
        check_recipe_fits(load_recipe(probe), load_card(task))
