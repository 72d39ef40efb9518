"""Robustness of frozen embeddings: how far a tile's embedding moves under a transformation of the tile.

`perturbations` holds the transformations (torchvision v2 ops, HED stain jitter by hand), `invariance`
the evaluation behind `evalsuite robustness` (docs/robustness.md). The names below are importable
without torch so the CLI checks --transforms before the heavy imports.
"""

from evalsuite.errors import EvalsuiteError

# `all` means these, in this order (the printed table's order too).
DEFAULT_TRANSFORMS = ("hed", "blur", "jpeg", "rotflip", "scale")
# `identity` re-embeds the unchanged tile: a check of the pipeline (cosine 1, drop 0), not a robustness score.
TRANSFORM_NAMES = DEFAULT_TRANSFORMS + ("identity",)


def parse_transforms(text: str) -> list[str]:
    """`hed,blur` -> ["hed", "blur"]; `all` -> every default transformation. Unknown names are one error line."""
    names = [part.strip() for part in str(text).split(",") if part.strip()]
    if not names:
        raise EvalsuiteError(f"--transforms needs names such as {','.join(DEFAULT_TRANSFORMS)} or all, got '{text}'")
    # `all` may be combined with extras, e.g. all,identity
    names = [expanded for name in names for expanded in (DEFAULT_TRANSFORMS if name == "all" else (name,))]
    unknown = [name for name in names if name not in TRANSFORM_NAMES]
    if unknown:
        raise EvalsuiteError(f"--transforms: unknown transformation '{unknown[0]}'; known: "
                             f"{', '.join(TRANSFORM_NAMES)} or all")
    if len(set(names)) != len(names):
        raise EvalsuiteError(f"--transforms names a transformation twice: '{text}'")
    return names


def check_task_kind(card) -> None:
    """Tile classification only (one pooled embedding per image, a class label): a segmentation or slide task has
    no single embedding per transformable tile."""
    from evalsuite.tasks.kinds import KINDS  # here: parse_transforms stays free of scikit-learn

    kind = KINDS[card.kind]
    if kind.dense or kind.bags or kind.target != "class":
        raise EvalsuiteError(f"task '{card.name}' is a {card.kind} task; evalsuite robustness measures tile "
                             "classification tasks only")
