"""The library versions and source revision a cache manifest and a run JSON record."""

import functools
import importlib.metadata
import platform
import subprocess
from pathlib import Path

from evalsuite.version import __version__


def library_versions() -> dict:
    import numpy
    import timm
    import torch

    return {"evalsuite": __version__, "evalsuite_git": _source_revision(Path(__file__).resolve().parents[1]),
            "python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "timm": timm.__version__, "numpy": numpy.__version__, "scikit-learn": _installed("scikit-learn")}


def _installed(distribution: str) -> str | None:
    """A package's installed version without importing it (importing scikit-learn takes a second)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache  # two git calls per cache manifest and run JSON otherwise; the code does not change mid-run
def _source_revision(package_dir: Path) -> str | None:
    """The git commit of a source checkout (editable install), '+dirty' if tracked files differ; None for a wheel.

    The package version alone does not pin the code between releases.
    """
    checkout = package_dir.resolve().parent
    if not (checkout / ".git").exists():
        return None
    try:
        commit = _git(checkout, "rev-parse", "HEAD")
        dirty = _git(checkout, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()
