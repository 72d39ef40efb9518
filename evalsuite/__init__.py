"""evalsuite: frozen-backbone probe evaluation for pathology foundation models.

Flow: task card -> dataset reader -> frozen backbone -> float16 feature cache -> probe
-> metrics -> results JSON + leaderboard CSV.

Results in Python (docs/outputs.md): `evalsuite.load_leaderboard(out)` gives the long leaderboard as a typed pandas
DataFrame, `evalsuite.load_wide(out, metric=...)` the table `evalsuite leaderboard` shows; a bad folder or file
raises `evalsuite.EvalsuiteError` with a one-line message saying what to do.
"""

from typing import TYPE_CHECKING

from evalsuite.version import __version__

__all__ = ["EvalsuiteError", "__version__", "load_leaderboard", "load_wide"]
# Loaded on first use (PEP 562): `import evalsuite` runs before every command and job, and must not pull in pandas.
_LAZY = {"load_leaderboard": "evalsuite.reporting.views.frames", "load_wide": "evalsuite.reporting.views.frames",
         "EvalsuiteError": "evalsuite.errors"}

if TYPE_CHECKING:  # for editors and type checkers, which do not run __getattr__
    from evalsuite.errors import EvalsuiteError
    from evalsuite.reporting.views.frames import load_leaderboard, load_wide


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'evalsuite' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
