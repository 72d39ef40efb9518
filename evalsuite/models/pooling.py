"""From a ViT's token sequence to the embeddings probes use: pooled vectors and patch grids.

A timm ViT's `forward_features` returns [batch, prefix + patches, width]: the class token,
then the register tokens (if any), then one token per patch in row-major order. Register
tokens see no image location of their own and the model cards that average patches leave
them out, so every rule drops the whole prefix before touching patch tokens.

torch is imported inside the functions: the registry imports the rule names, and
`evalsuite list` should not pay for loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsuite.errors import EvalsuiteError

if TYPE_CHECKING:
    import torch

CLS = "cls"
CLS_MEAN_PATCH = "cls+mean_patch"  # class token concatenated with the mean patch token
MEAN_PATCH = "mean_patch"
TIMM_HEAD = "timm_head"  # the model's own pooling (timm num_classes=0 output), for CNNs and plain timm names

# How many token widths each rule's embedding spans.
_WIDTHS_PER_RULE = {CLS: 1, CLS_MEAN_PATCH: 2, MEAN_PATCH: 1, TIMM_HEAD: 1}
POOLING_RULES = tuple(_WIDTHS_PER_RULE)
# Rules a run may choose for a token model instead of its registry default (`--pooling`, a task
# card's `pooling:`): eva's leaderboard pools the class token where the model cards of Virchow2,
# H0-mini and Midnight concatenate it with the mean patch token.
TOKEN_POOLING_RULES = (CLS, CLS_MEAN_PATCH, MEAN_PATCH)

PATCH_TOKENS = "patch_tokens"  # dense rule for ViTs: patch tokens on their grid, prefix dropped
FEATURE_MAP = "feature_map"  # dense rule for CNNs: the last feature map
DENSE_RULES = (PATCH_TOKENS, FEATURE_MAP)


def pooled_dim(rule: str, token_dim: int) -> int:
    """Size of the embedding `rule` makes from tokens of width `token_dim`."""
    _check_rule(rule)
    return _WIDTHS_PER_RULE[rule] * token_dim


def check_token_rule(rule: str, where: str) -> str:
    """`rule` if a run may choose it for a token model, else a one-line error naming `where` it came from."""
    if rule not in TOKEN_POOLING_RULES:
        raise EvalsuiteError(f"{where}: unknown pooling '{rule}'; use one of {', '.join(TOKEN_POOLING_RULES)}")
    return rule


def pool_tokens(tokens: torch.Tensor, rule: str, num_prefix_tokens: int) -> torch.Tensor:
    """[batch, embedding] from [batch, prefix + patches, width] by a pooling rule."""
    _check_rule(rule)
    if rule == TIMM_HEAD:
        raise EvalsuiteError("pooling rule 'timm_head' pools inside the model; call the model, not pool_tokens")
    if rule in (CLS, CLS_MEAN_PATCH) and num_prefix_tokens < 1:
        raise EvalsuiteError(f"pooling rule '{rule}' needs a class token, but the model has no prefix tokens")
    if rule == CLS:
        _check_tokens(tokens, num_prefix_tokens)
        return tokens[:, 0]
    patches = patch_tokens(tokens, num_prefix_tokens)
    if rule == MEAN_PATCH:
        return patches.mean(dim=1)
    import torch

    return torch.cat([tokens[:, 0], patches.mean(dim=1)], dim=-1)


def patch_tokens(tokens: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """[batch, patches, width]: the tokens after the class and register tokens."""
    _check_tokens(tokens, num_prefix_tokens)
    return tokens[:, num_prefix_tokens:]


def patch_grid(tokens: torch.Tensor, num_prefix_tokens: int, grid_hw: tuple[int, int]) -> torch.Tensor:
    """[batch, grid_h, grid_w, width]: patch tokens laid back on the image grid (row-major)."""
    patches = patch_tokens(tokens, num_prefix_tokens)
    grid_h, grid_w = grid_hw
    if patches.shape[1] != grid_h * grid_w:
        raise EvalsuiteError(
            f"{patches.shape[1]} patch tokens do not fill a {grid_h}x{grid_w} grid; "
            "check the model's patch size and number of register tokens"
        )
    return patches.reshape(patches.shape[0], grid_h, grid_w, patches.shape[2])


def token_grid(image_hw: tuple[int, int], patch_size_px: int) -> tuple[int, int]:
    """Patch grid (rows, columns) a ViT makes of an image; the image must be a whole number of patches."""
    height_px, width_px = image_hw
    if height_px % patch_size_px or width_px % patch_size_px:
        raise EvalsuiteError(
            f"image {height_px}x{width_px} px is not a whole number of {patch_size_px} px patches; "
            "resize tiles to the model's input size"
        )
    return height_px // patch_size_px, width_px // patch_size_px


def _check_rule(rule: str) -> None:
    if rule not in _WIDTHS_PER_RULE:
        raise EvalsuiteError(f"unknown pooling rule '{rule}'; use one of {', '.join(POOLING_RULES)}")


def _check_tokens(tokens: torch.Tensor, num_prefix_tokens: int) -> None:
    if tokens.ndim != 3:
        raise EvalsuiteError(f"expected tokens [batch, tokens, width], got shape {tuple(tokens.shape)}")
    if tokens.shape[1] <= num_prefix_tokens:
        raise EvalsuiteError(
            f"{tokens.shape[1]} tokens leave no patch tokens after {num_prefix_tokens} class/register tokens"
        )
