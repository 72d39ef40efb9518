"""Per-item test predictions of a run, `<out>/runs/<run_id>.predictions.npz`, for paired tests between models.

What `evalsuite leaderboard --compare` and the rank intervals need beyond the leaderboard's summary numbers:
- `labels`: int64 [N], the test labels in dataset order (two runs share test items when these, the clusters and,
  where both files have them, the item ids are identical);
- `clusters` (optional): the bootstrap's cluster id of each item (patient, slide, image), as integers where the
  reader gave integers (else strings: integers as strings would sort, and so number the clusters of the shared
  draws, otherwise than the run's own interval did), and
  `cluster_unit` naming what they are;
- `item_ids` (optional): uint64 [N], each test item's identity as the reader names it (a path relative to the data
  root, an array row, a tile origin, a slide or patient id: readers/item_identity.py), hashed (`item_hashes`), so
  two runs pair only on the same items in the same order and no path is written; absent from older files;
- one float32 [N, C] test probability matrix per probe result, keyed `"<probe>/seed<seed>"`; stored as
  `proba_0`, `proba_1`, ... with the keys in `proba_keys`, so no pickle is needed to read the file;
- segmentation runs instead: one int64 [N, C, C] per-image confusion count array per probe result
  (`confusion_0`, ... keyed by `confusion_keys`, rows = truth), the card's `class_names`, and as `labels`
  int64 [N, C] each test image's labelled pixels per class (the counts' row sums), which stand for the masks
  when two runs are checked for the same test items;
- regression runs instead: one float32 [N, T] array of predicted targets per probe result (`prediction_0`, ...
  keyed by `prediction_keys`), and as `labels` float32 [N, T] the test targets.
A run without the file says why (`NoPredictions.why`): made before evalsuite stored them (a rerun stores them), or
a run that stores none (survival; a cross-validated task, whose score is a mean over folds of other test items).
The file is written beside the run JSON through a temp file and a rename: it is whole or absent.
"""

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.results.run_json import RUNS_FOLDER
from evalsuite.storage.fsio import fs_errors, fsync_dir, staged, write_durably

PREDICTIONS_SUFFIX = ".predictions.npz"
class NoPredictions(EvalsuiteError):
    """The run stored no test predictions (older than them, or a task kind or probe that stores none), unlike a
    stored file that cannot be read: a column statistic says "not stored" for this one and "damaged" for that."""

    def __init__(self, message: str, why: str = ""):
        super().__init__(message)
        self.why = why  # short: what a column note or a skipped --compare task says


_RERUN = "rerun it (`evalsuite show RUN_ID` prints its command) to store test predictions"
_FOLDED = ("a cross-validated task's score is a mean over folds, each fold scored on other test items: no per-item "
           "predictions are stored for it, and a rerun stores none either")


@dataclass(frozen=True)
class Predictions:
    path: Path
    labels: np.ndarray  # int64 [N]
    clusters: np.ndarray | None  # int64 or str [N], or None: each item its own cluster
    cluster_unit: str
    probas: dict  # "probe/seed<seed>" -> float32 [N, C]
    confusions: dict = field(default_factory=dict)  # "probe/seed<seed>" -> int64 [N, C, C] (segmentation)
    class_names: list | None = None
    predictions: dict = field(default_factory=dict)  # "probe/seed<seed>" -> float32 [N, T] (regression)
    item_ids: np.ndarray | None = None  # uint64 [N] (`item_hashes`), or None: a file from before ids were stored


def prediction_key(probe: str, seed: int) -> str:
    return f"{probe}/seed{seed}"


def item_hashes(identities) -> np.ndarray:
    """uint64 [N]: the first 8 bytes of each identity string's SHA-256, a fixed width whatever the path's length (two
    of a million items share one with odds about 3e-8)."""
    return np.array([int.from_bytes(hashlib.sha256(str(identity).encode()).digest()[:8], "big")
                     for identity in identities], dtype=np.uint64)


def predictions_path(out_dir: Path, run_id: str) -> Path:
    return Path(out_dir) / RUNS_FOLDER / f"{run_id}{PREDICTIONS_SUFFIX}"


def save_predictions(out_dir: Path, run_id: str, labels, clusters, probas: dict, unit: str = "tile",
                     confusions: dict | None = None, class_names=None, predictions: dict | None = None,
                     item_ids=None) -> Path:
    """Write the run's test predictions atomically; `clusters`: one id per item or None; `confusions`: per-image
    confusion counts (segmentation), whose row sums are stored as `labels` when `labels` is None; `predictions`:
    predicted targets [N, T] (regression), `labels` then the targets [N, T]; `item_ids`: the reader's identity
    string of each item (stored hashed) or None; returns the path."""
    path = predictions_path(out_dir, run_id)
    confusions = {key: np.asarray(counts, dtype=np.int64) for key, counts in (confusions or {}).items()}
    predictions = predictions or {}
    if labels is None:
        labels = next(iter(confusions.values())).sum(axis=2)
    labels = np.asarray(labels, dtype=np.float32 if predictions else np.int64)
    labels = labels.reshape(-1) if labels.ndim < 2 and not predictions else labels.reshape(len(labels), -1)
    arrays = {"labels": labels, "cluster_unit": np.array(unit), "proba_keys": np.array(sorted(probas), dtype=str),
              "confusion_keys": np.array(sorted(confusions), dtype=str)}
    if predictions:  # only in a regression run's file: older readers see a file of the same layout
        arrays["prediction_keys"] = np.array(sorted(predictions), dtype=str)
    for index, key in enumerate(arrays.get("prediction_keys", [])):
        predicted = np.asarray(predictions[key], dtype=np.float32).reshape(len(labels), -1)
        if predicted.shape != labels.shape:
            raise ValueError(f"predictions '{key}' have shape {predicted.shape}, not {labels.shape} as the targets")
        arrays[f"prediction_{index}"] = predicted
    if class_names:
        arrays["class_names"] = np.array(class_names, dtype=str)
    if clusters is not None:
        ids = np.asarray(clusters)
        arrays["clusters"] = (ids.astype(np.int64) if np.issubdtype(ids.dtype, np.integer) else ids.astype(str)) \
            .reshape(-1)
        if len(arrays["clusters"]) != len(labels):
            raise ValueError(f"{len(arrays['clusters'])} cluster ids for {len(labels)} test items")
    if item_ids is not None:
        arrays["item_ids"] = item_hashes(item_ids)
        if len(arrays["item_ids"]) != len(labels):
            raise ValueError(f"{len(arrays['item_ids'])} item ids for {len(labels)} test items")
    for index, key in enumerate(arrays["proba_keys"]):
        proba = np.asarray(probas[key], dtype=np.float32)
        if proba.ndim != 2 or len(proba) != len(labels):
            raise ValueError(f"probabilities '{key}' have shape {proba.shape}, not ({len(labels)}, classes)")
        arrays[f"proba_{index}"] = proba
    for index, key in enumerate(arrays["confusion_keys"]):
        counts = confusions[key]
        if counts.ndim != 3 or len(counts) != len(labels) or counts.shape[1] != counts.shape[2]:
            raise ValueError(f"confusion counts '{key}' have shape {counts.shape}, not ({len(labels)}, C, C)")
        arrays[f"confusion_{index}"] = counts
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with fs_errors("write predictions", path):
        path.parent.mkdir(parents=True, exist_ok=True)
    with staged(path, "write predictions") as staging:
        with fs_errors("write predictions", path):
            write_durably(staging, buffer.getvalue())
    with fs_errors("write predictions", path):
        fsync_dir(path.parent)
    return path


def load_predictions(out_dir: Path, run_id: str) -> Predictions:
    """The run's stored test predictions; a missing or damaged file is a one-line error naming it and the fix."""
    path = predictions_path(out_dir, run_id)
    if not path.is_file():
        why = _FOLDED if _cross_validated(out_dir, run_id) else \
            f"made before they were stored, or a survival run, which stores none; {_RERUN}"
        raise NoPredictions(f"run {run_id} has no test predictions ({path} is missing): {why}", why)
    try:
        # Opened here: np.load leaves its own file handle open when the archive is damaged.
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as stored:
            keys = [str(k) for k in stored["proba_keys"]]
            labels = stored["labels"]
            labels = labels if np.issubdtype(labels.dtype, np.floating) else labels.astype(np.int64)
            predicted = [str(k) for k in stored["prediction_keys"]] if "prediction_keys" in stored.files else []
            predictions = {key: stored[f"prediction_{i}"] for i, key in enumerate(predicted)}
            probas = {key: stored[f"proba_{i}"] for i, key in enumerate(keys)}
            clusters = stored["clusters"] if "clusters" in stored.files else None
            unit = str(stored["cluster_unit"])
            counted = [str(k) for k in stored["confusion_keys"]] if "confusion_keys" in stored.files else []
            confusions = {key: stored[f"confusion_{i}"].astype(np.int64) for i, key in enumerate(counted)}
            class_names = [str(c) for c in stored["class_names"]] if "class_names" in stored.files else None
            item_ids = stored["item_ids"].astype(np.uint64) if "item_ids" in stored.files else None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split())  # one line, whatever the library's message
        raise EvalsuiteError(f"cannot read predictions {path}: {type(exc).__name__} ({reason}); the file is damaged: "
                             f"delete it and {_RERUN}") from None
    if any(p.ndim != 2 or len(p) != len(labels) for p in probas.values()) or \
            any(c.ndim != 3 or len(c) != len(labels) for c in confusions.values()) or \
            any(p.shape != labels.shape for p in predictions.values()) or \
            (item_ids is not None and item_ids.shape != (len(labels),)):
        raise EvalsuiteError(f"predictions {path} do not match its {len(labels)} labels; the file is damaged: "
                             f"delete it and {_RERUN}")
    return Predictions(path=path, labels=labels, clusters=clusters, cluster_unit=unit, probas=probas,
                       confusions=confusions, class_names=class_names, predictions=predictions, item_ids=item_ids)


def _cross_validated(out_dir: Path, run_id: str) -> bool:
    """Whether the run JSON lists folds (a run not yet readable counts as not: the generic reason is then given)."""
    try:
        return bool(json.loads(predictions_path(out_dir, run_id).with_name(f"{run_id}.json").read_text()).get("folds"))
    except (OSError, ValueError, AttributeError):
        return False
