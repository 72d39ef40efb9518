"""Loading registry models from local checkpoints (files, folders, shards, the hub cache) and the
features they give: the pooled embedding and dense patch grid must equal an independent timm
model's tokens, and a checkpoint that does not fit fails with one line naming the keys."""

import json

import pytest
import timm
import torch
from conftest import leaderboard_rows, run_cli
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone, load_weights
from evalsuite.models.image.entries import MODELS

KAIKO_S16 = "kaiko-vits16"  # the smallest registry ViT: ViT-S/16, 384 wide, 14x14 patches at 224 px


def _reference_vit(seed: int = 1, **kwargs) -> torch.nn.Module:
    """A randomly initialised ViT-S/16 of kaiko-vits16's architecture, independent of evalsuite."""
    torch.manual_seed(seed)
    return timm.create_model("vit_small_patch16_224", num_classes=0, **kwargs).eval()


def _images(batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(model, tokens for _images(), safetensors path) of one random ViT-S/16."""
    model = _reference_vit()
    path = tmp_path_factory.mktemp("weights") / "kaiko_random.safetensors"
    save_file(model.state_dict(), str(path))
    with torch.inference_mode():
        tokens = model.forward_features(_images())
    return model, tokens, path


def _features(backbone):
    with torch.inference_mode():
        return backbone.pooled_features(_images()), backbone.dense_features(_images())


def test_local_safetensors_gives_the_checkpoint_models_cls_token_and_patch_grid(reference):
    _, tokens, path = reference
    backbone = build_backbone(KAIKO_S16, weights=str(path))
    pooled, dense = _features(backbone)

    assert torch.allclose(pooled, tokens[:, 0], atol=1e-5)
    assert torch.allclose(dense, tokens[:, 1:].reshape(2, 14, 14, 384), atol=1e-5)
    assert backbone.embed_dim == 384 and backbone.label == f"{KAIKO_S16}+kaiko_random"
    assert backbone.weights_id.startswith("sha256:")
    assert backbone.data_config["mean"] == (0.5, 0.5, 0.5)
    assert not any(p.requires_grad or p.is_meta for p in backbone.model.parameters())


def test_folder_prefers_safetensors_over_a_pytorch_file(reference, tmp_path):
    _, tokens, path = reference
    (tmp_path / "model.safetensors").write_bytes(path.read_bytes())
    torch.save(_reference_vit(seed=2).state_dict(), tmp_path / "pytorch_model.bin")
    pooled, _ = _features(build_backbone(KAIKO_S16, weights=str(tmp_path)))
    assert torch.allclose(pooled, tokens[:, 0], atol=1e-5)


def test_wrapped_pth_is_read_with_weights_only(reference, tmp_path):
    model, tokens, _ = reference
    torch.save({"state_dict": {f"module.{k}": v for k, v in model.state_dict().items()}}, tmp_path / "ckpt.pth")
    pooled, _ = _features(build_backbone(KAIKO_S16, weights=str(tmp_path / "ckpt.pth")))
    assert torch.allclose(pooled, tokens[:, 0], atol=1e-5)


def test_pickled_code_is_refused(tmp_path):
    torch.save({"state_dict": {"weight": torch.zeros(1)}, "optimizer": torch.optim.SGD}, tmp_path / "bad.pth")
    with pytest.raises(EvalsuiteError, match="cannot read weights"):
        build_backbone(KAIKO_S16, weights=str(tmp_path / "bad.pth"))


def test_sharded_checkpoint_folder_is_joined(reference, tmp_path):
    model, tokens, _ = reference
    state = model.state_dict()
    keys = list(state)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for name, shard_keys in shards.items():
        save_file({k: state[k].contiguous() for k in shard_keys}, str(tmp_path / name))
    index = {"weight_map": {k: name for name, shard_keys in shards.items() for k in shard_keys}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))

    pooled, _ = _features(build_backbone(KAIKO_S16, weights=str(tmp_path)))
    assert torch.allclose(pooled, tokens[:, 0], atol=1e-5)


def test_checkpoint_of_another_architecture_names_the_mismatch(tmp_path):
    torch.manual_seed(0)
    vit_base = timm.create_model("vit_base_patch16_224", num_classes=0)
    save_file(vit_base.state_dict(), str(tmp_path / "vitb.safetensors"))
    with pytest.raises(EvalsuiteError, match=r"do not fit VisionTransformer: .*wrong shapes [1-9]") as error:
        build_backbone(KAIKO_S16, weights=str(tmp_path / "vitb.safetensors"))
    assert "\n" not in str(error.value)


def test_folder_with_two_unrelated_checkpoints_asks_for_the_file(tmp_path):
    save_file({"a": torch.zeros(1)}, str(tmp_path / "one.safetensors"))
    save_file({"a": torch.zeros(1)}, str(tmp_path / "two.safetensors"))
    with pytest.raises(EvalsuiteError, match="must hold one checkpoint"):
        build_backbone(KAIKO_S16, weights=str(tmp_path))


def _trained_at_448(tmp_path):
    """(model, safetensors path) of a ViT-S/16 whose position embeddings are a 28x28 grid."""
    model = _reference_vit(img_size=448)
    path = tmp_path / "at448.safetensors"
    save_file(model.state_dict(), str(path))
    return model, path


def test_timm_checkpoint_of_another_grid_gets_timms_antialiased_positions(tmp_path):
    from timm.layers import resample_abs_pos_embed

    trained, path = _trained_at_448(tmp_path)
    backbone = build_backbone(KAIKO_S16, weights=str(path))  # a timm-native registry entry, 14x14 at 224 px
    source = trained.pos_embed.detach()
    expected = resample_abs_pos_embed(source, new_size=[14, 14], num_prefix_tokens=1, antialias=True)
    assert torch.equal(backbone.model.pos_embed, expected)
    # The check can tell the two filters apart: without antialiasing the positions differ.
    without = resample_abs_pos_embed(source, new_size=[14, 14], num_prefix_tokens=1, antialias=False)
    assert not torch.allclose(backbone.model.pos_embed, without, atol=1e-4)


def test_timm_checkpoint_of_another_grid_loads_as_timms_own_pretrained_loader_loads_it(tmp_path):
    _, path = _trained_at_448(tmp_path)
    timms = timm.create_model("vit_small_patch16_224", pretrained=True, num_classes=0,
                              pretrained_cfg_overlay={"file": str(path)}).eval()
    ours = build_backbone("vit_small_patch16_224", weights=str(path))
    assert torch.equal(ours.model.pos_embed, timms.pos_embed)
    with torch.inference_mode():
        assert torch.allclose(ours.pooled_features(_images()), timms(_images()), atol=1e-6)


@pytest.mark.parametrize("registers", [0, 4])
def test_transformers_checkpoint_of_another_grid_gets_the_positions_transformers_computes(tmp_path, registers):
    """Dinov2 (Midnight, Phikon-v2) interpolates without antialiasing, Dinov2WithRegisters (Hibou) with it:
    trained at 56 px (4x4 positions), run at 28 px, our timm model must give transformers' tokens."""
    transformers = pytest.importorskip("transformers", reason="transformers is the reference here (dev extra)")
    from timm.models.vision_transformer import VisionTransformer

    sizes = dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=56, patch_size=14)
    if registers:
        hf = transformers.Dinov2WithRegistersModel(transformers.Dinov2WithRegistersConfig(
            num_register_tokens=registers, **sizes))
    else:
        hf = transformers.Dinov2Model(transformers.Dinov2Config(**sizes))
    with torch.no_grad():  # every tensor random, positions included, so a filter difference shows
        generator = torch.Generator().manual_seed(0)
        for param in hf.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    save_file(hf.eval().state_dict(), str(tmp_path / "model.safetensors"))
    images = torch.randn(2, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = hf(pixel_values=images).last_hidden_state

    model = VisionTransformer(img_size=28, patch_size=14, embed_dim=64, depth=1, num_heads=4, init_values=1.0,
                              num_classes=0, reg_tokens=registers, no_embed_class=bool(registers)).eval()
    load_weights(model, tmp_path)
    with torch.inference_mode():
        assert torch.allclose(model.forward_features(images), expected, atol=1e-5)


def test_offline_hub_cache_serves_registry_weights(reference, tmp_path, monkeypatch):
    """Offline, a checkpoint already in the Hugging Face cache loads without --weights."""
    from huggingface_hub import constants

    _, tokens, path = reference
    repo = MODELS[KAIKO_S16].pretrained_cfg.hub_repo
    revision = "0" * 40
    repo_dir = tmp_path / f"models--{repo.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(revision)
    snapshot = repo_dir / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(path.read_bytes())
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # unreachable: forces the offline path

    backbone = build_backbone(KAIKO_S16)
    pooled, _ = _features(backbone)
    assert torch.allclose(pooled, tokens[:, 0], atol=1e-5)
    assert backbone.label == KAIKO_S16


def test_random_init_needs_no_weights_and_is_reproducible():
    first, second = build_backbone("lunit-vits8", random_init=True), build_backbone("lunit-vits8", random_init=True)
    assert first.weights_id == "random-init:seed0" and first.label == "lunit-vits8+random-init"
    assert torch.equal(first.model.pos_embed, second.model.pos_embed)


def test_dense_features_of_a_plain_timm_vit_drop_its_class_token(reference, tmp_path):
    _, tokens, path = reference
    backbone = build_backbone("vit_small_patch16_224", weights=str(path))
    _, dense = _features(backbone)
    assert torch.allclose(dense, tokens[:, 1:].reshape(2, 14, 14, 384), atol=1e-5)


@pytest.mark.slow
def test_run_end_to_end_with_a_local_registry_checkpoint(reference, tmp_path):
    from conftest import make_crc

    _, _, path = reference
    out = tmp_path / "out"
    data = make_crc(tmp_path / "crc", train_per_class=2, test_per_class=1)  # 27 tiles: the checkpoint is the point
    result = run_cli("run", "--task", "crc", "--data-root", data, "--no-count-check", "--model", KAIKO_S16,
                     "--weights", path, "--out", out, "--probes", "knn", "--num-workers", "0",
                     env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr

    rows = leaderboard_rows(out)
    assert rows and {r["model"] for r in rows} == {f"{KAIKO_S16}+kaiko_random"}
    assert {r["probe"] for r in rows} == {"knn"}
    assert all(r["weights_id"].startswith("sha256:") for r in rows)
    [run_json] = (out / "runs").glob("*.json")
    record = json.loads(run_json.read_text())
    assert record["model"]["embed_dim"] == 384 and record["model"]["pooling"] == "cls"


@pytest.mark.parametrize("name, source", [("hf-hub:some-org/some-vit", "hub:some-org/some-vit"),
                                          ("test_vit", "timm:")])
def test_hub_weights_are_identified_by_their_content_and_their_source(monkeypatch, name, source):
    import evalsuite.models.backbones as backbones

    weights = {"seed": 0}

    def fake_hub(_name, **kwargs):  # what timm would build from the hub, offline
        torch.manual_seed(weights["seed"])
        return timm.create_model("test_vit", pretrained=False, **kwargs)

    monkeypatch.setattr(backbones, "create_from_hub", fake_hub)
    first, again = backbones.build_backbone(name).weights_id, backbones.build_backbone(name).weights_id
    weights["seed"] = 1
    changed = backbones.build_backbone(name).weights_id
    assert first == again != changed
    assert first.startswith(source) and "#sha256-state:" in first and len(first.split(":")[-1]) == 64
