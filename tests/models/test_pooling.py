"""Pooling rules on crafted token tensors: which tokens each rule reads, and which it must skip."""

import re

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models.pooling import (
    CLS,
    CLS_MEAN_PATCH,
    MEAN_PATCH,
    TIMM_HEAD,
    patch_grid,
    pool_tokens,
    pooled_dim,
    token_grid,
)

WIDTH = 3


def _tokens(num_registers: int, grid_side: int, batch: int = 2) -> torch.Tensor:
    """Class token = 1, registers = 1000 (loud, so leaking them into a mean is visible), patches = their index."""
    cls = torch.ones(batch, 1, WIDTH)
    registers = torch.full((batch, num_registers, WIDTH), 1000.0)
    patches = torch.arange(grid_side * grid_side, dtype=torch.float32)[None, :, None].expand(batch, -1, WIDTH)
    return torch.cat([cls, registers, patches], dim=1)


def test_cls_is_the_first_token():
    tokens = _tokens(num_registers=4, grid_side=2)
    assert torch.equal(pool_tokens(tokens, CLS, num_prefix_tokens=5), torch.ones(2, WIDTH))


def test_cls_mean_patch_concatenates_class_token_and_patch_mean_skipping_registers():
    tokens = _tokens(num_registers=4, grid_side=4)  # patch mean = mean(0..15) = 7.5
    pooled = pool_tokens(tokens, CLS_MEAN_PATCH, num_prefix_tokens=5)
    assert pooled.shape == (2, 2 * WIDTH)
    assert torch.equal(pooled[:, :WIDTH], torch.ones(2, WIDTH))
    assert torch.allclose(pooled[:, WIDTH:], torch.full((2, WIDTH), 7.5))


def test_cls_mean_patch_without_registers_averages_every_token_after_the_class_token():
    tokens = _tokens(num_registers=0, grid_side=2)  # patches 0, 1, 2, 3
    assert torch.allclose(pool_tokens(tokens, CLS_MEAN_PATCH, num_prefix_tokens=1)[:, WIDTH:], torch.full((2, WIDTH), 1.5))


def test_counting_registers_as_patches_would_change_the_mean():
    # The rule is only as good as num_prefix_tokens: too few prefix tokens lets the registers in.
    tokens = _tokens(num_registers=4, grid_side=4)
    leaky = pool_tokens(tokens, CLS_MEAN_PATCH, num_prefix_tokens=1)
    assert leaky[0, WIDTH:].min() > 7.5 + 100


def test_mean_patch_skips_class_and_register_tokens():
    tokens = _tokens(num_registers=8, grid_side=2)
    assert torch.allclose(pool_tokens(tokens, MEAN_PATCH, num_prefix_tokens=9), torch.full((2, WIDTH), 1.5))


def test_patch_grid_is_row_major_without_prefix_tokens():
    tokens = _tokens(num_registers=4, grid_side=3)
    grid = patch_grid(tokens, num_prefix_tokens=5, grid_hw=(3, 3))
    assert grid.shape == (2, 3, 3, WIDTH)
    assert grid[0, 1, 2, 0] == 1 * 3 + 2
    assert grid.max() < 1000  # no register token on the grid


def test_patch_grid_rejects_a_grid_the_tokens_do_not_fill():
    with pytest.raises(EvalsuiteError, match="do not fill a 4x4 grid"):
        patch_grid(_tokens(num_registers=4, grid_side=3), num_prefix_tokens=5, grid_hw=(4, 4))


def test_pooled_dims():
    assert pooled_dim(CLS, 1280) == 1280
    assert pooled_dim(CLS_MEAN_PATCH, 1280) == 2560
    assert pooled_dim(MEAN_PATCH, 768) == 768
    assert pooled_dim(TIMM_HEAD, 1280) == 1280


@pytest.mark.parametrize("rule, prefix, message", [
    ("max", 1, "unknown pooling rule 'max'"),
    (CLS, 0, "needs a class token"),
    (MEAN_PATCH, 20, "leave no patch tokens"),
    (TIMM_HEAD, 1, "pools inside the model"),
])
def test_bad_rules_and_token_counts_are_one_line_errors(rule, prefix, message):
    with pytest.raises(EvalsuiteError, match=message):
        pool_tokens(_tokens(num_registers=4, grid_side=2), rule, num_prefix_tokens=prefix)


def test_token_grid_needs_whole_patches():
    assert token_grid((224, 224), 14) == (16, 16)
    assert token_grid((224, 224), 8) == (28, 28)
    with pytest.raises(EvalsuiteError, match="not a whole number of 16 px patches"):
        token_grid((225, 224), 16)


# Choosing the pooling per run: the registry's default (the model card's), a task card's `pooling:`,
# and `--pooling`. eva's leaderboard pools these three cls+mean models by the class token alone.
EVA_CLASS_TOKEN_MODELS = ["virchow2", "h0-mini", "midnight-12k"]
TINY_VIT = "test_vit"  # timm's 64-wide ViT with a class token, 10x10 patches at 160 px
TINY_WIDTH = 64


def _tiny_images() -> torch.Tensor:
    return torch.randn(2, 3, 160, 160, generator=torch.Generator().manual_seed(0))


def _demo_card_with(tmp_path, card_name: str = "demo", **fields):
    import yaml

    from evalsuite.tasks.resources import cards_dir

    raw = yaml.safe_load((cards_dir() / f"{card_name}.yaml").read_text())
    path = tmp_path / f"{card_name}_pooling.yaml"
    path.write_text(yaml.safe_dump({**raw, **fields}))
    return path


@pytest.mark.parametrize("name", EVA_CLASS_TOKEN_MODELS)
def test_class_token_pooling_gives_the_token_width_where_the_card_gives_twice_it(name):
    from evalsuite.models.backbones import create_architecture, spec_backbone, with_pooling
    from evalsuite.models.image.entries import MODELS

    spec = MODELS[name]
    card_default = spec_backbone(spec, create_architecture(spec, device="meta"), weights_id="meta", label=name)
    class_token = with_pooling(card_default, CLS, "--pooling")
    images = torch.empty(2, 3, spec.input_size_px, spec.input_size_px, device="meta")

    assert card_default.pooling == CLS_MEAN_PATCH and card_default.label == name
    assert tuple(card_default.pooled_features(images).shape) == (2, 2 * spec.token_dim) == (2, card_default.embed_dim)
    assert tuple(class_token.pooled_features(images).shape) == (2, spec.token_dim) == (2, class_token.embed_dim)
    assert class_token.label == f"{name}+pooling=cls"  # its leaderboard rows stay apart from the card's


def test_pooling_choice_on_a_timm_vit_pools_its_tokens():
    from evalsuite.models.backbones import build_backbone

    default = build_backbone(TINY_VIT, random_init=True)
    class_token = build_backbone(TINY_VIT, random_init=True, pooling=CLS)
    with_mean = build_backbone(TINY_VIT, random_init=True, pooling=CLS_MEAN_PATCH)
    with torch.inference_mode():
        tokens = default.model.forward_features(_tiny_images())
        pooled = {rule: b.pooled_features(_tiny_images()) for rule, b in
                  [(TIMM_HEAD, default), (CLS, class_token), (CLS_MEAN_PATCH, with_mean)]}

    assert (default.embed_dim, class_token.embed_dim, with_mean.embed_dim) == (TINY_WIDTH, TINY_WIDTH, 2 * TINY_WIDTH)
    assert torch.equal(pooled[CLS], tokens[:, 0])
    assert torch.allclose(pooled[CLS_MEAN_PATCH], torch.cat([tokens[:, 0], tokens[:, 1:].mean(dim=1)], dim=-1))
    assert torch.allclose(pooled[TIMM_HEAD], pooled[CLS], atol=1e-6)  # timm's own head of a ViT: the class token


def test_pooling_is_part_of_the_cache_key_and_sizes_the_cached_row(tmp_path):
    from evalsuite.features.prepare import plan_splits
    from evalsuite.models.backbones import build_backbone
    from evalsuite.readers import build_reader
    from evalsuite.runner import RunConfig
    from evalsuite.tasks.cards import load_card

    card = load_card("demo")
    reader = build_reader(card, None, True)

    def planned(pooling):
        config = RunConfig(task="demo", model=TINY_VIT, random_init=True, pooling=pooling, out_dir=tmp_path)
        return plan_splits(config, card, reader, build_backbone(TINY_VIT, random_init=True, pooling=pooling),
                           torch.device("cpu"))

    class_token, with_mean, again = planned(CLS), planned(CLS_MEAN_PATCH), planned(CLS)
    assert class_token.row_shape == (TINY_WIDTH,) and with_mean.row_shape == (2 * TINY_WIDTH,)
    assert set(class_token.keys.values()).isdisjoint(with_mean.keys.values())
    assert class_token.keys == again.keys  # the key is stable: only the pooling told the two apart


def test_task_card_pooling_applies_to_token_models_and_yields_to_the_flag(tmp_path):
    from evalsuite.models.backbones import build_backbone
    from evalsuite.tasks.cards import load_card

    card = load_card(str(_demo_card_with(tmp_path, pooling=CLS_MEAN_PATCH)))
    assert card.pooling == CLS_MEAN_PATCH and load_card("demo").pooling is None
    assert build_backbone(TINY_VIT, random_init=True, card_pooling=card.pooling).embed_dim == 2 * TINY_WIDTH
    assert build_backbone(TINY_VIT, random_init=True, pooling=CLS, card_pooling=card.pooling).embed_dim == TINY_WIDTH
    # A CNN pools inside itself: a card's rule for token models leaves it as it is, the flag is an error.
    cnn = build_backbone("efficientnet_lite0_imagenet", random_init=True, card_pooling=card.pooling)
    assert cnn.pooling == TIMM_HEAD and cnn.embed_dim == 1280
    with pytest.raises(EvalsuiteError, match="pools inside itself"):
        build_backbone("efficientnet_lite0_imagenet", random_init=True, pooling=CLS)


@pytest.mark.parametrize("card_name, fields, message", [
    ("demo", {"pooling": "max"}, "field 'pooling': unknown pooling 'max'; use one of cls, cls+mean_patch, mean_patch"),
    ("demo", {"pooling": TIMM_HEAD}, "unknown pooling 'timm_head'"),
    ("demo", {"pooling": 1}, "field 'pooling' must be str"),
    ("demo_seg", {"pooling": CLS},
     "field 'pooling' applies to classification, slide, survival, regression and consistency cards only"),
])
def test_bad_card_pooling_is_a_one_line_error(tmp_path, card_name, fields, message):
    from evalsuite.tasks.cards import load_card

    with pytest.raises(EvalsuiteError, match=re.escape(message)) as error:
        load_card(str(_demo_card_with(tmp_path, card_name, **fields)))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("args, fragments", [
    (["--pooling", "max"], ["--pooling: unknown pooling 'max'", "cls, cls+mean_patch, mean_patch"]),
    (["--pooling", "cls", "--random-init"], ["--pooling cls: model 'efficientnet_lite0_imagenet' pools inside itself"]),
])
def test_bad_pooling_flag_is_a_one_line_error(tmp_path, args, fragments):
    from conftest import assert_one_line_error, run_cli

    result = run_cli("run", "--task", "demo", "--out", tmp_path, *args)
    assert_one_line_error(result, *fragments)
