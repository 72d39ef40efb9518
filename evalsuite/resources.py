"""Where task cards, probe recipes and shipped data live, in a checkout and in a wheel.

In the wheel the top-level `datasets/` and `probes/` folders are packaged as
`evalsuite/cards` and `evalsuite/recipes`; in a source checkout (also an editable
install) they are read from the repository root.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_DIR = PACKAGE_DIR.parent


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def cards_dir() -> Path:
    return _first_existing(PACKAGE_DIR / "cards", _REPO_DIR / "datasets")


def recipes_dir() -> Path:
    return _first_existing(PACKAGE_DIR / "recipes", _REPO_DIR / "probes")


def shipped_data_dir() -> Path:
    return PACKAGE_DIR / "data"


def yaml_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))
