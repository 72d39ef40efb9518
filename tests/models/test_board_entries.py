"""The boards' encoders (models/image/board_entries.py): registered and listed with licence and access, built on the
meta device with their documented tokens and embedding, and filled from a checkpoint in the layout its authors
publish (file name and key names) through the hub loader and `--weights`, giving the embedding of the module the
checkpoint came from. Round trips use a
one-block, narrow variant of each timm architecture: the same key names."""

import dataclasses

import pytest
import torch
from safetensors.torch import save_file

from evalsuite import cli
from evalsuite.errors import EvalsuiteError
from evalsuite.models.backbones import build_backbone, create_architecture, spec_backbone
from evalsuite.models.image.board_entries import BOARD_SPECS
from evalsuite.models.registry import REGISTRY

# name: (embedding, token width, patch px, hub id, checkpoint file as published, keys under `backbone.`)
PUBLISHED = {
    "exaone-path-2.5": (768, 768, 14, "hf-hub:LGAI-EXAONE/EXAONE-Path-2.5", "patch-encoder/model.safetensors", True),
    "pathorchestra": (1024, 1024, 16, "hf-hub:AI4Pathology/PathOrchestra", "model.safetensors", False),
    "digepath": (1024, 1024, 16, "hf-hub:xtxx/Digepath", "model.safetensors", False),
    "gpfm": (1024, 1024, 14, "hf-hub:majiabo/GPFM", "GPFM.pth", False),
    "mstar": (1024, 1024, 16, "hf-hub:Wangyh/mSTAR", "mSTAR.pth", False),
    "tinypath": (640, 640, 16, "hf-hub:originbio/TinyPath", "model.safetensors", False),
}
NAMES = sorted(PUBLISHED)


def test_every_board_model_is_registered_once():
    assert sorted(spec.name for spec in BOARD_SPECS) == NAMES
    assert all(REGISTRY[name].kind == "image" for name in NAMES)


def test_list_models_shows_each_with_licence_and_access(capsys):
    assert cli.main(["list", "models"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name in NAMES:
        cfg = REGISTRY[name].pretrained_cfg
        access = {True: "gated", False: "open", None: "gating unconfirmed"}[cfg.gated]
        assert f"{cfg.licence}; {access}" in rows[name] and f" {PUBLISHED[name][0]} " in rows[name]


@pytest.mark.parametrize("name", NAMES)
def test_meta_build_gives_the_documented_tokens_and_embedding(name):
    spec = REGISTRY[name]
    embed_dim, token_dim, patch_px, hub_id, _, _ = PUBLISHED[name]
    assert (spec.embed_dim, spec.token_dim, spec.patch_size_px, spec.pretrained_cfg.hub_id) == (
        embed_dim, token_dim, patch_px, hub_id)
    assert spec.sources and all(url.startswith("https://") for url in spec.sources) and spec.unconfirmed
    model = create_architecture(spec, device="meta")
    backbone = spec_backbone(spec, model, weights_id="meta", label=name)
    images = torch.empty(2, 3, spec.input_size_px, spec.input_size_px, device="meta")
    grid = spec.input_size_px // patch_px
    assert tuple(model.forward_features(images).shape) == (2, 1 + grid * grid, token_dim)
    assert tuple(backbone.pooled_features(images).shape) == (2, embed_dim)
    assert tuple(backbone.dense_features(images).shape) == (2, grid, grid, token_dim)


def test_tinypath_has_the_cards_parameter_count():
    model = create_architecture(REGISTRY["tinypath"], device="meta")
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == 103.6  # card: 103.6M


class _Wrapped(torch.nn.Module):
    """EXAONE Path 2.5's PatchEncoder holds its ViT as `backbone` (exaonepath/models/patch_encoder_hf.py)."""

    def __init__(self, vit):
        super().__init__()
        self.backbone = vit


def _one_block(name: str):
    """The entry's architecture with one block, 80 wide, at a 4x4 patch grid: the published key names."""
    spec = REGISTRY[name]
    small_px = 4 * spec.patch_size_px
    small = {"depth": 1, "img_size": small_px, "embed_dim": 80, "num_heads": 4}
    return dataclasses.replace(spec, timm_kwargs={**spec.timm_kwargs, **small}, token_dim=80, embed_dim=80,
                               pretrained_cfg=dataclasses.replace(spec.pretrained_cfg, input_size_px=small_px))


def _published_file(name: str, folder):
    """(file in the published name and keys, the module the tensors came from) for a one-block variant."""
    reference = create_architecture(_one_block(name)).eval()
    with torch.no_grad():  # layer scales, norms and biases away from their init, so a misplaced one shows
        for param in (p for p in reference.parameters() if p.ndim == 1):
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(param.numel())) * 0.1)
    filename, wrapped = PUBLISHED[name][4], PUBLISHED[name][5]
    state = (_Wrapped(reference) if wrapped else reference).state_dict()
    path = folder / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    if filename.endswith(".safetensors"):
        save_file({k: v.contiguous() for k, v in state.items()}, path)
    else:
        torch.save(state, path)
    return path, reference


@pytest.mark.parametrize("name", NAMES)
def test_hub_file_in_the_published_layout_loads_strictly_and_embeds_as_its_module(monkeypatch, tmp_path, name):
    path, reference = _published_file(name, tmp_path)
    spec, asked = _one_block(name), []

    def download(model_name, hub_id, gated, filenames=("model.safetensors", "pytorch_model.bin")):
        asked.append((hub_id, filenames))
        return path

    monkeypatch.setitem(REGISTRY, name, spec)
    monkeypatch.setattr("evalsuite.models.backbones.download_weights", download)
    backbone = build_backbone(name)
    images = torch.rand(2, 3, spec.input_size_px, spec.input_size_px, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(backbone.pooled_features(images), reference(images))  # timm's num_classes=0 output
    assert asked[0][0] == PUBLISHED[name][3] and PUBLISHED[name][4] in asked[0][1]


@pytest.mark.parametrize("name", ["exaone-path-2.5", "gpfm"])
def test_weights_file_of_another_network_is_a_one_line_error(monkeypatch, tmp_path, name):
    other = "mstar" if name == "exaone-path-2.5" else "exaone-path-2.5"
    path, _ = _published_file(other, tmp_path)
    monkeypatch.setitem(REGISTRY, name, _one_block(name))
    with pytest.raises(EvalsuiteError) as error:
        build_backbone(name, weights=str(path))
    assert "\n" not in str(error.value) and str(path) in str(error.value)
