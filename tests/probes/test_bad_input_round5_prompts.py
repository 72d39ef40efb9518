"""Zero-shot prompts that would collapse without a word (issue 48), through the CLI in-process: classes with the same
prompts, prompts or captions longer than the text context (CLIP's 77 tokens), an unknown or extra key in the card's
`zeroshot:` block, an empty template set. Each is one line naming the card or manifest and the fix, a non-zero exit,
in under 2 s from the command (the model is built once per module), before any text or image forward: no cache
written and the leaderboard as it was.

Cost: one random-init CLIP ViT-B/16 build for the module; no forward."""

import subprocess
import time

import numpy as np
import pytest
import yaml
from conftest import assert_one_line_error
from PIL import Image

from evalsuite import cli
from evalsuite.models import backbones
from evalsuite.results.leaderboard import append_rows

pytest.importorskip("open_clip")

CLASSES = ["benign", "tumour"]
TEMPLATES = ["CLASSNAME.", "an H&E image of CLASSNAME."]
LONG = " ".join(["tissue"] * 80)  # 80 BPE tokens of CLIP's: past its 77 with any class name


@pytest.fixture(scope="module")
def built_once():
    """`_build_backbone` that builds each model once for the module, and the runner's modules imported (scipy's
    stats take seconds on a first import): the refusals are timed, not the build or the imports."""
    import evalsuite.runner  # noqa: F401

    build, built = backbones._build_backbone, {}

    def once(name, weights, random_init):
        if (name, weights, random_init) not in built:
            built[name, weights, random_init] = build(name, weights, random_init)
        return built[name, weights, random_init]
    once("clip-vit-b-16", None, True)
    return once


@pytest.fixture(autouse=True)
def reuse_the_model(monkeypatch, built_once):
    monkeypatch.setattr(backbones, "_build_backbone", built_once)


def _card(tmp_path, zeroshot: dict | None, captions: list | None = None):
    """Six 32 px tiles (two per split) in a tile_csv manifest, with `captions` for the test tiles if given."""
    rows = ["image_path,label,split" + (",caption" if captions else "")]
    for number in range(6):
        Image.new("RGB", (32, 32), (40 * number, 90, 160)).save(tmp_path / f"{number}.png")
        caption = "" if not captions else f",{captions[number - 4] if number >= 4 else 'a tile'}"
        rows.append(f"{number}.png,{CLASSES[number % 2]},{('train', 'val', 'test')[number // 2]}{caption}")
    (tmp_path / "tiles.csv").write_text("\n".join(rows) + "\n")
    card = {"name": "tiny", "kind": "classification", "reader": {"name": "tile_csv", "args": {"manifest": "tiles.csv"}},
            "data_root": str(tmp_path), "classes": CLASSES, "splits": ["train", "val", "test"],
            "selection_metric": "balanced_accuracy", "probes": ["zeroshot"]}
    if zeroshot is not None:
        card["zeroshot"] = zeroshot
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


def _block(**changes) -> dict:
    block = {"source": "a test", "class_names": {c: [c] for c in CLASSES}, "templates": TEMPLATES}
    block.update(changes)
    return block


def _refused(tmp_path, capsys, card, probe, *fragments: str) -> None:
    """`evalsuite run` of `card` is refused in one line with `fragments`, in under 2 s, leaving nothing behind."""
    if probe == "text_retrieval":  # k must fit the two test images
        probe = tmp_path / "text_retrieval_k1.yaml"
        probe.write_text("name: text_retrieval_k1\nprobe: text_retrieval\nparams:\n  ks: [1]\n")
    out = tmp_path / "out"
    row = {"run_id": "earlier", "task": "tiny", "model": "m", "metric": "accuracy", "split": "test", "value": "0.5",
           "seed": 0}
    append_rows(out / "leaderboard.csv", [row])
    before = (out / "leaderboard.csv").read_bytes()
    capsys.readouterr()
    started = time.perf_counter()
    code = cli.main(["run", "--task", str(card), "--model", "clip-vit-b-16", "--random-init", "--probes", str(probe),
                     "--num-workers", "0", "--out", str(out)])
    elapsed = time.perf_counter() - started
    captured = capsys.readouterr()
    assert_one_line_error(subprocess.CompletedProcess([], code, captured.out, captured.err), *fragments)
    assert elapsed < 2.0, f"refused after {elapsed:.1f} s"
    assert not [p for p in (out / "cache").glob("*") if not p.name.startswith(".")]  # no text or image cache
    assert (out / "leaderboard.csv").read_bytes() == before


@pytest.mark.parametrize("names", [{"benign": ["tumour"], "tumour": ["tumour"]},
                                   {"benign": ["Tumour", "TUMOUR"], "tumour": ["tumour"]}],  # CLIP's BPE lower-cases
                         ids=["same names", "names equal once tokenized"])
def test_classes_with_the_same_prompts_are_refused(tmp_path, capsys, names):
    card = _card(tmp_path, _block(class_names=names))
    _refused(tmp_path, capsys, card, "zeroshot", f"task card {card}", "classes benign and tumour give the same "
             "prompts once tokenized for model 'clip-vit-b-16'", "give them names that differ in zeroshot.class_names")


@pytest.mark.parametrize("names, templates, template", [
    ({"benign": [f"{LONG} benign"], "tumour": [f"{LONG} tumour"]}, TEMPLATES, "CLASSNAME."),  # differ after the cut
    ({c: [c] for c in CLASSES}, [f"{LONG} of CLASSNAME"], f"{LONG[:80]}..."),  # CLASSNAME past the cut
], ids=["names that differ after the cut", "a template ending in CLASSNAME"])
def test_a_prompt_longer_than_the_text_context_is_refused(tmp_path, capsys, names, templates, template):
    card = _card(tmp_path, _block(class_names=names, templates=templates))
    _refused(tmp_path, capsys, card, "zeroshot", f"task card {card}", "(class benign, name '",
             f"template '{template}') is ", "longer than the text context of model 'clip-vit-b-16' (77 tokens, start "
             "and end included), which would cut it without a word", "shorten the template or the name")


def test_a_caption_longer_than_the_text_context_is_refused(tmp_path, capsys):
    card = _card(tmp_path, None, captions=["a short caption", f"{LONG} tumour"])
    _refused(tmp_path, capsys, card, "text_retrieval", f"tile manifest {tmp_path / 'tiles.csv'} line 7",
             "'caption' of a test tile", "tokens, longer than the text context of model 'clip-vit-b-16' (77 tokens",
             "shorten it")


def test_class_texts_with_the_same_prompts_are_refused_for_text_retrieval(tmp_path, capsys):
    card = _card(tmp_path, _block(class_names={"benign": ["tumour"], "tumour": ["tumour"]}))
    _refused(tmp_path, capsys, card, "text_retrieval", f"task card {card}", "classes benign and tumour give the same "
             "prompts")


def test_an_unknown_key_in_the_zeroshot_block_is_refused_listing_the_known_ones(tmp_path, capsys):
    card = _card(tmp_path, _block(classnames_typo={c: [f"{c} cells"] for c in CLASSES}))
    _refused(tmp_path, capsys, card, "zeroshot", f"task card {card}", "unknown key 'zeroshot.classnames_typo'; "
             "known: class_names, source, templates")


def test_a_class_names_key_that_is_no_class_is_named(tmp_path, capsys):
    card = _card(tmp_path, _block(class_names={"benign": ["benign"], "tumour": ["tumour"], "stroma": ["stroma"]}))
    _refused(tmp_path, capsys, card, "zeroshot", f"task card {card}", "zeroshot.class_names has 'stroma', which is "
             "not a class of the card (benign, tumour)")


def test_an_empty_template_set_is_refused_before_extraction(tmp_path, capsys):
    card = _card(tmp_path, _block(templates={}))
    _refused(tmp_path, capsys, card, "zeroshot", f"task card {card}", "zeroshot.templates is empty")


def test_the_shipped_cards_prompts_pass_the_checks():
    """The demo, demo_slide and CRC prompt blocks fit CLIP's 77 tokens and tell their classes apart."""
    from evalsuite.probes.texts.class_texts import checked_prompt_sets
    from evalsuite.tasks.cards import load_card

    clip = backbones.build_backbone("clip-vit-b-16", random_init=True)
    for name in ("demo", "demo_slide", "crc"):
        (first, *_) = checked_prompt_sets(load_card(name), clip)
        assert np.bincount(first.prompt_class).min() > 0
