"""The pathology model registry: every entry builds (on the meta device, so giant models cost no
memory) and yields its documented token layout and embedding; the listing shows them all."""

import time

import pytest
import torch
from conftest import assert_one_line_error, run_cli

from evalsuite.models.backbones import create_architecture, spec_backbone
from evalsuite.models.pooling import DENSE_RULES, FEATURE_MAP, POOLING_RULES, TIMM_HEAD, pooled_dim
from evalsuite.models.registry import MODELS

ISSUE_NAMES = ["uni", "uni2-h", "virchow", "virchow2", "h-optimus-0", "h-optimus-1", "h0-mini", "prov-gigapath",
               "phikon", "phikon-v2", "hibou-b", "hibou-l", "midnight-12k", "lunit-vits8", "kaiko-vits16",
               "kaiko-vitb16", "kaiko-vitl14", "efficientnet_lite0_imagenet"]

# Published embedding sizes (model cards; the H0-mini, Virchow and Midnight cards concatenate
# the class token with the mean patch token, doubling the token width).
CARD_EMBED_DIMS = {"uni": 1024, "uni2-h": 1536, "virchow": 2560, "virchow2": 2560, "h-optimus-0": 1536,
                   "h-optimus-1": 1536, "h0-mini": 1536, "prov-gigapath": 1536, "phikon": 768, "phikon-v2": 1024,
                   "hibou-b": 768, "hibou-l": 1024, "midnight-12k": 3072, "lunit-vits8": 384, "kaiko-vits16": 384,
                   "kaiko-vitb16": 768, "kaiko-vitl14": 1024, "efficientnet_lite0_imagenet": 1280}
# Register tokens named on the cards / in the benchmark loaders.
CARD_REGISTERS = {"uni2-h": 8, "virchow2": 4, "h-optimus-0": 4, "h-optimus-1": 4, "h0-mini": 4, "hibou-b": 4,
                  "hibou-l": 4, "kaiko-vitl14": 4}

BATCH = 2


def test_every_name_in_the_issue_is_registered():
    assert set(ISSUE_NAMES) <= set(MODELS)


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_documented_facts_are_consistent(name):
    spec = MODELS[name]
    assert spec.embed_dim == CARD_EMBED_DIMS[name]
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
    assert model.num_reg_tokens == spec.num_register_tokens
    assert tuple(model.patch_embed.patch_size) == (spec.patch_size_px, spec.patch_size_px)
    assert model.embed_dim == spec.token_dim


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
    assert "tasks:" not in result.stdout


def test_list_without_a_kind_still_lists_everything():
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    assert "tasks:" in result.stdout and "probes:" in result.stdout and "uni2-h" in result.stdout


@pytest.mark.parametrize("name, hub_id, gated", [("uni2-h", "hf-hub:MahmoodLab/UNI2-h", True),
                                                  ("midnight-12k", "hf-hub:kaiko-ai/midnight", False)])
def test_hub_model_offline_fails_fast_with_the_weights_alternative(tmp_path, name, hub_id, gated):
    # Port 9 (discard) on localhost refuses connections: the hub is unreachable even on a networked CI host.
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
    started = time.monotonic()
    result = run_cli("run", "--task", "demo", "--model", name, "--out", tmp_path / "out", env=env, timeout=60)
    elapsed_s = time.monotonic() - started

    assert elapsed_s < 30
    assert_one_line_error(result, f"'{name}'", hub_id, "--weights", "unreachable")
    assert ("HF_TOKEN" in result.stderr) == gated
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


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
