"""Where a vision-language model's tokenizer file is, and what the text cache keys it by.

CONCH's and MUSK's tokenizers are files their authors ship beside the weights or inside their own packages; nothing
is downloaded here. A tokenizer is looked for in an environment variable the entry names (if any), next to the
`--weights` file, then inside the authors' installed package (found by its spec, never imported). The file is read
at the first prompt, so a run of image-only probes never needs it, and its hash is part of the text cache key: two
tokenizer files under one name never share cached prompt embeddings.
"""

import hashlib
import importlib.util
import os
from pathlib import Path

from evalsuite.errors import EvalsuiteError


def installed_package_files(package: str, package_dir: str, file_name: str) -> list[Path]:
    """Where an installed `package` would keep `file_name` (its spec is looked up, nothing imported)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        return []
    return [Path(p) / package_dir / file_name for p in found.submodule_search_locations]


class TokenizerFile:
    """Base of a file-backed tokenizer: subclasses say `read(path)` and how prompts become ids (`__call__`)."""

    def __init__(self, spec_tokenizer: str, file_name: str, package: str, package_dir: str, env: str | None = None,
                 other_names: tuple = ()):
        self.spec_tokenizer = spec_tokenizer  # the registry's description of the tokenizer
        self.file_name, self.package, self.package_dir, self.env = file_name, package, package_dir, env
        self.other_names = tuple(other_names)  # names the same file may have beside the weights (after file_name)
        self.beside: Path | None = None  # the --weights file's folder, set on load
        self._loaded = None

    def file(self) -> Path | None:
        """The tokenizer file: $env, else next to the --weights file (under file_name, then other_names), else in the
        installed package; None if none."""
        if self.env and os.environ.get(self.env):
            path = Path(os.environ[self.env]).expanduser()
            if not path.is_file():
                raise EvalsuiteError(f"{self.env}={path} is not a file; point it at {self.file_name}")
            return path
        candidates = [self.beside / name for name in (self.file_name, *self.other_names)] if self.beside else []
        candidates += installed_package_files(self.package, self.package_dir, self.file_name)
        return next((path for path in candidates if path.is_file()), None)

    @property
    def cache_id(self) -> str:
        """The tokenizer as the text cache keys it: its name and, where the file is found, the file's hash."""
        path = self.file()
        if path is None:
            return self.spec_tokenizer
        return f"{self.spec_tokenizer}; sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"

    def loaded(self):
        """The library tokenizer read from `file()`, once."""
        if self._loaded is None:
            self._loaded = self.read(self.file())
        return self._loaded

    def read(self, path: Path | None):
        raise NotImplementedError
