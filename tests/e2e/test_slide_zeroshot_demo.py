"""Zero-shot with a slide encoder's own text tower through the CLI (issue 51): `evalsuite run --model titan
--random-init --probes zeroshot` on demo_slide's card tiled as TITAN tiles, one tile per slide of eight demo slides
(zeroshot reads the test split only: CONCH v1.5's ViT-L at 448 px on four tiles is the costly part), with a small
tokenizer file in CONCH's format: a row with intervals over patients, stored test probabilities, TITAN's logit scale 1
and the chance-level note. A slide encoder without a text tower (CHIEF) is refused in one line."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from conch_tokenizer_file import write_conch_tokenizer
from conftest import assert_one_line_error, run_record
from test_slide_encoder_demo import _demo_subset

from evalsuite.models.vision_language import conch as vlm_conch
from evalsuite.models.vision_language import tokenizer_files
from evalsuite.tasks.resources import cards_dir, find_yaml

pytest.importorskip("open_clip")
pytestmark = pytest.mark.slow

PROMPTS = {"source": "test: two names, two templates", "class_names": {"stroma": ["stroma"], "tumour": ["carcinoma"]},
           "templates": ["CLASSNAME.", "an image of CLASSNAME."]}


def _one_tile_card(folder: Path) -> Path:
    """demo_slide's card, one tile per slide, fewer prompts (TITAN's text tower pads each to 128 ids)."""
    card = yaml.safe_load(find_yaml("demo_slide", cards_dir(), "task card", "task").read_text())
    card["tiling"] = {**card["tiling"], "max_tiles": 1}
    card["zeroshot"] = PROMPTS
    path = folder / "demo_slide_titan_zeroshot.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


@pytest.fixture
def titan_setup(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_files, "installed_package_files", lambda *where: [])
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(write_conch_tokenizer(tmp_path / vlm_conch.TOKENIZER_NAME)))
    data = _demo_subset(tmp_path / "data", {"train": 1, "val": 1, "test": 2})
    return _one_tile_card(tmp_path), data


def test_titan_zero_shot_on_demo_slides_through_its_own_text_tower(titan_setup, tmp_path, cli_in_process):
    card, data = titan_setup
    result = cli_in_process("run", "--task", card, "--data-root", data, "--model", "titan", "--random-init",
                            "--probes", "zeroshot", "--num-workers", "0", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    record = run_record(tmp_path / "out", result)
    (probe,) = record["probes"]
    assert probe["probe"] == "zeroshot" and probe["selected_params"]["logit_scale"] == 1.0
    assert probe["selected_params"]["prompts"] == 4
    assert probe["intervals_95"]["test"]["balanced_accuracy"]
    assert record["slides"]["test"]["tiles"] == 4 and set(record["slides"]) == {"test"}  # test only, one tile each
    probabilities = np.load(tmp_path / "out" / "runs" / record["predictions"]["file"])["proba_0"]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert "zeroshot ran with random weights" in result.stdout + result.stderr
    timings = record["timings_s"]
    assert 0 < timings["slide_encoder_s"] < timings["features_s"]  # the slide stage's share, apart from the tiles'


def test_a_slide_encoder_without_a_text_tower_is_refused_for_zero_shot(titan_setup, tmp_path, cli_in_process):
    card, data = titan_setup
    result = cli_in_process("run", "--task", card, "--data-root", data, "--model", "chief", "--random-init",
                            "--probes", "zeroshot", "--out", tmp_path / "out")
    assert_one_line_error(result, "slide encoder 'chief' has none", "--model titan")
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


def test_text_retrieval_with_a_slide_encoder_is_refused_before_anything_is_built(tmp_path, cli_in_process):
    """Slide-text retrieval is not built: refused from the recipe, naming zeroshot, before the data is read."""
    result = cli_in_process("run", "--task", "demo_slide", "--model", "titan", "--random-init", "--probes",
                            "text_retrieval", "--out", tmp_path / "out")
    assert_one_line_error(result, "slide-text retrieval with slide encoder titan's text tower is not built",
                          "--probes zeroshot")


def test_titan_without_a_tokenizer_file_is_refused_before_any_tile_or_prompt_is_cached(titan_setup, tmp_path,
                                                                                        cli_in_process, monkeypatch):
    card, data = titan_setup
    monkeypatch.delenv(vlm_conch.TOKENIZER_ENV)
    out = tmp_path / "out"
    result = cli_in_process("run", "--task", card, "--data-root", data, "--model", "titan", "--random-init",
                            "--probes", "zeroshot", "--num-workers", "0", "--out", out)
    assert_one_line_error(result, "model 'titan' needs CONCH's tokenizer file", vlm_conch.TOKENIZER_ENV)
    assert result.returncode == 2 and not (out / "leaderboard.csv").exists()
    assert not [p for p in out.glob("cache/*") if not p.name.startswith(".")]  # no tile, slide or prompt cache
