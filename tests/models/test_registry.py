"""The pathology model registry: every entry builds (on the meta device, so giant models cost no
memory) and yields its documented token layout and embedding; the listing shows them all."""

import dataclasses

import pytest
import torch
from conftest import assert_one_line_error, run_cli
from safetensors.torch import save_file

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.backbones import build_backbone, create_architecture, load_weights, spec_backbone, with_pooling
from evalsuite.models.image.entries import MODELS
from evalsuite.models.pooling import (
    CLS,
    CLS_MEAN_PATCH,
    DENSE_RULES,
    FEATURE_MAP,
    POOLING_RULES,
    TIMM_HEAD,
    pooled_dim,
)

ISSUE_NAMES = ["uni", "uni2-h", "virchow", "virchow2", "h-optimus-0", "h-optimus-1", "h0-mini", "prov-gigapath",
               "phikon", "phikon-v2", "hibou-b", "hibou-l", "midnight-12k", "lunit-vits8", "kaiko-vits16",
               "kaiko-vitb16", "kaiko-vitl14", "efficientnet_lite0_imagenet",
               # issue 17
               "openmidnight-1.1", "dinov3-vits16", "dinov3-vitb16", "dinov3-vitl16",
               "virchow2-cls", "h0-mini-cls", "midnight-12k-cls",
               "conch-v1.5"]

# Published embedding sizes (model cards; the H0-mini, Virchow and Midnight cards concatenate
# the class token with the mean patch token, doubling the token width).
CARD_EMBED_DIMS = {"uni": 1024, "uni2-h": 1536, "virchow": 2560, "virchow2": 2560, "h-optimus-0": 1536,
                   "h-optimus-1": 1536, "h0-mini": 1536, "prov-gigapath": 1536, "phikon": 768, "phikon-v2": 1024,
                   "hibou-b": 768, "hibou-l": 1024, "midnight-12k": 3072, "lunit-vits8": 384, "kaiko-vits16": 384,
                   "kaiko-vitb16": 768, "kaiko-vitl14": 1024, "efficientnet_lite0_imagenet": 1280,
                   # OpenMidnight-1.1 card: tokens[:, 0] is 1536 wide; DINOv3 S/B/L widths (timm eva.py);
                   # eva's class-token-only embeddings (its IN_FEATURES: 1280 Virchow2, 1536 Midnight).
                   "openmidnight-1.1": 1536, "dinov3-vits16": 384, "dinov3-vitb16": 768, "dinov3-vitl16": 1024,
                   "virchow2-cls": 1280, "h0-mini-cls": 768, "midnight-12k-cls": 1536,
                   # TRIDENT's CONCHVisionTower: ln_contrast(attn_pool_contrast(tokens)[:, 0]), 768 wide.
                   "conch-v1.5": 768}
# Register tokens named on the cards / in the benchmark loaders.
CARD_REGISTERS = {"uni2-h": 8, "virchow2": 4, "h-optimus-0": 4, "h-optimus-1": 4, "h0-mini": 4, "hibou-b": 4,
                  "hibou-l": 4, "kaiko-vitl14": 4, "openmidnight-1.1": 4, "dinov3-vits16": 4, "dinov3-vitb16": 4,
                  "dinov3-vitl16": 4, "virchow2-cls": 4, "h0-mini-cls": 4}
EVA_CLS_VARIANTS = {"virchow2-cls": "virchow2", "h0-mini-cls": "h0-mini", "midnight-12k-cls": "midnight-12k"}

BATCH = 2


def test_every_name_in_the_issue_is_registered():
    assert set(ISSUE_NAMES) <= set(MODELS)


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_documented_facts_are_consistent(name):
    spec = MODELS[name]
    assert spec.embed_dim == CARD_EMBED_DIMS[name]
    if spec.head is None:  # a head (CONCH's pooler) sets its own width
        assert spec.embed_dim == pooled_dim(spec.pooling, spec.token_dim)
    assert spec.num_register_tokens == CARD_REGISTERS.get(name, 0)
    assert spec.pooling in POOLING_RULES and spec.dense in DENSE_RULES
    assert spec.input_size_px % spec.patch_size_px == 0
    assert spec.sources and all(url.startswith("https://") for url in spec.sources)
    cfg = spec.pretrained_cfg
    assert cfg.licence and len(cfg.mean) == 3 and len(cfg.std) == 3 and min(cfg.std) > 0
    assert (cfg.hub_id is None) == (spec.package_weights is not None)
    assert cfg.hub_id is None or cfg.hub_id.startswith("hf-hub:")


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_architecture_yields_documented_tokens_and_embedding(name):
    spec = MODELS[name]
    model = create_architecture(spec, device="meta")
    assert all(p.is_meta for p in model.parameters())
    backbone = spec_backbone(spec, model, weights_id="meta", label=name)
    images = torch.empty(BATCH, 3, spec.input_size_px, spec.input_size_px, device="meta")
    grid_h, grid_w = spec.grid_hw

    pooled = backbone.pooled_features(images)
    dense = backbone.dense_features(images)

    assert tuple(pooled.shape) == (BATCH, spec.embed_dim)
    assert tuple(dense.shape) == (BATCH, grid_h, grid_w, spec.token_dim)
    assert backbone.data_config["input_size"] == (3, spec.input_size_px, spec.input_size_px)
    if spec.dense == FEATURE_MAP:
        assert spec.pooling == TIMM_HEAD and spec.num_prefix_tokens == 0
        return
    tokens = model.forward_features(images)
    assert tuple(tokens.shape) == (BATCH, spec.num_prefix_tokens + grid_h * grid_w, spec.token_dim)
    assert model.num_prefix_tokens == spec.num_prefix_tokens
    trunk = getattr(model, "trunk", model)  # a model with a head (CONCH v1.5) keeps its timm ViT as `trunk`
    # timm's VisionTransformer and Eva (DINOv3) both keep registers in `reg_token` (None without them).
    assert (0 if trunk.reg_token is None else trunk.reg_token.shape[1]) == spec.num_register_tokens
    assert tuple(trunk.patch_embed.patch_size) == (spec.patch_size_px, spec.patch_size_px)
    assert trunk.embed_dim == spec.token_dim


@pytest.mark.parametrize("variant, base", sorted(EVA_CLS_VARIANTS.items()))
def test_eva_class_token_variant_is_the_card_model_pooled_by_its_class_token(variant, base):
    card, eva = MODELS[base], MODELS[variant]
    assert card.pooling == CLS_MEAN_PATCH and eva.pooling == CLS
    assert eva.embed_dim == card.token_dim == card.embed_dim // 2
    same = ("architecture", "timm_kwargs", "pretrained_cfg", "patch_size_px", "num_prefix_tokens", "token_dim", "dense")
    assert all(getattr(eva, field) == getattr(card, field) for field in same)
    assert any("kaiko-ai/eva" in url for url in eva.sources)


def test_eva_class_token_variant_embeds_exactly_the_class_token():
    # Random weights on a real (CPU) ViT-B, forwarded once at its fixed 224 px: the variant's embedding is the
    # class token, the card model's embedding starts with it and continues with the mean of the patch tokens.
    spec = MODELS["h0-mini-cls"]
    model = create_architecture(spec)
    images = torch.rand(1, 3, 224, 224)
    variant = spec_backbone(spec, model, weights_id="random", label=spec.name)
    card = spec_backbone(MODELS["h0-mini"], model, weights_id="random", label="h0-mini")
    with torch.no_grad():
        tokens = model.forward_features(images)
        pooled, card_pooled = variant.pooled_features(images), card.pooled_features(images)
    torch.testing.assert_close(pooled, tokens[:, 0])
    torch.testing.assert_close(card_pooled, torch.cat([tokens[:, 0], tokens[:, 5:].mean(dim=1)], dim=-1))


def test_dinov3_runs_at_the_pathology_tile_size_and_fits_a_timm_layout_checkpoint(tmp_path):
    # DINOv3 has RoPE and no absolute position embedding: a 224 px tile (14x14 patches) needs no resampling.
    spec = MODELS["dinov3-vits16"]
    model = create_architecture(spec)
    backbone = spec_backbone(spec, model, weights_id="random", label=spec.name)
    with torch.no_grad():
        dense = backbone.dense_features(torch.rand(1, 3, 224, 224))
    assert tuple(dense.shape) == (1, 14, 14, spec.token_dim)
    # A checkpoint in timm's layout (as on the hub) fits the architecture key for key and shape for shape.
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp_path / "w.safetensors")
    state = checkpoints.read_state_dict(tmp_path / "w.safetensors")
    fitted = checkpoints.matched_state_dict(create_architecture(spec, device="meta"), state, tmp_path)
    assert fitted.keys() == state.keys()


def test_dinov3_weights_load_onto_the_meta_module_and_reproduce_the_reference(tmp_path):
    spec = MODELS["dinov3-vits16"]
    reference = create_architecture(spec).eval()
    save_file({k: v.contiguous() for k, v in reference.state_dict().items()}, tmp_path / "w.safetensors")
    model = create_architecture(spec, device="meta")
    load_weights(model, tmp_path / "w.safetensors")
    images = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model.eval().forward_features(images), reference.forward_features(images))


def test_list_models_prints_every_entry_with_its_dims():
    result = run_cli("list", "--models")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    for name in ISSUE_NAMES:
        assert name in rows, result.stdout
        assert f" {MODELS[name].embed_dim} " in rows[name]
        assert f"{MODELS[name].patch_size_px} px" in rows[name]
    assert "1 cls + 4 reg + 16x16 patches" in rows["virchow2"]
    assert "gated" in rows["uni2-h"] and "MIT" in rows["midnight-12k"]
    assert "1 cls + 4 reg + 16x16 patches" in rows["dinov3-vitl16"] and "256 px" in rows["dinov3-vitl16"]
    assert " 1280 " in rows["virchow2-cls"] and "gating unconfirmed" in rows["openmidnight-1.1"]
    assert "tasks:" not in result.stdout


def test_list_without_a_kind_still_lists_everything():
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    assert "tasks:" in result.stdout and "probes:" in result.stdout and "uni2-h" in result.stdout


@pytest.mark.parametrize("name, hub_id, gated", [("uni2-h", "hf-hub:MahmoodLab/UNI2-h", True),
                                                  ("midnight-12k", "hf-hub:kaiko-ai/midnight", False)])
def test_hub_model_offline_fails_fast_with_the_weights_alternative(tmp_path, name, hub_id, gated):
    # Port 9 (discard) on localhost refuses connections: the hub is unreachable even on a networked CI host.
    # No clock here (a loaded host made 30 s fail): test_unreachable_hub_is_one_connect_attempt_then_offline
    # checks what makes it fast; benchmarks/fail_fast.py measures the seconds.
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
    result = run_cli("run", "--task", "demo", "--model", name, "--out", tmp_path / "out", env=env, timeout=120)

    assert_one_line_error(result, f"'{name}'", hub_id, "--weights", "unreachable")
    assert ("HF_TOKEN" in result.stderr) == gated
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


@pytest.mark.parametrize("name", ["uni2-h", "midnight-12k"])
def test_unreachable_hub_is_one_connect_attempt_then_offline(monkeypatch, tmp_path, name):
    """What makes the offline error fast: one refused connect (the reachability probe), then huggingface_hub runs
    offline, so its half minute of retries never starts and no weights are downloaded."""
    import socket

    import huggingface_hub
    from huggingface_hub import constants

    attempts, offline_during_download = [], []

    def refuse(sock, address):
        attempts.append(address)
        raise ConnectionRefusedError(111, "refused by the test")

    real_download = huggingface_hub.hf_hub_download

    def download(*args, **kwargs):
        offline_during_download.append(constants.HF_HUB_OFFLINE)
        return real_download(*args, **kwargs)

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    with pytest.raises(EvalsuiteError, match="unreachable.*--weights"):
        build_backbone(name)
    assert attempts == [("127.0.0.1", 9)]  # the probe only: one connect, no retry
    assert offline_during_download and all(offline_during_download)  # every lookup ran offline
    assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").rglob("*.safetensors"))


def _hub_error(cls, message: str) -> Exception:
    """A huggingface_hub HTTP error without an HTTP response (their constructors want one)."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


def _fake_hub(monkeypatch, files: dict):
    """hf_hub_download answering from `files` (filename -> path or exception), the hub 'reachable'."""
    import huggingface_hub

    calls = []

    def download(repo, filename, **_):
        calls.append((repo, filename))
        answer = files[filename]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr("evalsuite.models.hub.hub_reachable", lambda *a, **k: True)
    return calls


def test_hub_download_falls_back_to_the_pytorch_file_when_there_is_no_safetensors(monkeypatch):
    from huggingface_hub.errors import RemoteEntryNotFoundError

    from evalsuite.models.hub import download_weights

    calls = _fake_hub(monkeypatch, {"model.safetensors": _hub_error(RemoteEntryNotFoundError, "404"),
                                    "pytorch_model.bin": "/cache/pytorch_model.bin"})
    path = download_weights("uni", "hf-hub:MahmoodLab/UNI", gated=True)
    assert str(path) == "/cache/pytorch_model.bin"
    assert calls == [("MahmoodLab/UNI", "model.safetensors"), ("MahmoodLab/UNI", "pytorch_model.bin")]


def test_gated_repository_without_access_names_the_licence_page_and_hf_token(monkeypatch):
    from huggingface_hub.errors import GatedRepoError

    from evalsuite.errors import EvalsuiteError
    from evalsuite.models.hub import download_weights

    _fake_hub(monkeypatch, {"model.safetensors": _hub_error(GatedRepoError, "401 restricted")})
    with pytest.raises(EvalsuiteError) as error:
        download_weights("virchow2", "hf-hub:paige-ai/Virchow2", gated=True)
    message = str(error.value)
    assert "'virchow2' (hf-hub:paige-ai/Virchow2) is gated" in message
    assert "https://huggingface.co/paige-ai/Virchow2" in message and "HF_TOKEN" in message and "--weights" in message


# CONCH v1.5, as mahmoodlab/TRIDENT (a91fa84) runs it: trident/patch_encoder_models/model_zoo/conchv1_5/conchv1_5.py
# builds CONCHVisionTower (trunk `vit_large(init_values=1.0)` at 224 px, AttentionalPooler(d_model=768,
# context_dim=1024, n_head=8, n_queries=1), LayerNorm(768)) and loads `pytorch_model_vision.bin` strictly.
def _trident_conch_layout(depth: int) -> dict:
    """Key -> shape of TRIDENT's CONCHVisionTower state dict, written out from its module tree."""
    width, hidden, pooled = 1024, 4096, 768
    layout = {"trunk.cls_token": (1, 1, width), "trunk.pos_embed": (1, 1 + 14 * 14, width),
              "trunk.patch_embed.proj.weight": (width, 3, 16, 16), "trunk.patch_embed.proj.bias": (width,)}
    for i in range(depth):
        block = f"trunk.blocks.{i}"
        layout.update({f"{block}.norm1.weight": (width,), f"{block}.norm1.bias": (width,),
                       f"{block}.attn.qkv.weight": (3 * width, width), f"{block}.attn.qkv.bias": (3 * width,),
                       f"{block}.attn.proj.weight": (width, width), f"{block}.attn.proj.bias": (width,),
                       f"{block}.ls1.gamma": (width,),
                       f"{block}.norm2.weight": (width,), f"{block}.norm2.bias": (width,),
                       f"{block}.mlp.fc1.weight": (hidden, width), f"{block}.mlp.fc1.bias": (hidden,),
                       f"{block}.mlp.fc2.weight": (width, hidden), f"{block}.mlp.fc2.bias": (width,),
                       f"{block}.ls2.gamma": (width,)})
    layout.update({"trunk.norm.weight": (width,), "trunk.norm.bias": (width,),
                   "attn_pool_contrast.query": (1, pooled),
                   "attn_pool_contrast.ln_k.weight": (width,), "attn_pool_contrast.ln_k.bias": (width,),
                   "attn_pool_contrast.ln_q.weight": (pooled,), "attn_pool_contrast.ln_q.bias": (pooled,),
                   "attn_pool_contrast.to_q.weight": (pooled, pooled),
                   "attn_pool_contrast.to_kv.weight": (2 * pooled, width),
                   "attn_pool_contrast.to_out.weight": (pooled, pooled),
                   "ln_contrast.weight": (pooled,), "ln_contrast.bias": (pooled,)})
    return layout


def _trident_conch_reference(state: dict, images: torch.Tensor, depth: int) -> torch.Tensor:
    """CONCHVisionTower's forward written from TRIDENT's code: its ViT (timm's tensors) with the 14x14 position
    embedding interpolated bicubically by scale factor (grid + 0.1) / 14, then the pooler and LayerNorm."""
    import timm

    trunk = timm.create_model("vit_large_patch16_224", num_classes=0, depth=depth, init_values=1.0,
                              img_size=images.shape[-1])
    grid = images.shape[-1] // 16
    pos = state["trunk.pos_embed"]
    patch = torch.nn.functional.interpolate(pos[:, 1:].reshape(1, 14, 14, -1).permute(0, 3, 1, 2),
                                            scale_factor=((grid + 0.1) / 14, (grid + 0.1) / 14), mode="bicubic")
    trunk_state = {k.removeprefix("trunk."): v for k, v in state.items() if k.startswith("trunk.")}
    trunk_state["pos_embed"] = torch.cat([pos[:, :1], patch.permute(0, 2, 3, 1).reshape(1, grid * grid, -1)], dim=1)
    trunk.load_state_dict(trunk_state, strict=True)
    x = trunk.eval().forward_features(images)[:, None]  # 'b n d -> b 1 n d'
    p = {k.removeprefix("attn_pool_contrast."): v for k, v in state.items() if k.startswith("attn_pool_contrast.")}
    layer_norm = torch.nn.functional.layer_norm
    x = layer_norm(x, (1024,), p["ln_k.weight"], p["ln_k.bias"])
    q = layer_norm(p["query"].expand(x.shape[0], 1, 1, 768), (768,), p["ln_q.weight"], p["ln_q.bias"])
    q = q @ p["to_q.weight"].T
    k, v = (x @ p["to_kv.weight"].T).chunk(2, dim=-1)
    q, k, v = (t.reshape(*t.shape[:3], 8, 96).permute(0, 3, 1, 2, 4) for t in (q, k, v))  # b h t n d
    sim = torch.einsum("...id,...jd->...ij", q * 96 ** -0.5, k)
    out = torch.einsum("...ij,...jd->...id", (sim - sim.amax(dim=-1, keepdim=True)).softmax(dim=-1), v)
    out = out.permute(0, 2, 3, 1, 4).reshape(x.shape[0], 1, 1, 768) @ p["to_out.weight"].T
    return layer_norm(out[:, 0, 0], (768,), state["ln_contrast.weight"], state["ln_contrast.bias"])


def test_conch_v1_5_has_exactly_the_published_checkpoints_keys():
    model = create_architecture(MODELS["conch-v1.5"], device="meta")
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    published = _trident_conch_layout(depth=24)
    assert ours.keys() == published.keys()
    # Only the position embedding differs: 28x28 at the 448 px input, resampled from TRIDENT's 14x14 on load.
    assert {k for k in ours if ours[k] != published[k]} == {"trunk.pos_embed"}
    assert ours["trunk.pos_embed"] == (1, 1 + 28 * 28, 1024)


def test_conch_v1_5_file_in_the_published_layout_loads_strictly_and_embeds_as_trident(tmp_path):
    # One block instead of 24 keeps the test cheap; names and every other shape are the published ones.
    depth, spec = 1, MODELS["conch-v1.5"]
    generator = torch.Generator().manual_seed(0)
    state = {k: torch.randn(shape, generator=generator) * 0.05 for k, shape in _trident_conch_layout(depth).items()}
    for key in state:  # LayerNorm weights and layer scales near 1, as trained ones are
        if key.endswith(("norm.weight", "norm1.weight", "norm2.weight", "gamma", "ln_k.weight", "ln_q.weight",
                         "ln_contrast.weight")):
            state[key] = state[key] + 1
    torch.save(state, tmp_path / "pytorch_model_vision.bin")  # the published file is a torch.load state dict
    small = dataclasses.replace(spec, timm_kwargs={**spec.timm_kwargs, "depth": depth})
    model = create_architecture(small, device="meta")
    weights_id = load_weights(model, tmp_path / "pytorch_model_vision.bin")
    backbone = spec_backbone(small, model, weights_id=weights_id, label=spec.name)
    images = torch.randn(2, 3, 448, 448, generator=generator)
    with torch.no_grad():
        pooled = backbone.pooled_features(images)
        dense = backbone.dense_features(images)
        expected = _trident_conch_reference(state, images, depth)
    assert tuple(pooled.shape) == (2, 768) and tuple(dense.shape) == (2, 28, 28, 1024)
    torch.testing.assert_close(pooled, expected, atol=1e-5, rtol=1e-5)


def test_conch_v1_5_fetches_its_vision_weights_file(monkeypatch):
    asked = []

    def download(name, hub_id, gated, filenames=()):
        asked.append((name, hub_id, gated, filenames))
        raise EvalsuiteError("offline in this test")

    monkeypatch.setattr("evalsuite.models.backbones.download_weights", download)
    with pytest.raises(EvalsuiteError):
        build_backbone("conch-v1.5")
    assert asked == [("conch-v1.5", "hf-hub:MahmoodLab/conchv1_5", True, ("pytorch_model_vision.bin",))]


def test_conch_v1_5_embedding_is_its_pooler_so_token_pooling_rules_are_refused():
    spec = MODELS["conch-v1.5"]
    backbone = spec_backbone(spec, create_architecture(spec, device="meta"), weights_id="meta", label=spec.name)
    with pytest.raises(EvalsuiteError, match="pools inside itself"):
        with_pooling(backbone, CLS, "--pooling")
