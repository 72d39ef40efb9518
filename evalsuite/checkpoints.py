"""Reading local checkpoints and fitting them onto a timm module with clear key errors."""

import hashlib
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError

_WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "teacher")
_MAX_KEYS_SHOWN = 5


def file_sha256(path: Path, chunk_bytes: int = 1 << 24) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def read_state_dict(path: Path) -> dict:
    """safetensors when the file is one; otherwise torch.load with weights_only (no pickled code)."""
    if not path.is_file():
        raise EvalsuiteError(f"weights file not found: {path}; check --weights")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any reader failure means the same thing to the user
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EvalsuiteError(f"cannot read weights {path}: {reason}; pass a .safetensors, .pth or .bin state dict") from None
    for key in _WRAPPER_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise EvalsuiteError(f"weights {path} is not a state dict of tensors; save model.state_dict()")
    return {k.removeprefix("module."): v for k, v in state.items()}


def _classifier_prefixes(model) -> tuple:
    classifier = getattr(model, "pretrained_cfg", {}).get("classifier") or ()
    names = (classifier,) if isinstance(classifier, str) else tuple(classifier)
    return tuple(f"{name}." for name in names)


def _describe(keys: list) -> str:
    shown = ", ".join(keys[:_MAX_KEYS_SHOWN])
    more = f" (+{len(keys) - _MAX_KEYS_SHOWN} more)" if len(keys) > _MAX_KEYS_SHOWN else ""
    return f"{len(keys)} [{shown}{more}]"


def load_matching(model, state: dict, path: Path) -> None:
    """Strict load, ignoring the classification head (features are taken before it)."""
    head = _classifier_prefixes(model)
    state = {k: v for k, v in state.items() if not (head and k.startswith(head))}
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong_shape = [k for k in state if k in expected and state[k].shape != expected[k].shape]
    if missing or unexpected or wrong_shape:
        raise EvalsuiteError(
            f"weights {path} do not fit {type(model).__name__}: missing keys {_describe(missing)}, "
            f"unexpected keys {_describe(unexpected)}, wrong shapes {_describe(wrong_shape)}; "
            "check --model matches the checkpoint's architecture"
        )
    model.load_state_dict(state, strict=True)


def load_in_order(model, state: dict, path: Path) -> None:
    """For checkpoints from another implementation that stores the same tensors in the same order."""
    head = _classifier_prefixes(model)
    source = [v for k, v in state.items() if not k.startswith(("_fc.", "fc.", "classifier."))]
    target_keys = [k for k in model.state_dict() if not (head and k.startswith(head))]
    target = model.state_dict()
    if len(source) != len(target_keys) or any(s.shape != target[k].shape for s, k in zip(source, target_keys)):
        raise EvalsuiteError(
            f"weights {path} do not map in order onto {type(model).__name__} "
            f"({len(source)} tensors vs {len(target_keys)}); the package may have changed"
        )
    model.load_state_dict(dict(zip(target_keys, source)), strict=True)
