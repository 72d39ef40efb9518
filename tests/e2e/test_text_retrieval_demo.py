"""Text-image retrieval through the CLI (issue 42): a tiny tile_csv card with captions made here, and the one-line
refusals before any image forward: a card without texts, a k above the test images, a model without a text tower.
The demo's class-text run (`--probes text_retrieval` on the demo) is in test_zeroshot_demo.py, on that file's caches.

Cost: one extraction of the 20-tile caption card by a random-init ViT-B/16."""


import numpy as np
import pytest
from conftest import run_cli, run_record
from PIL import Image

pytestmark = pytest.mark.slow
pytest.importorskip("open_clip")

VLM = ("--model", "clip-vit-b-16", "--random-init")


def _caption_card(tmp_path, captions: bool = True):
    """A 20-tile tile_csv cohort (4 train, 4 val, 12 test tiles of two classes), with a caption per tile."""
    rng = np.random.default_rng(0)
    lines = ["image_path,label,split" + (",caption" if captions else "")]
    for i, split in enumerate(["train"] * 4 + ["val"] * 4 + ["test"] * 12):
        label = ["benign", "tumour"][i % 2]
        Image.fromarray(rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)).save(tmp_path / f"t{i}.png")
        lines.append(f"t{i}.png,{label},{split}" + (f",tile {i}: {label} tissue, H&E" if captions else ""))
    (tmp_path / "tiles.csv").write_text("\n".join(lines) + "\n")
    card = tmp_path / "card.yaml"
    card.write_text("name: captions\nkind: classification\nreader: {name: tile_csv, args: {manifest: tiles.csv}}\n"
                    f"data_root: {tmp_path}\nclasses: [benign, tumour]\nsplits: [train, val, test]\n"
                    "selection_metric: balanced_accuracy\nprobes: [text_retrieval]\n")
    return card


def test_captions_are_the_texts_where_the_manifest_has_them(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--task", _caption_card(tmp_path), *VLM, "--probes", "text_retrieval", "--out", out)
    assert result.returncode == 0, result.stderr
    (probe,) = run_record(out, result)["probes"]
    assert probe["selected_params"]["texts"] == "captions" and probe["selected_params"]["captions"] == 12
    test = probe["metrics"]["test"]
    assert set(test) == {f"{way}_recall@{k}" for way in ("image_to_text", "text_to_image") for k in (1, 5, 10)}
    assert all(0 <= value <= 1 for value in test.values()) and set(probe["intervals_95"]["test"]) == set(test)


@pytest.mark.parametrize("case", ["no texts", "k too large", "not a vision-language model"])
def test_bad_inputs_are_one_line_naming_the_file_or_parameter_and_the_fix(tmp_path, case):
    task, model, probes = "demo", VLM, "text_retrieval"
    if case == "no texts":
        task = _caption_card(tmp_path, captions=False)
        expected = [f"task card {task.resolve()}", "`zeroshot:` block", "`caption` column"]
    elif case == "k too large":
        probes = tmp_path / "big_k.yaml"
        probes.write_text("name: text_retrieval_big_k\nprobe: text_retrieval\nparams:\n  ks: [1, 1000]\n")
        expected = [f"probe recipe {probes.resolve()}", "k=1000", "use ks of at most 112 (`ks` in the probe recipe)"]
    else:
        model = ("--model", "efficientnet_lite0_imagenet", "--random-init")
        expected = ["'efficientnet_lite0_imagenet' has none", "use --model clip-vit-b-16"]
    result = run_cli("run", "--task", task, *model, "--probes", probes, "--out", tmp_path / "out")
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if line.strip()][-1:]
    assert all(fragment in line for fragment in expected), result.stderr
    assert not list((tmp_path / "out").glob("cache/*/features.npy"))  # refused before any forward
