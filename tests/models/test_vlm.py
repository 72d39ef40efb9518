"""Vision-language registry entries (issue 42): built by open_clip with random weights, their state dict written
in open_clip's published layout and loaded back through our loader; the real tokenizer, offline; the listing."""

import pytest
import torch
from conftest import run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone
from evalsuite.models.vision_language.entries import CLIP_MEAN, CLIP_STD, VLMS
from evalsuite.models.vision_language.towers import create_open_clip

open_clip = pytest.importorskip("open_clip")

# Key names of open_clip's published CLIP checkpoints (open_clip_pytorch_model.bin of the timm/*clip*.openai repos).
PUBLISHED_KEYS = ["visual.class_embedding", "visual.conv1.weight", "visual.proj", "visual.ln_post.weight",
                  "visual.transformer.resblocks.11.attn.in_proj_weight", "token_embedding.weight",
                  "positional_embedding", "transformer.resblocks.0.mlp.c_fc.weight", "ln_final.weight",
                  "text_projection", "logit_scale"]


def _saved(name: str, folder):
    """A model of entry `name` with other random weights (seed 7), saved as open_clip saves it, in float16 as the
    published files hold it; the reference keeps the float16-rounded values the file holds."""
    reference, _ = create_open_clip(VLMS[name], seed=7)
    state = {k: v.half() for k, v in reference.state_dict().items()}
    path = folder / "open_clip_pytorch_model.bin"
    torch.save(state, path)
    reference.load_state_dict(state)
    return reference.eval(), path


@pytest.mark.slow
@pytest.mark.parametrize("name, architecture", [("clip-vit-b-16", "ViT-B-16"), ("quiltnet-b-32", "ViT-B-32")])
def test_round_trip_through_our_loader_gives_the_same_towers(name, architecture, tmp_path):
    reference, path = _saved(name, tmp_path)
    assert all(key in torch.load(path, weights_only=True) for key in PUBLISHED_KEYS)
    backbone = build_backbone(name, weights=str(path))
    assert backbone.weights_id.startswith("sha256:") and backbone.label == f"{name}+open_clip_pytorch_model"
    images = torch.rand(2, 3, 224, 224)
    prompts = ["an image of tumour tissue", "stroma"]
    tokens = open_clip.get_tokenizer(architecture)(prompts)
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(images), reference.encode_image(images))
        torch.testing.assert_close(torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu"))),
                                   reference.encode_text(tokens))
    assert backbone.text.logit_scale == pytest.approx(float(reference.logit_scale.detach().exp()))
    # The probes read encode_image itself: the cache key is unchanged and nothing maps the rows for zero-shot.
    assert backbone.probe_features is None and backbone.text.image_to_joint.is_identity


def test_random_init_clip_has_clip_preprocessing_and_the_real_tokenizer():
    backbone = build_backbone("clip-vit-b-16", random_init=True)
    assert backbone.weights_id == "random-init:seed0" and backbone.label == "clip-vit-b-16+random-init"
    assert backbone.data_config == {"input_size": (3, 224, 224), "interpolation": "bicubic", "mean": CLIP_MEAN,
                                    "std": CLIP_STD}
    assert backbone.embed_dim == 512 and backbone.text.context_length_tokens == 77
    # CLIP's BPE: start-of-text 49406, then the words' tokens, end-of-text 49407, zero padding to 77.
    tokens = backbone.text.tokenizer(["a photo of a cat"])[0].tolist()
    assert tokens[0] == 49406 and tokens[6] == 49407 and len(tokens) == 77 and tokens[7:] == [0] * 70
    assert backbone.text.logit_scale == pytest.approx(1 / 0.07)  # CLIP's initial temperature
    with torch.no_grad():
        assert backbone.pooled_features(torch.rand(1, 3, 224, 224)).shape == (1, 512)


def test_a_checkpoint_of_another_architecture_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "wrong.bin"
    torch.save({"visual.proj": torch.zeros(3, 3)}, path)
    with pytest.raises(EvalsuiteError, match="wrong.bin do not fit CLIP: missing keys"):
        build_backbone("clip-vit-b-16", weights=str(path))


def test_clip_without_weights_says_where_to_get_them():
    with pytest.raises(EvalsuiteError, match="needs --weights FILE .*open_clip_pytorch_model.bin"):
        build_backbone("clip-vit-b-16")


def test_list_models_shows_vision_language_models_with_kind_licence_and_access():
    result = run_cli("list", "models")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert "vision-language" in rows["clip-vit-b-16"] and "MIT; open" in rows["clip-vit-b-16"]
    assert "text 77 tokens" in rows["clip-vit-b-16"] and " 512 " in rows["clip-vit-b-16"]
    assert "vision-language" in rows["quiltnet-b-32"] and "MIT; gating unconfirmed" in rows["quiltnet-b-32"]
    assert "vision-language" in rows["plip"] and " image " in rows["uni"] and "gated" in rows["uni"]
    assert "vision-language" in rows["conch"] and "CC-BY-NC-ND-4.0; gated" in rows["conch"]
    assert "text 128 tokens" in rows["conch"] and " 512 " in rows["conch"]
    assert "vision-language" in rows["musk"] and "CC-BY-NC-ND-4.0; gated" in rows["musk"]
    assert "text 100 tokens" in rows["musk"] and " 1024 " in rows["musk"]
    assert "vision-language" in rows["keep"] and " 768 " in rows["keep"] and "text 256 tokens" in rows["keep"]
    assert "MIT" in rows["keep"]


@pytest.mark.slow
def test_plip_transformers_checkpoint_loads_into_open_clip_with_the_same_outputs(tmp_path):
    """PLIP ships a transformers CLIPModel: one built with random weights and ViT-B/32 sizes, saved in that layout,
    gives through our loader (renamed into open_clip's CLIP) the image and text embeddings transformers gives."""
    transformers = pytest.importorskip("transformers")
    config = transformers.CLIPConfig(
        text_config={"hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8,
                     "num_hidden_layers": 12, "max_position_embeddings": 77, "vocab_size": 49408,
                     "hidden_act": "quick_gelu"},
        vision_config={"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                       "num_hidden_layers": 12, "image_size": 224, "patch_size": 32, "hidden_act": "quick_gelu"},
        projection_dim=512)
    torch.manual_seed(3)
    reference = transformers.CLIPModel(config).eval()
    torch.save(reference.state_dict(), tmp_path / "pytorch_model.bin")
    backbone = build_backbone("plip", weights=str(tmp_path))
    images = torch.rand(2, 3, 224, 224)
    prompts = ["an H&E image of tumor.", "stroma"]
    tokens = backbone.text.tokenizer(prompts)
    with torch.no_grad():
        expected_text = reference.get_text_features(input_ids=tokens)
        expected_image = reference.get_image_features(pixel_values=images)
        torch.testing.assert_close(backbone.pooled_features(images), getattr(expected_image, "pooler_output",
                                                                             expected_image), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(torch.from_numpy(backbone.text.encode(prompts, torch.device("cpu"))),
                                   getattr(expected_text, "pooler_output", expected_text), atol=1e-4, rtol=1e-4)
    assert backbone.text.logit_scale == pytest.approx(float(reference.logit_scale.detach().exp()))
