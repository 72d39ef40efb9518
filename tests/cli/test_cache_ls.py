"""`evalsuite cache ls` tells apart caches of one model name (issue 25 item 6)."""

import numpy as np
from conftest import run_cli

from evalsuite.features.cache import FeatureCache, cache_key

WEIGHTS_SHA256 = "579344248a93" + "0" * 52  # a sha256:... weights id as load_weights writes it


def _cache(root, weights_id: str, precision: str) -> str:
    fields = {"model": "efficientnet_lite0_imagenet", "weights_id": weights_id, "pooling": "timm_head",
              "precision": precision, "card": "demo", "split": "test"}
    key = cache_key(fields)
    writer = FeatureCache(root).start_or_resume(key, (2, 4), np.zeros(2, dtype=np.int64), fields, chunk_rows=2,
                                                versions={})
    writer.write_chunk(0, np.zeros((2, 4), dtype=np.float16))
    writer.finish()
    return key


def test_cache_ls_shows_random_init_weights_pooling_and_precision(tmp_path):
    """Both caches printed `efficientnet_lite0_imagenet`; a user could not tell which to remove. Reference: the
    --random-init cache reads `efficientnet_lite0_imagenet+random-init (random-init:seed0, pooling timm_head,
    fp32)`, the pretrained one its weights hash cut to 12 hex digits."""
    random_key = _cache(tmp_path / "out" / "cache", "random-init:seed0", "fp32")
    pretrained_key = _cache(tmp_path / "out" / "cache", f"sha256:{WEIGHTS_SHA256}", "bf16")
    result = run_cli("cache", "ls", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert lines[random_key].endswith("efficientnet_lite0_imagenet+random-init (random-init:seed0, pooling timm_head, "
                                      "fp32)")
    assert lines[pretrained_key].endswith("efficientnet_lite0_imagenet (sha256:579344248a93, pooling timm_head, "
                                          "bf16)")
