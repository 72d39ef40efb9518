"""Checkpoints and tokenizer files that made a zero-shot run score garbage or fail inside (issue 48), through the CLI
in-process: a logit_scale that is NaN, inf or overflows; a text tower that gives NaN; a CONCH tokenizer file without
<end_of_text> or with ids past the text tower's vocabulary; a GELU CLIP file for the QuickGELU `plip` or
`clip-vit-b-16`. Each is one line naming the file and the fix, a non-zero exit, before any image forward, with no
cache written (a NaN text cache was left on disk before).

Cost: CONCH's layers at a small size (as tests/models/test_vlm_conch.py builds them), CLIP towers on the meta device
for the key names, one random-init CLIP ViT-B/32 and ViT-B/16 build; no image forward."""

import logging
import math
import subprocess

import pytest
import torch
import yaml
from conftest import assert_one_line_error
from PIL import Image

from evalsuite import cli
from evalsuite.models.vision_language import conch as vlm_conch
from evalsuite.models.vision_language import tokenizer_files
from evalsuite.models.vision_language.entries import VLMS

pytest.importorskip("open_clip")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# CONCH's layers, one layer and narrow (tests/models/test_vlm_conch.py's SMALL): built in a fraction of a second.
SMALL = {"_PATCH_PX": 64, "_WIDTH": 64, "_DEPTH": 1, "_HEADS": 2, "_EMBED_DIM": 32, "_POOLER_HEADS": 2, "_VOCAB": 400}
CONCH_SPECIALS = ["<pad>", "<start_of_text>", "<end_of_text>"]


@pytest.fixture(autouse=True)
def small_conch(monkeypatch):
    for name, value in SMALL.items():
        monkeypatch.setattr(vlm_conch, name, value)
    # Each test places the tokenizer file itself: none from the environment or an installed `conch` package.
    monkeypatch.delenv(vlm_conch.TOKENIZER_ENV, raising=False)
    monkeypatch.setattr(tokenizer_files, "installed_package_files", lambda *where: [])


def write_tokenizer(path, specials=CONCH_SPECIALS, template="<start_of_text> $A <end_of_text>"):
    """A small byte-level BPE file in the format of CONCH's (NFD, strip accents, lower case; byte-level with a prefix
    space), with `specials` as ids 0, 1, ... and `template` as its post-processor."""
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                 normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(["an h&e image of tumor tissue", "stroma with lymphocytes"] * 4, trainer)
    in_template = [token for token in specials if token in template]
    tokenizer.post_processor = processors.TemplateProcessing(single=template, special_tokens=[
        (token, specials.index(token)) for token in in_template])
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def tile_card(tmp_path):
    """Six 32 px tiles (two per split) in a tile_csv manifest and a card with a zero-shot block over them."""
    rows = ["image_path,label,split"]
    for number in range(6):
        Image.new("RGB", (32, 32), (40 * number, 90, 160)).save(tmp_path / f"{number}.png")
        rows.append(f"{number}.png,{('stroma', 'tumor')[number % 2]},{('train', 'val', 'test')[number // 2]}")
    (tmp_path / "tiles.csv").write_text("\n".join(rows) + "\n")
    card = {"name": "tiny", "kind": "classification", "reader": {"name": "tile_csv", "args": {"manifest": "tiles.csv"}},
            "data_root": str(tmp_path), "classes": ["stroma", "tumor"], "splits": ["train", "val", "test"],
            "selection_metric": "balanced_accuracy", "probes": ["zeroshot"],
            "zeroshot": {"source": "a test", "class_names": {"stroma": ["stroma"], "tumor": ["tumor cells"]},
                         "templates": ["CLASSNAME.", "an H&E image of CLASSNAME."]}}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


def conch_checkpoint(folder, **changed):
    """A small CONCH's pytorch_model.bin in `folder` with tensors `changed` (name: value), the tokenizer beside it."""
    model, _ = vlm_conch.create(VLMS["conch"], seed=7)
    state = model.state_dict()
    for name, value in changed.items():
        state[name] = torch.full_like(state[name], value)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / "pytorch_model.bin")
    write_tokenizer(folder / vlm_conch.TOKENIZER_NAME)
    return folder / "pytorch_model.bin"


def _refused(tmp_path, capsys, model_args: list, *fragments: str) -> None:
    """`evalsuite run --probes zeroshot` on the tile card is one line with `fragments`; nothing is cached."""
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["run", "--task", str(tile_card(tmp_path)), *model_args, "--probes", "zeroshot", "--num-workers",
                     "0", "--batch-size", "2", "--device", "cpu", "--out", str(out)])
    captured = capsys.readouterr()
    assert_one_line_error(subprocess.CompletedProcess([], code, captured.out, captured.err), *fragments)
    assert not [p for p in (out / "cache").glob("*") if not p.name.startswith(".")]  # no text or image cache
    assert not (out / "leaderboard.csv").exists()


@pytest.mark.parametrize("stored", [math.nan, math.inf, 1000.0, math.log(1000.0)],
                         ids=["nan", "inf", "1000 (exp overflows)", "ln 1000 (scale 1000)"])
def test_a_logit_scale_no_training_gives_is_refused_at_load(tmp_path, capsys, stored):
    weights = conch_checkpoint(tmp_path / "conch", logit_scale=stored)
    fragment = "outside [1, 100], where CLIP-style training clamps it" if stored < 10 else "is no usable temperature"
    _refused(tmp_path, capsys, ["--model", "conch", "--weights", str(weights)], f"checkpoint {weights}:",
             "logit_scale", fragment, "the file is broken or not conch's: re-download it")


def test_a_text_tower_giving_nan_is_the_checkpoints_fault_and_nothing_is_cached(tmp_path, capsys):
    weights = conch_checkpoint(tmp_path / "conch", **{"text.ln_final.weight": math.nan})
    _refused(tmp_path, capsys, ["--model", "conch", "--weights", str(weights)],
             f"checkpoint {weights}: its text tower gives non-finite (NaN/inf) embeddings (first for prompt "
             "'stroma.')", "re-download the checkpoint (nothing was cached)")


@pytest.mark.parametrize("specials, template, fragment", [
    (["<pad>", "<start_of_text>"], "<start_of_text> $A", "it lacks <end_of_text>"),
    (CONCH_SPECIALS, "<start_of_text> $A", "it does not wrap a prompt in <start_of_text> ... <end_of_text>"),
], ids=["no <end_of_text> in the file", "prompts not ended by <end_of_text>"])
def test_a_conch_tokenizer_without_the_end_token_is_refused(tmp_path, capsys, monkeypatch, specials, template,
                                                            fragment):
    tokenizer = write_tokenizer(tmp_path / "tok" / vlm_conch.TOKENIZER_NAME, specials, template)
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(tokenizer))
    _refused(tmp_path, capsys, ["--model", "conch", "--random-init"], f"{tokenizer} is not CONCH's tokenizer",
             fragment, "get https://github.com/mahmoodlab/CONCH")


def test_a_conch_tokenizer_with_ids_past_the_vocabulary_names_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(vlm_conch, "_VOCAB", 100)  # the text tower embeds ids 0-99; the file's go to ~300
    tokenizer = write_tokenizer(tmp_path / "tok" / vlm_conch.TOKENIZER_NAME)
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(tokenizer))
    _refused(tmp_path, capsys, ["--model", "conch", "--random-init"], f"{tokenizer} is not CONCH's tokenizer: it has "
             "token ids up to", "but CONCH's text tower embeds 100 (ids 0-99)")


def open_clip_file(folder, architecture: str):
    """An open_clip state dict with `architecture`'s key names and shapes (each tensor one stored value, so the file
    is small) as QuiltNet's and LAION's files are laid out."""
    import open_clip

    logging.disable(logging.WARNING)  # open_clip warns that no pretrained weights are loaded: none are asked for
    try:
        with torch.device("meta"):
            shapes = open_clip.create_model(architecture, pretrained=None, load_weights=False, device="meta")
    finally:
        logging.disable(logging.NOTSET)
    state = {key: torch.full((), 0.01, dtype=torch.float16).expand(value.shape)
             for key, value in shapes.state_dict().items()}
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / "open_clip_pytorch_model.bin")
    return folder / "open_clip_pytorch_model.bin"


def test_an_open_clip_vit_b_32_file_for_plip_is_refused_naming_quiltnet(tmp_path, capsys):
    """QuiltNet's GELU file has plip's key names and shapes once in open_clip's layout: PLIP is published only as a
    transformers CLIPModel, so an open_clip-layout file is refused rather than loaded into QuickGELU towers."""
    weights = open_clip_file(tmp_path / "quiltnet", "ViT-B-32")
    _refused(tmp_path, capsys, ["--model", "plip", "--weights", str(weights)], f"weights {weights} are a state dict "
             "in the open_clip layout, but model 'plip' reads its published file, transformers CLIPModel",
             "into plip's QuickGELU towers and give wrong embeddings", "use --model quiltnet-b-32 for it")


def test_a_config_beside_the_file_declaring_gelu_is_refused_for_quickgelu_clip(tmp_path, capsys):
    """open_clip_config.json without quick_gelu (as QuiltNet's, LAION's) is a GELU model as open_clip reads it."""
    import json

    folder = tmp_path / "laion"
    weights = open_clip_file(folder, "ViT-B-16")
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": {"embed_dim": 512}}))
    _refused(tmp_path, capsys, ["--model", "clip-vit-b-16", "--weights", str(weights)],
             f"weights {weights}: {folder / 'open_clip_config.json'} beside it declares GELU, but model "
             "'clip-vit-b-16' builds its towers with QuickGELU", "remove open_clip_config.json if it is not this "
             "checkpoint's config")
