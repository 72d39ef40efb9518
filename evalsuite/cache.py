"""On-disk float16 feature caches, one folder per cache key.

A cache folder holds `features.npy` (float16, [N, D]), `labels.npy` (int64, [N]) and
`meta.json` (key fields, shape, dtype, versions). It is written in a temporary folder and
renamed into place, so a reader sees a whole cache or none, and a killed writer leaves no
half-cache behind under the real key.
"""

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError

CACHE_DTYPE = np.float16
FEATURES_FILE = "features.npy"
LABELS_FILE = "labels.npy"
META_FILE = "meta.json"


def cache_key(fields: dict) -> str:
    """A stable hash of everything that changes the cached numbers."""
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


class FeatureCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        return self.root / key

    def load(self, key: str):
        """(features memory-mapped read-only, labels) or None when the key is not cached."""
        folder = self.folder(key)
        if not (folder / META_FILE).is_file():
            return None
        try:
            features = np.load(folder / FEATURES_FILE, mmap_mode="r")
            labels = np.load(folder / LABELS_FILE)
        except (OSError, ValueError) as exc:
            raise EvalsuiteError(f"feature cache {folder} is unreadable ({exc}); delete that folder and rerun") from None
        if features.dtype != CACHE_DTYPE or features.ndim != 2 or len(features) != len(labels):
            raise EvalsuiteError(
                f"feature cache {folder} has features {features.dtype}{features.shape} for {len(labels)} labels; "
                "delete that folder and rerun"
            )
        return features, labels

    def save(self, key: str, features: np.ndarray, labels: np.ndarray, meta: dict) -> Path:
        if features.dtype != CACHE_DTYPE:
            raise TypeError(f"cache features must be {np.dtype(CACHE_DTYPE).name}, got {features.dtype}")
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.folder(key)
        staging = self.root / f".{key}.{uuid.uuid4().hex}.tmp"
        staging.mkdir()
        try:
            np.save(staging / FEATURES_FILE, features)
            np.save(staging / LABELS_FILE, labels.astype(np.int64, copy=False))
            meta = {**meta, "shape": list(features.shape), "dtype": np.dtype(CACHE_DTYPE).name}
            (staging / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
            _fsync_folder_files(staging)
            try:
                os.rename(staging, final)
            except OSError:
                # Another process finished the same key first; its cache is identical.
                if not (final / META_FILE).is_file():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final


def _fsync_folder_files(folder: Path) -> None:
    for path in folder.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
