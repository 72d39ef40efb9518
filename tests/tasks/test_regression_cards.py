"""Regression cards (kind `regression`): what a card must say, which probes fit, and targets refused before
extraction."""

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli
from PIL import Image

from evalsuite import cli
from evalsuite.readers import READERS
from evalsuite.readers.base import Reader, TargetImages

CARD = """name: counts
kind: regression
reader: {name: hgsc_counts}
data_root: package:hgsc_nest
splits: [train, val, test]
selection_metric: pearson
probes: [ridge]
"""


@pytest.mark.parametrize("extra, fragment", [
    ("", "a regression card names its targets"),
    ("targets: [a, a]\n", "'targets' has duplicate names"),
    ("targets: [connective, inflammatory, neoplastic]\nclasses: [a, b]\n", "a regression card has no 'classes'"),
    ("targets: [tumour, stroma]\n", "field 'targets' must be ['connective', 'inflammatory', 'neoplastic']"),
])
def test_a_bad_regression_card_is_a_one_line_error(tmp_path, extra, fragment):
    card = tmp_path / "counts.yaml"
    card.write_text(CARD + extra)
    assert_one_line_error(run_cli("run", "--task", card, "--out", tmp_path / "out"), fragment)
    assert not (tmp_path / "out" / "cache").exists()


def test_a_classification_probe_on_a_regression_card_is_refused(tmp_path):
    result = run_cli("run", "--task", "demo_counts", "--probes", "linear", "--out", tmp_path / "out")
    assert_one_line_error(result, "probe 'linear' does not learn the targets of regression task 'demo_counts'",
                          "use a recipe of ridge, ridge_hest")


class _Tiles(TargetImages):
    def image(self, index: int) -> Image.Image:
        return Image.fromarray(np.full((16, 16, 3), index * 7 % 255, dtype=np.uint8))


class _ConstantTargetReader(Reader):
    """Two targets; the second is 0 on every train tile (a gene never expressed in the train samples)."""

    def __init__(self, card, data_root, check_counts: bool = True):
        self.card = card

    def dataset(self, split: str, transform):
        self.check_split(split, ["train", "val", "test"])
        rng = np.random.default_rng(len(split))
        targets = rng.random((8, 2))
        if split == "train":
            targets[:, 1] = 0.0
        return _Tiles(targets, transform)


def test_a_target_constant_on_train_is_refused_before_extraction(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(READERS, "constant_target", _ConstantTargetReader)
    card = tmp_path / "constant.yaml"
    card.write_text(CARD.replace("hgsc_counts", "constant_target").replace("package:hgsc_nest", ".")
                    + "targets: [EPCAM, CD3E]\n")
    out = tmp_path / "out"
    code = cli.main(["run", "--task", str(card), "--model", "test_vit", "--random-init", "--out", str(out)])
    error = "\n".join(line for line in capsys.readouterr().err.strip().splitlines()
                      if not line.startswith("progress: "))  # the stages a run names (runtime/stages.py)
    assert code == 2 and "\n" not in error, error
    assert "train split" in error and "CD3E" in error and "constant" in error
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()


@pytest.mark.parametrize("broken", ["missing", "wrong_shape"])
def test_a_missing_or_wrong_instance_mask_is_one_line_and_writes_nothing(tmp_path, broken):
    import shutil

    from evalsuite.tasks.resources import shipped_data_dir

    data = tmp_path / "hgsc_nest"
    shutil.copytree(shipped_data_dir() / "hgsc_nest", data)
    mask = data / "hgsc_nest_inst_mask.npz"
    if broken == "missing":
        mask.unlink()
    else:
        np.savez(mask, nuc_raster=np.zeros((10, 10), dtype=np.int32))
    out = tmp_path / "out"
    result = run_cli("run", "--task", "demo_counts", "--data-root", data, "--out", out)
    assert_one_line_error(result, str(mask))
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()
