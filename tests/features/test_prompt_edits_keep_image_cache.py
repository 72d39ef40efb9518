"""A card's zero-shot prompts are not part of its image cache key (issue 42): editing or adding prompts re-encodes
only the prompts (the text cache keys them), while a field that changes the features still gives a new cache."""

import json

import pytest
from conftest import run_cli

from evalsuite.tasks.cards import find_card

pytestmark = pytest.mark.slow


def _card(tmp_path, name: str, replace: tuple = ("", "")) -> str:
    text = find_card("demo").read_text().replace(*replace)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def _cached(card: str, out) -> list:
    plan = run_cli("budget", "--task", card, "--model", "test_vit", "--random-init", "--json", "--out", out)
    assert plan.returncode == 0, plan.stderr
    return [split["cached"] for split in json.loads(plan.stdout)["splits"]]


def test_new_prompts_reuse_the_image_cache_and_a_feature_field_does_not(tmp_path):
    out = tmp_path / "out"
    first = run_cli("run", "--task", _card(tmp_path, "first"), "--model", "test_vit", "--random-init", "--probes",
                    "knn", "--num-workers", "0", "--out", out)
    assert first.returncode == 0, first.stderr
    edited = _card(tmp_path, "edited", ('"CLASSNAME is present."', '"a tile of CLASSNAME."'))
    assert _cached(edited, out) == [True, True, True]
    repooled = _card(tmp_path, "repooled", ("\nzeroshot:", "\npooling: mean_patch\nzeroshot:"))
    assert _cached(repooled, out) == [False, False, False]
