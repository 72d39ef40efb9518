"""Prompt-text embeddings cached like image features (issue 42): float16, content-addressed by model, weights id,
tokenizer and the prompt texts; a second request for the same texts encodes nothing."""

import numpy as np
import torch

from evalsuite.features.cache import FeatureCache
from evalsuite.probes.texts.text_cache import cached_text_embeddings, text_key_fields


class _Text:
    tokenizer_id = "toy tokenizer"
    context_length_tokens = 77

    def __init__(self):
        self.encoded = []

    def encode(self, texts, device):
        self.encoded.append(list(texts))
        return np.stack([np.full(4, len(t), dtype=np.float32) + np.arange(4) / 3 for t in texts])


class _Backbone:
    def __init__(self, name="m", weights_id="sha256:abc"):
        self.name, self.weights_id, self.text = name, weights_id, _Text()


def test_text_embeddings_are_cached_float16_and_reused(tmp_path):
    backbone = _Backbone()
    rows, key = cached_text_embeddings(tmp_path, backbone, ["a tumour.", "stroma."], torch.device("cpu"))
    assert rows.dtype == np.float16 and rows.shape == (2, 4)
    np.testing.assert_array_equal(rows, backbone.text.encode(["a tumour.", "stroma."], "cpu").astype(np.float16))
    again, same_key = cached_text_embeddings(tmp_path, backbone, ["a tumour.", "stroma."], torch.device("cpu"))
    assert same_key == key and len(backbone.text.encoded) == 2  # the second call read the cache
    np.testing.assert_array_equal(again, rows)
    manifest = FeatureCache(tmp_path / "cache").manifest(key)
    assert manifest["complete"] and manifest["fields"]["feature"] == "text_embedding"


def test_the_key_changes_with_model_weights_tokenizer_and_each_text():
    base = text_key_fields(_Backbone(), ["a.", "b."])
    assert text_key_fields(_Backbone(), ["a.", "b."]) == base
    assert text_key_fields(_Backbone(name="other"), ["a.", "b."]) != base
    assert text_key_fields(_Backbone(weights_id="sha256:def"), ["a.", "b."]) != base
    assert text_key_fields(_Backbone(), ["b.", "a."]) != base  # the order is the class layout
    retokenized = _Backbone()
    retokenized.text.tokenizer_id = "another tokenizer"
    assert text_key_fields(retokenized, ["a.", "b."]) != base
