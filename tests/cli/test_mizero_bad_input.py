"""Bad input to the slide-level zero-shot probe (mizero, issue 42) through the CLI: one line naming the file and the
fix, a non-zero exit, nothing extracted and nothing on the leaderboard."""

import pytest
from conftest import REPO, assert_one_line_error, run_cli

CARD = REPO / "datasets" / "demo_slide.yaml"


def _no_output(out) -> None:
    assert not (out / "leaderboard.csv").exists()
    assert not list((out / "cache").glob("*/manifest.json")) if (out / "cache").exists() else True


def test_a_slide_card_without_a_zeroshot_block(tmp_path):
    pytest.importorskip("open_clip")
    text = CARD.read_text()
    card = tmp_path / "no_prompts.yaml"
    card.write_text(text[: text.index("zeroshot:")])  # the shipped card up to its prompt block
    out = tmp_path / "out"
    result = run_cli("run", "--task", card, "--model", "clip-vit-b-16", "--random-init", "--probes", "mizero",
                     "--out", out)
    assert_one_line_error(result, f"task card {card}", "probe mizero needs a `zeroshot:` block", "docs/zeroshot.md")
    _no_output(out)


def test_a_model_without_a_text_tower(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo_slide", "--model", "test_vit", "--random-init", "--probes", "mizero",
                     "--out", out)
    assert_one_line_error(result, "probe mizero needs a vision-language model", "'test_vit'",
                          "--model clip-vit-b-16")
    _no_output(out)


def test_the_tile_zeroshot_recipe_on_a_slide_card_points_to_mizero(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo_slide", "--model", "test_vit", "--random-init", "--probes", "zeroshot",
                     "--out", out)
    assert_one_line_error(result, "zeroshot.yaml", "caches bags", "mizero")
    _no_output(out)
