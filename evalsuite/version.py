"""evalsuite's version, in a module of its own that imports nothing: the package root re-exports it, and the run
record (runtime/versions.py) and the download client's User-Agent read it without importing the root, which names
the pandas API of the read side (reporting/views/frames.py)."""

__version__ = "0.1.0"  # as pyproject.toml's version
