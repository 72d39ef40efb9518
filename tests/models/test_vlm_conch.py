"""The `conch` vision-language entry (CONCH v1, issue 42): composed from timm and open_clip with random weights at
the real sizes, its state dict written under the key names CONCH's code gives its CoCa model (captioning tensors
included, which the loader drops) and loaded back through our loader; both towers against a re-computation of
CONCH's forward from its definition with torch primitives; the real tokenizer loader on a small byte-level BPE file
in CONCH's format; the listing; one offline zero-shot run through the CLI; and, on a small CONCH, one feature cache
serving the linear probe the features before the projection and the zero-shot probe the projected embedding."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conch_tokenizer_file import write_conch_tokenizer
from conftest import leaderboard_rows, run_cli
from PIL import Image

from evalsuite.config import RunConfig
from evalsuite.errors import EvalsuiteError
from evalsuite.features.cache import FeatureCache, cache_key
from evalsuite.models.backbones import build_backbone
from evalsuite.models.reuse import ReusedBuilds
from evalsuite.models.transforms import build_transform
from evalsuite.models.vision_language import conch as vlm_conch
from evalsuite.models.vision_language import tokenizer_files
from evalsuite.models.vision_language.entries import CLIP_MEAN, CLIP_STD, VLMS
from evalsuite.models.vision_language.towers import ImageToJoint, TextTower
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_images_map_to_joint_space
from evalsuite.results.predictions import load_predictions
from evalsuite.runner import build_task_and_backbone, run

pytest.importorskip("open_clip")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

PROMPTS = ["An H&E image of TUMOR tissue.", "stroma", "lymphocytes " * 200]  # the last fills all 127 ids
# Key names and shapes of CONCH's checkpoint as its code builds the CoCa model (conch_ViT-B-16.json: coca_model.py,
# vision_tower.py VisualModel over a timm VisionTransformer, transformer.py TextTransformer and AttentionalPooler).
PUBLISHED = {
    "visual.trunk.cls_token": (1, 1, 768), "visual.trunk.pos_embed": (1, 785, 768),
    "visual.trunk.patch_embed.proj.weight": (768, 3, 16, 16), "visual.trunk.blocks.11.attn.qkv.weight": (2304, 768),
    "visual.trunk.blocks.0.mlp.fc2.weight": (768, 3072), "visual.trunk.norm.bias": (768,),
    **{f"visual.attn_pool_contrast.{name}": shape for name, shape in {
        "query": (1, 512), "attn.q_proj_weight": (512, 512), "attn.k_proj_weight": (512, 768),
        "attn.v_proj_weight": (512, 768), "attn.in_proj_bias": (1536,), "attn.out_proj.weight": (512, 512),
        "ln_q.weight": (512,), "ln_k.bias": (768,)}.items()},
    "visual.ln_contrast.weight": (512,), "visual.proj_contrast": (512, 512),
    "text.token_embedding.weight": (32007, 768), "text.positional_embedding": (128, 768), "text.cls_emb": (768,),
    "text.transformer.resblocks.11.attn.in_proj_weight": (2304, 768), "text.transformer.resblocks.0.ln_2.bias": (768,),
    "text.transformer.resblocks.5.mlp.c_fc.weight": (3072, 768), "text.transformer.resblocks.5.mlp.c_proj.bias": (768,),
    "text.ln_final.weight": (768,), "text.text_projection": (768, 512), "logit_scale": (),
}
# A few tensors of the captioning half, which the checkpoint holds and the loader drops by name.
CAPTIONING = {"visual.attn_pool_caption.query": (256, 768), "visual.attn_pool_caption.attn.in_proj_weight": (2304, 768),
              "visual.ln_caption.weight": (768,), "text_decoder.resblocks.0.attn.in_proj_weight": (2304, 768),
              "text_decoder.cross_attn.11.ln_1_kv.weight": (768,), "text_decoder.ln_final.bias": (768,)}


write_tokenizer = write_conch_tokenizer


@pytest.fixture(autouse=True)
def no_tokenizer_elsewhere(monkeypatch):
    """Each test places the tokenizer file itself: none from the environment or an installed `conch` package."""
    monkeypatch.delenv(vlm_conch.TOKENIZER_ENV, raising=False)
    monkeypatch.setattr(tokenizer_files, "installed_package_files", lambda *where: [])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(reference model with seed-7 weights, checkpoint folder): pytorch_model.bin in float16 under CONCH's key
    names plus captioning tensors, the tokenizer file beside it; the reference keeps the float16-rounded values."""
    folder = tmp_path_factory.mktemp("conch")
    reference, _ = vlm_conch.create(VLMS["conch"], seed=7)
    state = {key: value.half() for key, value in reference.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    state.update({key: torch.randn(shape, generator=generator).half() for key, shape in CAPTIONING.items()})
    torch.save(state, folder / "pytorch_model.bin")
    reference.load_state_dict({key: value for key, value in state.items() if key not in CAPTIONING})
    write_tokenizer(folder / vlm_conch.TOKENIZER_NAME)
    return reference.eval(), folder


def _conch_text_forward(state: dict, tokens: torch.Tensor) -> torch.Tensor:
    """CONCH's encode_text (unnormalised) from its definition: drop the placeholder, append the class embedding, add
    positions; causal mask, and for the class token's row CONCH's mask: key 0 always, key j >= 1 where id j - 1 is not
    <pad> (its mask is the id mask shifted right by one); 12 pre-norm blocks (GELU MLP); the last position through
    ln_final and text_projection."""
    text = tokens[:, :-1]
    batch, length = text.shape
    x = torch.cat([state["text.token_embedding.weight"][text], state["text.cls_emb"].expand(batch, 1, -1)], 1)
    x = x + state["text.positional_embedding"][:length + 1]
    mask = torch.full((length + 1, length + 1), float("-inf")).triu(1).repeat(batch, 1, 1)
    keep = torch.cat([torch.ones(batch, 1, dtype=torch.bool), text != 0], 1)
    mask[:, -1] = mask[:, -1].masked_fill(~keep, float("-inf"))
    heads = 12
    for layer in range(12):
        p = f"text.transformer.resblocks.{layer}."
        h = F.layer_norm(x, (768,), state[p + "ln_1.weight"], state[p + "ln_1.bias"])
        q, k, v = (h @ state[p + "attn.in_proj_weight"].T + state[p + "attn.in_proj_bias"]).chunk(3, -1)
        q, k, v = (t.unflatten(-1, (heads, 64)).transpose(1, 2) for t in (q, k, v))
        attention = ((q @ k.transpose(-1, -2)) / 8 + mask[:, None]).softmax(-1)
        out = (attention @ v).transpose(1, 2).flatten(2)
        x = x + out @ state[p + "attn.out_proj.weight"].T + state[p + "attn.out_proj.bias"]
        h = F.layer_norm(x, (768,), state[p + "ln_2.weight"], state[p + "ln_2.bias"])
        h = F.gelu(h @ state[p + "mlp.c_fc.weight"].T + state[p + "mlp.c_fc.bias"])
        x = x + h @ state[p + "mlp.c_proj.weight"].T + state[p + "mlp.c_proj.bias"]
    pooled = F.layer_norm(x[:, -1], (768,), state["text.ln_final.weight"], state["text.ln_final.bias"])
    return pooled @ state["text.text_projection"]


def _conch_pool(state: dict, tokens: torch.Tensor) -> torch.Tensor:
    """CONCH's image head from its definition: one learnt query (LayerNorm) attends with 8 heads over the
    LayerNorm-ed trunk tokens (separate q, k, v projections with one packed bias, as nn.MultiheadAttention with
    kdim = vdim = 768 holds them), output projection, first query, ln_contrast: CONCH's `forward_no_head` (the
    features before `@ proj_contrast`)."""
    p = "visual.attn_pool_contrast."
    keys = F.layer_norm(tokens, (768,), state[p + "ln_k.weight"], state[p + "ln_k.bias"])
    query = F.layer_norm(state[p + "query"], (512,), state[p + "ln_q.weight"], state[p + "ln_q.bias"])
    bias_q, bias_k, bias_v = state[p + "attn.in_proj_bias"].chunk(3)
    q = (query @ state[p + "attn.q_proj_weight"].T + bias_q).unflatten(-1, (8, 64)).transpose(0, 1)  # [8, 1, 64]
    k = (keys @ state[p + "attn.k_proj_weight"].T + bias_k).unflatten(-1, (8, 64)).transpose(1, 2)  # [B, 8, N, 64]
    v = (keys @ state[p + "attn.v_proj_weight"].T + bias_v).unflatten(-1, (8, 64)).transpose(1, 2)
    out = ((q @ k.transpose(-1, -2)) / 8).softmax(-1) @ v  # [B, 8, 1, 64]
    out = out.transpose(1, 2).flatten(2) @ state[p + "attn.out_proj.weight"].T + state[p + "attn.out_proj.bias"]
    return F.layer_norm(out[:, 0], (512,), state["visual.ln_contrast.weight"], state["visual.ln_contrast.bias"])


def test_the_model_has_the_key_names_and_shapes_of_conchs_checkpoint(saved):
    reference, folder = saved
    state = reference.state_dict()
    assert {key: tuple(state[key].shape) for key in PUBLISHED} == PUBLISHED
    # the contrastive half of CONCH's CoCa: trunk 150 tensors, pooler 11, ln + projection 3, text 150, logit scale
    assert len(state) == 315 and not any(key.startswith(vlm_conch.UNUSED_PREFIXES) for key in state)


@pytest.mark.slow
def test_round_trip_through_our_loader_drops_the_captioning_half_and_gives_the_same_towers(saved):
    reference, folder = saved
    backbone = build_backbone("conch", weights=str(folder / "pytorch_model.bin"))
    assert backbone.weights_id.startswith("sha256:") and backbone.label == "conch+pytorch_model"
    assert backbone.data_config == {"input_size": (3, 448, 448), "interpolation": "bicubic", "mean": CLIP_MEAN,
                                    "std": CLIP_STD}
    assert backbone.embed_dim == 512 and backbone.text.context_length_tokens == 128
    loaded = backbone.model.clip.state_dict()
    assert all(torch.equal(loaded[key], value) for key, value in reference.state_dict().items())
    images = torch.rand(1, 3, 448, 448, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = backbone.pooled_features(images)  # what the image probes read: CONCH's forward_no_head
        torch.testing.assert_close(before, reference.encode_image_before_projection(images))
        torch.testing.assert_close(backbone.text.image_to_joint(before), reference.encode_image(images))
        tokens = backbone.text.tokenizer(PROMPTS)  # the file beside the weights
        torch.testing.assert_close(torch.from_numpy(backbone.text.encode(PROMPTS, torch.device("cpu"))),
                                   reference.encode_text(tokens))
    assert backbone.text.logit_scale == pytest.approx(float(reference.logit_scale.detach().exp()))
    assert backbone.text.tokenizer_id.startswith(VLMS["conch"].tokenizer + "; sha256:")


def test_text_tower_equals_conchs_text_forward_recomputed(saved, tmp_path):
    reference, folder = saved
    tokens = vlm_conch.read_tokenizer(folder / vlm_conch.TOKENIZER_NAME)(PROMPTS, max_length=127, truncation=True,
                                                                          padding="max_length", return_tensors="pt")
    tokens = F.pad(tokens["input_ids"], (0, 1), value=0)
    assert (tokens[2] != 0).sum() == 127  # a prompt with no padding: the class token may attend to itself
    with torch.no_grad():
        expected = _conch_text_forward(reference.state_dict(), tokens)
        torch.testing.assert_close(reference.encode_text(tokens), expected, atol=1e-4, rtol=1e-4)


def test_image_tower_equals_conchs_pooler_recomputed_over_the_trunk_tokens(saved):
    reference, _ = saved
    images = torch.rand(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))  # dynamic size: a cheap check
    state = reference.state_dict()
    with torch.no_grad():
        expected = _conch_pool(state, reference.visual.trunk.forward_features(images))
        torch.testing.assert_close(reference.encode_image_before_projection(images), expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(reference.encode_image(images), expected @ state["visual.proj_contrast"],
                                   atol=1e-5, rtol=1e-5)
    assert reference.image_projection() is reference.visual.proj_contrast  # encode_image's only step after it


def test_tokenizer_gives_conchs_127_ids_and_a_placeholder_pad(tmp_path, monkeypatch):
    path = write_tokenizer(tmp_path / "tok.json")
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(path))
    tokenizer = vlm_conch.ConchTokenizer("spec")
    ids = tokenizer(PROMPTS)
    assert ids.shape == (3, 128) and ids.dtype == torch.int64
    short = ids[1].tolist()
    end = short.index(2)
    assert short[0] == 1 and end > 1 and short[end + 1:] == [0] * (128 - end - 1)  # start, words, end, <pad>s
    assert ids[2, 0] == 1 and ids[2, 126] == 2 and ids[2, 127] == 0  # truncated: the end token kept, placeholder
    assert tokenizer.cache_id.startswith("spec; sha256:")


def test_tokenizer_is_found_in_an_installed_conch_package(tmp_path, monkeypatch):
    monkeypatch.undo()  # the real lookup of an installed package
    monkeypatch.delenv(vlm_conch.TOKENIZER_ENV, raising=False)
    (tmp_path / "conch").mkdir()
    (tmp_path / "conch" / "__init__.py").write_text("raise RuntimeError('looked up, never imported')\n")
    path = write_tokenizer(tmp_path / "conch" / "open_clip_custom" / "tokenizers" / vlm_conch.TOKENIZER_NAME)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert vlm_conch.ConchTokenizer("spec").file() == path


def test_without_the_tokenizer_file_prompts_are_a_one_line_error_naming_where_to_get_it(saved, tmp_path,
                                                                                         monkeypatch):
    reference, _ = saved
    spec = VLMS["conch"]
    text = TextTower(reference, vlm_conch.ConchTokenizer(spec.tokenizer), spec)  # random init: no --weights folder
    assert text.tokenizer_id == spec.tokenizer  # built without the file: image probes never tokenize
    with pytest.raises(EvalsuiteError, match="needs CONCH's tokenizer file conch_byte_level_bpe_uncased.json .*"
                                             "random-init.*github.com/mahmoodlab/CONCH") as error:
        text.encode(["stroma"], torch.device("cpu"))
    assert "\n" not in str(error.value)
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(EvalsuiteError, match="EVALSUITE_CONCH_TOKENIZER=.*missing.json is not a file"):
        vlm_conch.ConchTokenizer("spec")(["stroma"])
    (tmp_path / "other.json").write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(EvalsuiteError, match="cannot read CONCH's tokenizer .*other.json"):
        vlm_conch.read_tokenizer(tmp_path / "other.json")


def test_a_wrong_or_missing_key_is_one_line_naming_the_file(saved, tmp_path):
    reference, _ = saved
    state = {key: value.half() for key, value in reference.state_dict().items() if key != "visual.proj_contrast"}
    state["visual.head.weight"] = torch.zeros(2)
    torch.save(state, tmp_path / "wrong.bin")
    with pytest.raises(EvalsuiteError, match=r"wrong.bin do not fit Conch: missing keys 1 \[visual.proj_contrast\], "
                                             r"unexpected keys 1 \[visual.head.weight\]") as error:
        vlm_conch.load(reference, tmp_path / "wrong.bin")  # refused before anything is loaded
    assert "\n" not in str(error.value)


def test_conch_without_weights_says_which_file_to_get():
    with pytest.raises(EvalsuiteError, match="needs --weights FILE .*pytorch_model.bin of MahmoodLab/CONCH"):
        build_backbone("conch")


TILE_CARD = """name: conch_tiles
kind: classification
reader: {{name: tile_csv, args: {{manifest: tiles.csv}}}}
classes: [stroma, tumor]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [linear]
data_root: {root}
zeroshot:
  source: ours (a test)
  class_names: {{stroma: [stroma], tumor: [tumor cells]}}
  templates: ["CLASSNAME.", "an H&E image of CLASSNAME."]
"""


def write_tile_card(tmp_path):
    """Six 32 px tiles (two per split, one of each class) in a tile_csv manifest and TILE_CARD over them."""
    (tmp_path / "tiles").mkdir()
    rows = ["image_path,label,split"]
    for number in range(6):
        Image.new("RGB", (32, 32), (40 * number, 90, 160)).save(tmp_path / "tiles" / f"{number}.png")
        rows.append(f"tiles/{number}.png,{('stroma', 'tumor')[number % 2]},{('train', 'val', 'test')[number // 2]}")
    (tmp_path / "tiles.csv").write_text("\n".join(rows) + "\n")
    card = tmp_path / "conch_tiles.yaml"
    card.write_text(TILE_CARD.format(root=tmp_path))
    return card


@pytest.mark.slow
def test_offline_zero_shot_run_through_the_cli(tmp_path):
    """`evalsuite run --model conch --random-init --probes zeroshot` on six tiles: the tokenizer from
    EVALSUITE_CONCH_TOKENIZER, chance-level note, test rows with intervals."""
    card = write_tile_card(tmp_path)
    tokenizer = write_tokenizer(tmp_path / "tokenizer" / vlm_conch.TOKENIZER_NAME)
    out = tmp_path / "out"
    result = run_cli("run", "--task", card, "--model", "conch", "--random-init", "--probes", "zeroshot",
                     "--num-workers", "0", "--batch-size", "2", "--out", out,  # batches are padded to their size
                     env={vlm_conch.TOKENIZER_ENV: str(tokenizer)})
    assert result.returncode == 0, result.stderr
    assert "chance level" in result.stdout + result.stderr
    test_rows = [row for row in leaderboard_rows(out) if row["split"] == "test" and row["probe"] == "zeroshot"]
    assert test_rows and all(row["model"] == "conch+random-init" for row in test_rows)
    assert all(row["ci_low"] and row["ci_high"] for row in test_rows)


# CONCH's layers at a small size (the same code, one layer, narrower): built in a fraction of a second where the real
# size takes seconds. 448 px tiles in 64 px patches (7 x 7 tokens); a vocabulary that holds the test tokenizer's ids.
SMALL = {"_PATCH_PX": 64, "_WIDTH": 64, "_DEPTH": 1, "_HEADS": 2, "_EMBED_DIM": 32, "_POOLER_HEADS": 2, "_VOCAB": 400}
CLASS_PROMPTS = [["stroma.", "an H&E image of stroma."], ["tumor cells.", "an H&E image of tumor cells."]]  # TILE_CARD


@pytest.fixture
def small_conch(monkeypatch):
    for name, value in SMALL.items():
        monkeypatch.setattr(vlm_conch, name, value)


@pytest.fixture
def zeroshot_then_linear(small_conch, tmp_path, monkeypatch):
    """(zeroshot run record, linear run record, reader, backbone, builds): a zeroshot run and then a linear run of one
    small random CONCH on the six tiles, through the runner's Python entry point (one build, fp32 on the CPU)."""
    card = write_tile_card(tmp_path)
    monkeypatch.setenv(vlm_conch.TOKENIZER_ENV, str(write_tokenizer(tmp_path / "tok" / vlm_conch.TOKENIZER_NAME)))
    builds = ReusedBuilds()
    config = RunConfig(task=str(card), model="conch", random_init=True, probes=["zeroshot"], out_dir=tmp_path / "out",
                       device="cpu", precision="fp32", batch_size=2, num_workers=0)
    zeroshot = run(config, builds)
    linear = run(dataclasses.replace(config, probes=["linear"]), builds)
    _, reader, backbone = build_task_and_backbone(config, builds)
    return zeroshot, linear, reader, backbone, builds


def _zero_shot_proba(image_rows: torch.Tensor, backbone) -> np.ndarray:
    """softmax(logit_scale x cosine(image, class)), the classes TILE_CARD's prompts ensembled, from `image_rows`."""
    clip = backbone.model.clip
    with torch.no_grad():
        prompts = clip.encode_text(backbone.text.tokenizer([p for name in CLASS_PROMPTS for p in name]))
    per_class = F.normalize(prompts, dim=-1).unflatten(0, (2, 2)).mean(dim=1)
    cosine = F.normalize(image_rows, dim=-1) @ F.normalize(per_class, dim=-1).T
    return torch.softmax(clip.logit_scale.exp() * cosine, dim=1).numpy()


def test_one_cache_serves_the_linear_probe_the_features_before_the_projection_and_zeroshot_the_projected_ones(
        zeroshot_then_linear, tmp_path):
    zeroshot, linear, reader, backbone, builds = zeroshot_then_linear
    assert builds.builds == 1 and backbone.probe_features == "before_projection"
    # The zeroshot run extracted test only (its probe reads nothing else); the linear run read that cache under the
    # same key and extracted train and val, for its fit.
    assert set(zeroshot["cache"]["keys"]) == {"test"} and linear["cache"]["keys"]["test"] == zeroshot["cache"]["keys"]["test"]
    assert zeroshot["samples_extracted"] == {"test": 2} and linear["samples_extracted"] == {"train": 2, "val": 2, "test": 0}
    dataset = reader.dataset("test", build_transform(backbone.data_config))
    images = torch.stack([dataset[index][0] for index in range(len(dataset))])
    with torch.no_grad():
        before = backbone.model.clip.encode_image_before_projection(images)
        projected = backbone.model.clip.encode_image(images)
    cache = FeatureCache(tmp_path / "out" / "cache")
    rows, _ = cache.open(zeroshot["cache"]["keys"]["test"], mode="ram")
    cached = torch.from_numpy(rows).float()
    torch.testing.assert_close(cached, before, atol=2e-3, rtol=2e-3)  # float16 rows of CONCH's forward_no_head
    assert (cached - projected).abs().max() > 0.5  # not encode_image
    # The zero-shot probabilities are those of the projected embedding (the cached rows @ proj_contrast), not of the
    # rows themselves.
    proba = load_predictions(tmp_path / "out", zeroshot["run_id"]).probas["zeroshot/seed0"]
    np.testing.assert_allclose(proba, _zero_shot_proba(projected, backbone), atol=1e-3)
    assert np.abs(proba - _zero_shot_proba(before, backbone)).max() > 0.05
    # An older cache of encode_image (a key without the field) is never served for these features.
    fields = dict(cache.manifest(zeroshot["cache"]["keys"]["test"])["fields"])
    assert fields.pop("probe_features") == "before_projection"
    assert cache_key(fields) != zeroshot["cache"]["keys"]["test"]


class _ComparesRowsWithTexts:
    """A probe class that reads texts but does not declare it maps cached rows into the joint space."""


def test_a_text_probe_that_does_not_map_rows_into_the_joint_space_is_refused_for_conch_alone(small_conch):
    conch = build_backbone("conch", random_init=True)
    with pytest.raises(EvalsuiteError, match="probe p does not map cached image rows into the joint image-text space, "
                                             "and model 'conch' caches its image features before projection") as error:
        check_images_map_to_joint_space(_ComparesRowsWithTexts, "p", conch)
    assert "\n" not in str(error.value) and "evalsuite/probes/p.py" in str(error.value)
    for probe in ("zeroshot", "mizero"):  # the shipped probes that compare cached rows with class texts map them
        check_images_map_to_joint_space(PROBES[probe], probe, conch)
    clip_like = SimpleNamespace(name="clip", text=SimpleNamespace(image_to_joint=ImageToJoint()), probe_features=None)
    check_images_map_to_joint_space(_ComparesRowsWithTexts, "p", clip_like)  # its cache is the joint embedding
