"""Shipped cards' zero-shot prompts follow the source their `zeroshot.source` names (issue 42)."""

import numpy as np

from evalsuite.probes.texts.class_texts import prompt_sets
from evalsuite.tasks.cards import load_card


def test_crc_prompts_are_conchs_names_times_all_22_templates():
    """mahmoodlab/CONCH prompts/crc100k_prompts_all_per_class.json (141cc09): 41 class names, 22 templates."""
    card = load_card("crc")
    assert "CONCH" in card.extra["zeroshot"]["source"]
    (prompt_set,) = prompt_sets(card)
    names_per_class = [5, 4, 4, 5, 4, 5, 4, 5, 5]  # ADI BACK DEB LYM MUC MUS NORM STR TUM
    assert list(np.bincount(prompt_set.prompt_class)) == [22 * n for n in names_per_class]
    assert prompt_set.texts[:2] == ["adipose.", "a photomicrograph showing adipose."]
    assert prompt_set.texts[-1] == "malignant epithelium, H&E."
