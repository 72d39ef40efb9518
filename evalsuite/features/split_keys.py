"""Each split's cache key and dataset for a run: what identifies a split's features (model, weights, transform,
card, data, labels, precision), and which splits a run extracts (with the split an aliased one stands for)."""

import hashlib

import numpy as np

from evalsuite.features.cache import cache_key
from evalsuite.features.slide_features import slide_dataset, slide_key_fields, slide_layout
from evalsuite.models.transforms import describe_transform
from evalsuite.readers import resolve_data_root
from evalsuite.tasks.cards import dense_layers
from evalsuite.tasks.kinds import KINDS

SPLITS = ("train", "val", "test")


def key_fields(config, card, reader, backbone, split: str, precision: str) -> dict:
    slides = slide_key_fields(config, card, reader, split) if KINDS[card.kind].bags else {}
    return {**slides,
        "model": backbone.name, "weights_id": backbone.weights_id,
        "transform": describe_transform(backbone.data_config), "card": card.name, "card_sha256": card.features_sha256,
        "data_root": str(resolve_data_root(card, config.data_root).resolve()), "split": split,
        "feature": KINDS[card.kind].feature, "dtype": "float16", "precision": precision,
        **({"layers": list(dense_layers(card))} if KINDS[card.kind].dense else {}),
        **({"pooling": backbone.pooling} if not KINDS[card.kind].dense else {}),
        # Only where set, so every other cache keeps its key; a VLM's cache of encode_image is not served for it.
        **({"probe_features": backbone.probe_features} if backbone.probe_features else {}),
    }


def labels_identity(dataset) -> dict:
    """The class ids a split caches, as part of its key: a corrected label file gives a new cache, not the old labels.

    Segmentation masks (datasets with a `label_shape`) are left out: hashing them would read every mask on every
    cached run. Slide caches store no targets (the reader's are read on every run)."""
    if getattr(dataset, "label_shape", ()):
        return {}
    labels = np.asarray(dataset.labels)
    # Regression targets hash as float64 (casting them to integers would give two target sets one key).
    labels = np.ascontiguousarray(labels, dtype=np.float64 if np.issubdtype(labels.dtype, np.floating) else np.int64)
    return {"labels_sha256": hashlib.sha256(labels.tobytes()).hexdigest()}


def label_bytes(dataset, label_shape: tuple) -> int | None:
    """A split's labels in memory: its masks (one byte per pixel), its float targets, or None (class ids)."""
    if label_shape:
        return len(dataset) * int(np.prod(label_shape))
    labels = getattr(dataset, "labels", None)
    return int(labels.nbytes) if isinstance(labels, np.ndarray) and labels.ndim == 2 else None


def datasets_and_keys(config, card, reader, cache, transform, fields: dict,
                       splits=SPLITS) -> tuple[dict, dict, dict, dict]:
    """(datasets, keys, layouts, fields) per split of `splits` (with the splits their aliases stand for). A slide
    split's key comes first (its tiling may be cached under it); a tile split's key includes its labels, so its
    dataset comes first."""
    if KINDS[card.kind].bags:
        keys = {split: cache_key(fields[split]) for split in splits}
        layouts = {split: slide_layout(cache, keys[split], reader, split, config) for split in splits}
        return {split: slide_dataset(layouts[split], transform) for split in splits}, keys, layouts, fields
    aliases = split_aliases(reader)  # a split that is another's items (HEST's val is train) shares its cache
    datasets = {split: reader.dataset(split, transform) for split in splits if split not in aliases}
    datasets.update({split: datasets[alias] for split, alias in aliases.items() if split in splits})
    fields = {split: {**fields[split], **labels_identity(datasets[split])} for split in splits}
    keys = {split: cache_key(fields[aliases.get(split, split)]) for split in splits}
    return datasets, keys, {}, fields


def split_aliases(reader) -> dict:
    """{split: the split whose items and cache it is}: a reader's `split_aliases` (none for most)."""
    return dict(getattr(reader, "split_aliases", {}))


def splits_to_extract(reader, splits=SPLITS) -> tuple:
    """`splits` with the split each aliased one stands for (HEST's val needs train's cache), in SPLITS order."""
    aliases = split_aliases(reader)
    wanted = set(splits) | {aliases[split] for split in splits if split in aliases}
    return tuple(split for split in SPLITS if split in wanted)
