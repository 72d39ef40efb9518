"""A run extracts only the splits its probes read (issue 49, item 7): a zero-shot probe with one prompt set reads
test alone, so the zero-shot demo embeds its 112 test tiles and not its 551; val is added where val has a choice to
make (several prompt sets, mizero's several Ks); a probe that learns from train (linear, ...) still gets all three.

The split declarations (probes.base.splits_read) are checked in-process for every shipped probe; the runs use a
20-tile tile_csv card (4 train, 4 val, 12 test tiles of 32 px) with a random-init CLIP, in-process. The demo's own
zero-shot command is checked in tests/e2e/test_zeroshot_demo.py, whose runs it shares."""

import types

import pytest
from conftest import leaderboard_rows, run_record

from evalsuite.probes import PROBES
from evalsuite.probes.base import splits_read
from evalsuite.probes.recipes import load_recipe
from evalsuite.runner import probe_splits

ALL = ("train", "val", "test")
VLM = ("--model", "clip-vit-b-16", "--random-init")


def _texts(prompt_sets: int):
    return types.SimpleNamespace(embeddings={f"set{i}": None for i in range(prompt_sets)})


def _recipe(name: str, prompt_sets: int = 1, **params):
    recipe = load_recipe(name)
    context = {"class_texts": _texts(prompt_sets)} if getattr(PROBES[recipe.probe], "reads_class_texts", False) \
        else {}
    return types.SimpleNamespace(probe=recipe.probe, params={**recipe.params, **params}, context=context)


@pytest.mark.parametrize("name", ["linear", "knn", "fewshot", "retrieval", "ridge", "ridge_hest", "abmil", "meanpool",
                                  "seg_linear", "seg_masktransformer"])
def test_a_probe_that_learns_from_train_reads_every_split(name):
    recipe = _recipe(name)
    assert splits_read(PROBES[recipe.probe], recipe.params, recipe.context) == ALL


@pytest.mark.parametrize(("name", "prompt_sets", "params", "expected"), [
    ("zeroshot", 1, {}, ("test",)),
    ("zeroshot", 2, {}, ("val", "test")),  # val chooses the prompt set
    ("text_retrieval", 1, {}, ("test",)),
    ("mizero", 1, {}, ("val", "test")),  # the shipped recipe's five Ks: val chooses K
    ("mizero", 1, {"topj": [10]}, ("test",)),
    ("mizero", 2, {"topj": [10]}, ("val", "test")),
])
def test_a_zero_shot_probe_reads_test_and_val_only_where_val_chooses(name, prompt_sets, params, expected):
    recipe = _recipe(name, prompt_sets, **params)
    assert splits_read(PROBES[recipe.probe], recipe.params, recipe.context) == expected


def test_a_run_extracts_the_union_of_its_probes_splits():
    assert probe_splits([_recipe("zeroshot")]) == ("test",)
    assert probe_splits([_recipe("zeroshot"), _recipe("linear")]) == ALL
    assert probe_splits([_recipe("zeroshot", 2), _recipe("text_retrieval")]) == ("val", "test")
    assert probe_splits([_recipe("zeroshot")], folds=5) == ALL  # folds merge rows split by split: all three


def _card(tmp_path, templates: str = '["CLASSNAME.", "an image of CLASSNAME."]'):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    lines = ["image_path,label,split"]
    for i, split in enumerate(["train"] * 4 + ["val"] * 4 + ["test"] * 12):
        Image.fromarray(rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)).save(tmp_path / f"t{i}.png")
        lines.append(f"t{i}.png,{['benign', 'tumour'][i % 2]},{split}")
    (tmp_path / "tiles.csv").write_text("\n".join(lines) + "\n")
    card = tmp_path / "card.yaml"
    card.write_text("name: tiny_zeroshot\nkind: classification\nreader: {name: tile_csv, args: {manifest: tiles.csv}}\n"
                    f"data_root: {tmp_path}\nclasses: [benign, tumour]\nsplits: [train, val, test]\n"
                    "selection_metric: balanced_accuracy\nprobes: [linear]\n"
                    "zeroshot:\n  source: test\n  class_names: {benign: [benign tissue], tumour: [tumour]}\n"
                    f"  templates: {templates}\n")
    return card


def _splits_of_rows(out, probe: str, run_id: str) -> set:
    return {row["split"] for row in leaderboard_rows(out) if row["probe"] == probe and row["run_id"] == run_id}


@pytest.mark.slow
def test_zeroshot_alone_extracts_test_and_with_linear_the_other_two(tmp_path, cli_in_process):
    pytest.importorskip("open_clip")
    card, out = _card(tmp_path), tmp_path / "out"
    alone = cli_in_process("run", "--task", card, *VLM, "--probes", "zeroshot", "--out", out)
    assert alone.returncode == 0, alone.stderr
    first = run_record(out, alone)
    assert first["samples_extracted"] == {"test": 12} and set(first["cache"]["keys"]) == {"test"}
    assert _splits_of_rows(out, "zeroshot", first["run_id"]) == {"test"}
    both = cli_in_process("run", "--task", card, *VLM, "--probes", "zeroshot,linear", "--out", out)
    assert both.returncode == 0, both.stderr
    second = run_record(out, both)
    # The test cache is the first run's; train and val are extracted now, for the linear probe.
    assert second["samples_extracted"] == {"train": 4, "val": 4, "test": 0}
    assert second["cache"]["keys"]["test"] == first["cache"]["keys"]["test"] and set(second["cache"]["keys"]) == set(ALL)
    assert _splits_of_rows(out, "linear", second["run_id"]) == set(ALL)
    assert _splits_of_rows(out, "zeroshot", second["run_id"]) == {"test"}  # the same rows as when it runs alone


@pytest.mark.slow
def test_several_prompt_sets_add_val_for_the_choice(tmp_path, cli_in_process):
    pytest.importorskip("open_clip")
    card, out = _card(tmp_path, '{plain: ["CLASSNAME."], image: ["an image of CLASSNAME."]}'), tmp_path / "out"
    result = cli_in_process("run", "--task", card, *VLM, "--probes", "zeroshot", "--out", out)
    assert result.returncode == 0, result.stderr
    record = run_record(out, result)
    assert record["samples_extracted"] == {"val": 4, "test": 12} and set(record["cache"]["keys"]) == {"val", "test"}
    assert set(record["probes"][0]["selected_params"]["val_by_prompt_set"]) == {"plain", "image"}
