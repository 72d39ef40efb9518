"""Reading local checkpoints and fitting them onto a module, with clear key errors.

`--weights` takes a file (`.safetensors` preferred; `.pth`/`.bin`/`.pt`/`.torch` read with
`torch.load(weights_only=True)`, so no pickled code runs) or a downloaded model folder, in
which the safetensors file wins over a PyTorch one and sharded checkpoints are joined.
"""

import hashlib
import json
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError

_WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "teacher")
_MAX_KEYS_SHOWN = 5
# In a model folder, the first of these that exists is the checkpoint.
_FOLDER_PREFERENCE = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                      "pytorch_model.bin.index.json")
_TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".torch")


def file_sha256(path: Path, chunk_bytes: int = 1 << 24) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def weights_files(path: Path) -> list[Path]:
    """The checkpoint file(s) `--weights` names: the file itself, or the one a model folder holds."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = _checkpoint_in_folder(path)
    if not path.is_file():
        raise EvalsuiteError(f"weights file not found: {path}; check --weights")
    if path.name.endswith(".index.json"):
        return _shards(path)
    return [path]


def weights_sha256(files: list[Path]) -> str:
    """Content hash of a checkpoint; for shards, the hash of the shards' hashes in order."""
    if len(files) == 1:
        return file_sha256(files[0])
    return hashlib.sha256("".join(file_sha256(f) for f in files).encode()).hexdigest()


def state_sha256(model: torch.nn.Module) -> str:
    """Content hash of a loaded model's weights (names, dtypes, shapes, bytes), for weights that
    arrive through timm's hub loader rather than as a file we can hash."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())  # the bytes, without a copy
    return digest.hexdigest()


def read_state_dict(path: Path) -> dict:
    """All tensors of the checkpoint at `path` (file or folder), wrappers and `module.` removed."""
    state = {}
    for file in weights_files(path):
        state.update(_read_file(file))
    return state


def load_key_for_key(model: torch.nn.Module, weights: str | Path, prepare=None) -> tuple[str, Path]:
    """Fill `model` from a local file or folder, every key checked (`prepare(state)` first renames or drops what the
    published file holds in another layout or does not use); returns (weights id, the folder the file is in, where a
    model's tokenizer files sit beside it)."""
    path = Path(weights).expanduser()
    files = weights_files(path)
    state = read_state_dict(path)
    state = prepare(state) if prepare else state
    model.load_state_dict(matched_state_dict(model, state, files[0]), strict=True)
    return f"sha256:{weights_sha256(files)}", files[0].parent


def seeded(build, seed: int):
    """`build()` with torch's CPU generator seeded by `seed` and restored after: random weights that depend on the
    seed alone, not on what the process drew before."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def matched_state_dict(model, state: dict, path: Path) -> dict:
    """`state` without the classification head, after checking it fits `model` key for key."""
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
    _check_dtypes(state, expected, path)
    return state


def _check_dtypes(state: dict, expected: dict, path: Path) -> None:
    """Float weights may come in any float precision (they are cast); an integer or bool tensor where the
    model holds floats (or the reverse) is a broken or quantised checkpoint, not something to cast."""
    for key in (k for k in expected if k in state):  # in the model's order: "first" means the same in every format
        tensor, wanted = state[key], expected[key].dtype
        if tensor.is_floating_point() != wanted.is_floating_point or tensor.is_complex():
            raise EvalsuiteError(f"weights {path}: tensor '{key}' is {str(tensor.dtype).removeprefix('torch.')} but "
                                 f"the model holds {str(wanted).removeprefix('torch.')}; save a floating-point "
                                 "(float32/float16/bfloat16) state dict, not a quantised or converted one")


def in_order_state_dict(model, state: dict, path: Path) -> dict:
    """For checkpoints from another implementation that stores the same tensors in the same order."""
    head = _classifier_prefixes(model)
    source = [v for k, v in state.items() if not k.startswith(("_fc.", "fc.", "classifier."))]
    target = {k: v for k, v in model.state_dict().items() if not (head and k.startswith(head))}
    if len(source) != len(target) or any(s.shape != t.shape for s, t in zip(source, target.values())):
        raise EvalsuiteError(
            f"weights {path} do not map in order onto {type(model).__name__} "
            f"({len(source)} tensors vs {len(target)}); the package may have changed"
        )
    return dict(zip(target, source))


def assign_weights(model, state: dict) -> None:
    """Load a checked state dict into `model`, which may live on the meta device (no second copy in memory).

    Floating tensors are cast to the module's dtype: `assign` would otherwise keep a float16
    checkpoint in float16.
    """
    current = model.state_dict()
    state = {k: v.to(current[k].dtype) if v.is_floating_point() else v for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    _init_computed_buffers(model)
    left_on_meta = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left_on_meta:
        raise EvalsuiteError(f"{type(model).__name__} has tensors no checkpoint fills: {_describe(left_on_meta)}")


def _read_file(path: Path) -> dict:
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


def _checkpoint_in_folder(folder: Path) -> Path:
    for name in _FOLDER_PREFERENCE:
        if (folder / name).is_file():
            return folder / name
    candidates = sorted(folder.glob("*.safetensors")) or sorted(p for p in folder.iterdir() if p.suffix in _TORCH_SUFFIXES)
    if len(candidates) != 1:
        found = ", ".join(p.name for p in candidates) or "none"
        raise EvalsuiteError(f"--weights folder {folder} must hold one checkpoint (model.safetensors preferred); "
                             f"found: {found}; pass the file itself")
    return candidates[0]


def _shards(index_path: Path) -> list[Path]:
    try:
        weight_map = json.loads(index_path.read_text())["weight_map"]
    except (OSError, ValueError, KeyError, TypeError):
        raise EvalsuiteError(f"{index_path} is not a sharded-checkpoint index (no weight_map)") from None
    shards = [index_path.parent / name for name in dict.fromkeys(weight_map.values())]
    missing = [p.name for p in shards if not p.is_file()]
    if missing:
        raise EvalsuiteError(f"checkpoint shards missing next to {index_path.name}: {', '.join(missing)}")
    return shards


def _classifier_prefixes(model) -> tuple:
    classifier = getattr(model, "pretrained_cfg", {}).get("classifier") or ()
    names = (classifier,) if isinstance(classifier, str) else tuple(classifier)
    return tuple(f"{name}." for name in names)


def _describe(keys: list) -> str:
    shown = ", ".join(keys[:_MAX_KEYS_SHOWN])
    more = f" (+{len(keys) - _MAX_KEYS_SHOWN} more)" if len(keys) > _MAX_KEYS_SHOWN else ""
    return f"{len(keys)} [{shown}{more}]"


def _init_computed_buffers(model) -> None:
    """Buffers a module computes from its configuration (timm's RoPE periods in Eva/DINOv3) are in no checkpoint:
    on a meta-device module they are rebuilt on the CPU by the module's own initialiser."""
    for module in model.modules():
        on_meta = [name for name, buffer in module.named_buffers(recurse=False)
                   if buffer is not None and buffer.is_meta]
        if on_meta and hasattr(module, "init_non_persistent_buffers"):
            for name in on_meta:
                buffer = module._buffers[name]
                module._buffers[name] = torch.empty(buffer.shape, dtype=buffer.dtype, device="cpu")
            module.init_non_persistent_buffers()
