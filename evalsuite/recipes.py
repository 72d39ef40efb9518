"""Probe recipes: YAML files naming a probe implementation and its hyper-parameters."""

from dataclasses import dataclass
from pathlib import Path

import yaml

from evalsuite.errors import EvalsuiteError
from evalsuite.resources import recipes_dir, yaml_names


@dataclass(frozen=True)
class ProbeRecipe:
    name: str
    probe: str
    params: dict
    path: Path


def find_recipe(name: str) -> Path:
    if name.endswith((".yaml", ".yml")) or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise EvalsuiteError(f"probe recipe file not found: {path}; check the path")
        return path
    path = recipes_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(yaml_names(recipes_dir())) or "none"
        raise EvalsuiteError(f"unknown probe '{name}'; known probes: {known} (or pass a path to a recipe .yaml)")
    return path


def load_recipe(name: str) -> ProbeRecipe:
    from evalsuite.probes import PROBES

    path = find_recipe(name)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise EvalsuiteError(f"probe recipe {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not isinstance(raw.get("probe"), str):
        raise EvalsuiteError(f"probe recipe {path}: needs string fields 'name' and 'probe'")
    if raw["probe"] not in PROBES:
        raise EvalsuiteError(f"probe recipe {path}: probe '{raw['probe']}' is not one of {', '.join(PROBES)}")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise EvalsuiteError(f"probe recipe {path}: field 'params' must be a mapping")
    return ProbeRecipe(name=raw["name"], probe=raw["probe"], params=params, path=path.resolve())
