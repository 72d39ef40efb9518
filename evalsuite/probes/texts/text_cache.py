"""Prompt-text embeddings cached like image features: float16, under `<out>/cache/<key>/`, one row per prompt.

The key hashes the model, its weights id, the tokenizer and its context length, and the prompt texts in order,
so a sweep over prompt sets or cards encodes each distinct prompt list once, and another card with the same
prompts reuses it. The rows are the text tower's unnormalised embeddings; the zero-shot probe normalises and
ensembles them (evalsuite.probes.texts.class_texts), which is cheap and never cached. Rows that are not finite in float16
are never written: the text tower refuses NaN/inf itself (models/vision_language/towers.py), and a row beyond float16's range is refused
here, both naming the checkpoint, so no cache of unusable rows is left for a later run to call corrupt.
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.features.cache import CACHE_DTYPE, FeatureCache, cache_key
from evalsuite.runtime.versions import library_versions

TEXT_FEATURE = "text_embedding"


def text_key_fields(backbone, texts: list[str]) -> dict:
    """What changes the cached numbers. `card`/`split` are what `evalsuite cache ls` shows for a cache."""
    text = backbone.text
    texts_sha256 = hashlib.sha256(json.dumps(texts).encode()).hexdigest()
    # A slide encoder's text tower is keyed by the slide encoder and its weights, not the tile encoder it reads.
    return {"model": getattr(text, "model_name", backbone.name),
            "weights_id": getattr(text, "weights_id", backbone.weights_id), "tokenizer": text.tokenizer_id,
            "context_length_tokens": text.context_length_tokens, "texts_sha256": texts_sha256,
            "feature": TEXT_FEATURE, "dtype": "float16", "precision": "fp32",
            "card": "(prompt texts)", "split": f"{len(texts)} prompts"}


def cached_text_embeddings(out_dir: str | Path, backbone, texts: list[str], device) -> tuple[np.ndarray, str]:
    """(float16 [prompts, embed_dim] embeddings of `texts`, cache key): from the cache, else encoded and cached."""
    cache = FeatureCache(Path(out_dir) / "cache")
    fields = text_key_fields(backbone, texts)
    key = cache_key(fields)
    with cache.lock(key):
        if not cache.is_complete(key):
            rows = _finite_in_cache_dtype(backbone.text.encode(texts, device), texts, backbone)
            writer = cache.start_or_resume(key, rows.shape, np.arange(len(texts)), fields, len(texts),
                                           library_versions())
            writer.write_chunk(0, rows)
            writer.finish()
        features, _ = cache.open(key, mode="ram")
    return np.asarray(features), key


def _finite_in_cache_dtype(rows: np.ndarray, texts: list[str], backbone) -> np.ndarray:
    """`rows` as float16, refused (naming the checkpoint) where a value does not fit: text embeddings of a sound text
    tower are far inside float16's range, so an inf after the cast is the weights' fault."""
    cached = np.asarray(rows).astype(CACHE_DTYPE)
    bad = ~np.isfinite(cached).all(axis=1)
    if bad.any():
        first = int(np.argmax(bad))
        checkpoint = getattr(backbone.text, "checkpoint", f"the weights of model '{backbone.name}'")
        raise EvalsuiteError(f"{checkpoint}: its text tower gives an embedding beyond float16's range (largest "
                             f"|value| {float(np.nanmax(np.abs(rows[first]))):.3g}, the cache's dtype holds 65504) "
                             f"for prompt '{texts[first][:80]}': the weights are broken or not {backbone.name}'s; "
                             "re-download the checkpoint (nothing was cached)")
    return cached
