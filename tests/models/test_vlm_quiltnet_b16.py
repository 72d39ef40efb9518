"""The `quiltnet-b-16` entry: open_clip's ViT-B-16 with GELU, as QuiltNet-B-16's open_clip_config.json (hub commit
42d3269) describes it.

At the published size (on the meta device) the towers have the widths of that config and GELU activations. A tiny
open_clip config stands in for ViT-B-16 in the round trip: random weights saved as open_clip saves them, with the
hub's GELU open_clip_config.json beside them, load back through our loader with the same image and text outputs. A
config beside a file that declares QuickGELU is refused, naming `clip-vit-b-16` (the same tensors with QuickGELU);
the same check names `quiltnet-b-16` for a GELU-declared ViT-B-16 file given to `clip-vit-b-16`.
"""

import dataclasses
import json

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.registry import REGISTRY
from evalsuite.models.vision_language.entries import CLIP_MEAN, CLIP_STD, VLMS
from evalsuite.models.vision_language.towers import create_open_clip

open_clip = pytest.importorskip("open_clip")

# open_clip_config.json of wisdomik/QuiltNet-B-16 at 42d3269: model_cfg without quick_gelu, so GELU.
HUB_MODEL_CFG = {"embed_dim": 512,
                 "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 16},
                 "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12}}
PUBLISHED_SHAPES = {"visual.conv1.weight": (768, 3, 16, 16), "visual.positional_embedding": (197, 768),
                    "visual.proj": (768, 512), "visual.transformer.resblocks.11.mlp.c_fc.weight": (3072, 768),
                    "token_embedding.weight": (49408, 512), "positional_embedding": (77, 512),
                    "transformer.resblocks.11.attn.in_proj_weight": (1536, 512), "text_projection": (512, 512),
                    "logit_scale": ()}
TINY = "evalsuite-test-tiny-vit-16"  # a ViT-B-16-shaped open_clip config, a few layers of a few channels
TINY_CFG = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                            "head_width": 16},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


def test_entry_is_the_hub_config():
    spec = VLMS["quiltnet-b-16"]
    assert (spec.library, spec.architecture, spec.quick_gelu) == ("open_clip", "ViT-B-16", False)
    assert spec.pretrained_cfg.mean == CLIP_MEAN and spec.pretrained_cfg.std == CLIP_STD
    assert spec.pretrained_cfg.input_size_px == HUB_MODEL_CFG["vision_cfg"]["image_size"]
    assert spec.embed_dim == HUB_MODEL_CFG["embed_dim"]
    assert spec.context_length_tokens == HUB_MODEL_CFG["text_cfg"]["context_length"]
    assert REGISTRY["quiltnet-b-16"] is spec


def test_published_size_has_the_hub_configs_shapes_and_gelu():
    with torch.device("meta"):
        clip = open_clip.create_model("ViT-B-16", pretrained=None, load_weights=False, force_quick_gelu=False,
                                      device="meta")
    shapes = {k: tuple(v.shape) for k, v in clip.state_dict().items()}
    assert {k: shapes[k] for k in PUBLISHED_SHAPES} == PUBLISHED_SHAPES
    activations = {type(m).__name__ for m in clip.modules() if type(m).__name__ in ("GELU", "QuickGELU")}
    assert activations == {"GELU"}


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    (tmp_path / f"{TINY}.json").write_text(json.dumps(TINY_CFG))
    open_clip.add_model_config(tmp_path / f"{TINY}.json")
    spec = VLMS["quiltnet-b-16"]
    small = dataclasses.replace(spec, architecture=TINY, embed_dim=TINY_CFG["embed_dim"],
                                pretrained_cfg=dataclasses.replace(spec.pretrained_cfg, input_size_px=32))
    monkeypatch.setitem(REGISTRY, "quiltnet-b-16", small)
    return small


def _published_folder(spec, folder):
    """Random towers (seed 7) saved as the hub holds them: open_clip's state dict in float16 beside the hub's
    open_clip_config.json (GELU). The reference keeps the float16-rounded values."""
    reference, _ = create_open_clip(spec, seed=7)
    state = {k: v.half() for k, v in reference.state_dict().items()}
    torch.save(state, folder / "open_clip_pytorch_model.bin")
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": HUB_MODEL_CFG}))
    reference.load_state_dict(state)
    return reference.eval(), folder / "open_clip_pytorch_model.bin"


def test_published_layout_round_trips_through_our_loader(tiny, tmp_path):
    reference, path = _published_folder(tiny, tmp_path)
    backbone = build_backbone("quiltnet-b-16", weights=str(path))
    images = torch.rand(2, 3, 32, 32)
    prompts = ["adipose tissue", "an H&E image of tumour"]
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(images), reference.encode_image(images))
        torch.testing.assert_close(torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu"))),
                                   reference.encode_text(open_clip.get_tokenizer(TINY)(prompts)))
    assert backbone.label == "quiltnet-b-16+open_clip_pytorch_model" and backbone.embed_dim == 16
    assert backbone.data_config["mean"] == CLIP_MEAN and backbone.data_config["interpolation"] == "bicubic"


def test_a_config_declaring_quick_gelu_is_refused_naming_the_entry_that_fits(tmp_path):
    # The activation is checked before any key: a one-key file in open_clip's layout is enough.
    torch.save({"visual.proj": torch.zeros(768, 512)}, tmp_path / "open_clip_pytorch_model.bin")
    (tmp_path / "open_clip_config.json").write_text(json.dumps({"model_cfg": {**HUB_MODEL_CFG, "quick_gelu": True}}))
    with pytest.raises(EvalsuiteError, match="beside it declares QuickGELU, .*use --model clip-vit-b-16 for it") as error:
        build_backbone("quiltnet-b-16", weights=str(tmp_path / "open_clip_pytorch_model.bin"))
    assert "\n" not in str(error.value)
