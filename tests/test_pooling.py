"""Pooling rules on crafted token tensors: which tokens each rule reads, and which it must skip."""

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.pooling import (CLS, CLS_MEAN_PATCH, MEAN_PATCH, TIMM_HEAD, patch_grid, pool_tokens, pooled_dim,
                               token_grid)

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
