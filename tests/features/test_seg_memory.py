"""Fitting and scoring a seg head on a memory-mapped dense cache keeps peak RSS far below the cache size."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROWS, GRID, WIDTH, LABEL_PX, CLASSES = 4000, 16, 384, 64, 5

_FIT_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from evalsuite.storage.npy_rows import NpyRows
    from evalsuite.probes import PROBES

    def status_kib(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    features_path, labels_path, val_features_path, val_labels_path, mode = sys.argv[1:6]
    params = {"epochs": 1, "batch_size": 16, "eval_batch_size": 32}
    # Warm up torch on a few rows first: its first use maps library pages that are not ours.
    small = np.array(np.load(features_path, mmap_mode="r")[:32])
    small_labels = np.array(np.load(labels_path, mmap_mode="r")[:32])
    PROBES["seg_linear"](5, **params).fit(small, small_labels, small, small_labels)
    open("/proc/self/clear_refs", "w").write("5")  # reset the VmHWM peak to the current RSS
    base = status_kib("VmRSS")
    # As FeatureCache.open does: features mapped (memmap) or loaded (ram); masks always mapped.
    features = NpyRows(features_path) if mode == "memmap" else np.load(features_path)
    labels = np.load(labels_path, mmap_mode="r")
    val_features, val_labels = NpyRows(val_features_path), np.load(val_labels_path, mmap_mode="r")
    probe = PROBES["seg_linear"](5, **params).fit(features, labels, val_features, val_labels)
    probe.confusion_matrix(features, labels)  # the streamed metrics over the whole cache
    print(json.dumps({"peak_growth_bytes": (status_kib("VmHWM") - base) * 1024, "base_bytes": base * 1024,
                      "end_rss_file_bytes": status_kib("RssFile") * 1024}))
""")


def _write_split(folder, rows: int, rng) -> tuple:
    """features.npy float16 [rows, 16, 16, 384] and labels.npy uint8 [rows, 64, 64], as a dense cache holds them."""
    folder.mkdir()
    features = np.lib.format.open_memmap(folder / "features.npy", mode="w+", dtype=np.float16,
                                         shape=(rows, GRID, GRID, WIDTH))
    block = rng.standard_normal((min(rows, 250), GRID, GRID, WIDTH), dtype=np.float32).astype(np.float16)
    for start in range(0, rows, len(block)):  # one random block repeated: the bytes, not their values, matter here
        stop = min(start + len(block), rows)
        features[start:stop] = block[: stop - start]
    features.flush()
    labels = np.lib.format.open_memmap(folder / "labels.npy", mode="w+", dtype=np.uint8,
                                       shape=(rows, LABEL_PX, LABEL_PX))
    labels[:] = rng.integers(0, CLASSES, (1, LABEL_PX, LABEL_PX), dtype=np.uint8)
    labels.flush()
    del features, labels
    return folder / "features.npy", folder / "labels.npy"


@pytest.mark.slow
def test_memmap_seg_fit_peak_rss_is_well_below_the_cache_size(tmp_path):
    rng = np.random.default_rng(0)
    paths = [_write_split(tmp_path / "train", ROWS, rng), _write_split(tmp_path / "val", 128, rng)]
    features_path, labels_path = paths[0]
    cache_bytes = features_path.stat().st_size + labels_path.stat().st_size  # ~803 MB
    measured = {}
    for mode in ("memmap", "ram"):
        # One thread: the numbers are about memory; on a busy 2-core runner this keeps the test short.
        result = subprocess.run([sys.executable, "-c", _FIT_SCRIPT, *map(str, paths[0] + paths[1]), mode],
                                capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr
        measured[mode] = json.loads(result.stdout.splitlines()[-1])
    print(json.dumps({"cache_bytes": cache_bytes, **measured}, indent=1))
    # Seen: memmap peak growth ~66 MB for an 803 MB cache (one batch's rows, each in a 2 MiB page-cache folio, plus
    # the head's float32 working set); the RAM copy holds the whole features file.
    assert measured["ram"]["peak_growth_bytes"] > 0.9 * features_path.stat().st_size, measured
    assert measured["memmap"]["peak_growth_bytes"] < 0.2 * cache_bytes, measured
