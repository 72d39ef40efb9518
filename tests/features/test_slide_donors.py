"""A slide's tiles already in another slide cache under the same --out are copied, not forwarded
(features/slide_donors.py), through `evalsuite run` on demo slides: a second slide list that adds slides to a first
forwards only the added slides' tiles and gives the same rows for the others; a donor whose features file is gone is
skipped (its slides forwarded), and the run still succeeds."""

import numpy as np
import pandas as pd
import pytest
from conftest import run_record

from evalsuite.features.cache import FeatureCache
from evalsuite.readers import resolve_data_root
from evalsuite.tasks.cards import load_card

MODEL = ("--model", "test_vit", "--random-init", "--probes", "meanpool", "--num-workers", "0")


def _subset(folder, per_class: dict):
    """slides.csv of the first demo slides per split and class (absolute paths)."""
    built = resolve_data_root(load_card("demo_slide"), None)
    rows = pd.read_csv(built / "slides.csv")
    rows["slide_path"] = [str(built / path) for path in rows["slide_path"]]
    subset = pd.concat([rows[(rows["split"] == split) & (rows["label"] == label)].head(count)
                        for split, count in per_class.items() for label in ("stroma", "tumour")])
    folder.mkdir(parents=True)
    subset.to_csv(folder / "slides.csv", index=False)
    return folder


def _run(cli_in_process, data, out):
    result = cli_in_process("run", "--task", "demo_slide", "--data-root", data, *MODEL, "--out", out)
    assert result.returncode == 0, result.stderr
    return result, run_record(out, result)


def _test_rows(out, record) -> dict:
    """{slide id: its float16 tile rows} of the run's test cache."""
    cache = FeatureCache(out / "cache")
    key = record["cache"]["keys"]["test"]
    manifest = cache.manifest(key)["slides"]
    features = np.load(cache.folder(key) / "features.npy")
    offsets = manifest["offsets"]
    return {slide: features[offsets[i]:offsets[i + 1]] for i, slide in enumerate(manifest["ids"])}


@pytest.fixture
def first_run(tmp_path, cli_in_process):
    out = tmp_path / "out"
    _, record = _run(cli_in_process, _subset(tmp_path / "small", {"train": 1, "val": 1, "test": 1}), out)
    return out, record


def test_a_larger_slide_list_forwards_only_the_slides_no_cache_holds(first_run, tmp_path, cli_in_process):
    out, small = first_run
    result, large = _run(cli_in_process, _subset(tmp_path / "large", {"train": 1, "val": 1, "test": 2}), out)
    assert large["cache"]["keys"]["test"] != small["cache"]["keys"]["test"]  # another slide list: another cache
    assert large["samples_extracted"]["train"] == 0 and large["samples_extracted"]["val"] == 0  # same slides
    added = large["slides"]["test"]["tiles"] - small["slides"]["test"]["tiles"]
    assert large["samples_extracted"]["test"] == added > 0
    assert "copied from slide caches" in result.stderr
    before, after = _test_rows(out, small), _test_rows(out, large)
    for slide, rows in before.items():
        assert np.array_equal(after[slide], rows)


def test_a_donor_without_its_features_file_is_skipped(first_run, tmp_path, cli_in_process):
    out, small = first_run
    (out / "cache" / small["cache"]["keys"]["test"] / "features.npy").unlink()
    _, large = _run(cli_in_process, _subset(tmp_path / "large", {"train": 1, "val": 1, "test": 2}), out)
    assert large["samples_extracted"]["test"] == large["slides"]["test"]["tiles"]  # every test tile forwarded
