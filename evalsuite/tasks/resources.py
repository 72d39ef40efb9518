"""Where task cards, probe recipes and shipped data live, in a checkout and in a wheel.

In the wheel the top-level `datasets/` and `probes/` folders are packaged as
`evalsuite/cards` and `evalsuite/recipes`; in a source checkout (also an editable
install) they are read from the repository root.
"""

import hashlib
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.yaml_files import parse_yaml

PACKAGE_DIR = Path(__file__).resolve().parent.parent
_REPO_DIR = PACKAGE_DIR.parent


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        try:
            if candidate.is_dir():
                return candidate
        except PermissionError:  # a folder on the way this user may not enter: try the next place
            continue
    return candidates[0]


def cards_dir() -> Path:
    return _first_existing(PACKAGE_DIR / "cards", _REPO_DIR / "datasets")


def recipes_dir() -> Path:
    return _first_existing(PACKAGE_DIR / "recipes", _REPO_DIR / "probes")


def shipped_data_dir() -> Path:
    return PACKAGE_DIR / "data"


def yaml_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def find_yaml(name: str, folder: Path, kind: str, noun: str) -> Path:
    """A shipped YAML by name (`demo`), or any file by path (`my/card.yaml`), with errors naming the fix.

    kind/noun word the messages: ("task card", "task"), ("probe recipe", "probe").
    """
    if name.endswith((".yaml", ".yml")) or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise EvalsuiteError(f"{kind} file not found: {path}; check the path")
        return path
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(yaml_names(folder)) or "none"
        raise EvalsuiteError(f"unknown {noun} '{name}'; known {noun}s: {known} (or pass a path to a {kind} .yaml)")
    return path


def read_yaml_mapping(path: Path, kind: str) -> tuple[dict, str]:
    """(the YAML file's top-level mapping, sha256 of its bytes); `kind` ("task card") words the errors.

    Results record the hash, so a run names the exact card or recipe it came from."""
    raw_bytes = path.read_bytes()
    raw = parse_yaml(raw_bytes, path, kind)
    if not isinstance(raw, dict):
        raise EvalsuiteError(f"{kind} {path}: expected a mapping of fields at the top level")
    return raw, hashlib.sha256(raw_bytes).hexdigest()
