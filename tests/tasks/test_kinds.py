"""A new task kind is one entry in tasks/kinds.py plus its reader and its probe (docs/architecture.md).

The test declares a kind the package does not have ("tile_colour": is a tile reddish or bluish,
scored by a Brier score), registers a reader and a probe for it, and runs `evalsuite run` on a
card of that kind: no other module is touched, and the rows reach the leaderboard.
"""

import numpy as np
import torch
from conftest import leaderboard_rows
from PIL import Image

from evalsuite import cli
from evalsuite.probes import PROBES
from evalsuite.probes.base import FittedProbe
from evalsuite.probes.batches import iter_float32_batches
from evalsuite.readers import READERS
from evalsuite.readers.base import LabelledImages, Reader
from evalsuite.tasks.kinds import KINDS, TaskKind

SPLIT_SIZES = {"train": 12, "val": 6, "test": 6}


class ColourTiles(LabelledImages):
    def __init__(self, labels, transform, seed: int):
        super().__init__(labels, transform)
        self.shades = np.random.default_rng(seed).integers(0, 80, size=(len(labels), 3))

    def image(self, index: int) -> Image.Image:
        red = self.labels[index] == 0
        rgb = np.array([200, 40, 40] if red else [40, 40, 200]) + self.shades[index] // 2
        return Image.fromarray(np.full((32, 32, 3), rgb, dtype=np.uint8))


class ColourReader(Reader):
    def __init__(self, card, data_root, check_counts: bool = True):
        self.card = card

    def dataset(self, split: str, transform) -> ColourTiles:
        self.check_split(split, SPLIT_SIZES)
        labels = np.arange(SPLIT_SIZES[split]) % 2
        return ColourTiles(labels, transform, seed=len(split))


class CentroidProbe(FittedProbe):
    def __init__(self, num_classes: int, device, seed: int = 0):
        self.num_classes, self.seed = num_classes, seed

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "brier"):
        rows = _float32_rows(features)
        self.centroids_ = np.stack([rows[np.asarray(labels) == c].mean(0) for c in range(self.num_classes)])
        self.selected_params_ = {}
        return self

    def distances(self, features) -> np.ndarray:
        rows = _float32_rows(features)
        return ((rows[:, None, :] - self.centroids_[None]) ** 2).sum(-1)


def _float32_rows(features) -> np.ndarray:
    batches = iter_float32_batches(features, np.arange(len(features)), 64, torch.device("cpu"))
    return np.concatenate([batch.numpy() for _, batch in batches])


def brier_scores(_card, probe, features, labels) -> dict:
    weights = np.exp(-probe.distances(features))
    proba = weights / weights.sum(1, keepdims=True)
    return {"brier": float(((proba - np.eye(probe.num_classes)[labels]) ** 2).sum(1).mean())}


def test_a_kind_declared_in_the_table_runs_with_its_reader_and_probe(tmp_path, monkeypatch):
    monkeypatch.setitem(KINDS, "tile_colour", TaskKind(
        "tile_colour", feature="pooled", selection_metrics=("brier",), score=brier_scores, intervals=False,
        card_fields=(), check_card=lambda raw, path, classes: None))
    monkeypatch.setitem(READERS, "colour", ColourReader)
    monkeypatch.setitem(PROBES, "centroid", CentroidProbe)
    card, recipe = tmp_path / "colour.yaml", tmp_path / "centroid.yaml"
    card.write_text("name: colour\nkind: tile_colour\nreader: {name: colour}\ndata_root: .\nclasses: [red, blue]\n"
                    "splits: [train, val, test]\nselection_metric: brier\nprobes: [centroid]\n")
    recipe.write_text("name: centroid\nprobe: centroid\n")
    out = tmp_path / "out"
    code = cli.main(["run", "--task", str(card), "--probes", str(recipe), "--model", "test_vit", "--random-init",
                     "--precision", "fp32", "--num-workers", "0", "--out", str(out)])
    assert code == 0
    rows = leaderboard_rows(out)
    assert {(r["task"], r["probe"], r["metric"], r["split"]) for r in rows} == {
        ("colour", "centroid", "brier", split) for split in SPLIT_SIZES}
    assert all(0 <= float(r["value"]) <= 2 for r in rows)


def test_a_card_of_an_undeclared_kind_is_a_one_line_error(tmp_path, capsys):
    card = tmp_path / "colour.yaml"
    card.write_text("name: colour\nkind: tile_colour\nreader: {name: colour}\nclasses: [red, blue]\n"
                    "splits: [train, val, test]\nselection_metric: brier\nprobes: [centroid]\n")
    assert cli.main(["run", "--task", str(card)]) == 2
    expected = "field 'kind' must be one of classification, segmentation, slide, survival, regression, consistency, got 'tile_colour'"
    assert expected in capsys.readouterr().err


class CountingCentroidProbe(CentroidProbe):
    """A classification probe that counts the rows it is asked to predict, per call."""

    calls: list = []

    def predict_proba(self, features) -> np.ndarray:
        CountingCentroidProbe.calls.append(len(features))
        weights = np.exp(-self.distances(features))
        return weights / weights.sum(1, keepdims=True)


def test_each_split_is_predicted_once(tmp_path, monkeypatch):
    """Issue 29: the test split's probabilities were predicted twice (once to store them, once to score them), the
    larger half of a kNN probe's test cost at PCam size."""
    monkeypatch.setitem(READERS, "colour", ColourReader)
    monkeypatch.setitem(PROBES, "counting", CountingCentroidProbe)
    monkeypatch.setattr(CountingCentroidProbe, "calls", [])
    card, recipe = tmp_path / "colour.yaml", tmp_path / "counting.yaml"
    card.write_text("name: colour\nkind: classification\nreader: {name: colour}\ndata_root: .\nclasses: [red, blue]\n"
                    "splits: [train, val, test]\nselection_metric: balanced_accuracy\nprobes: [counting]\n")
    recipe.write_text("name: counting\nprobe: counting\n")
    out = tmp_path / "out"
    assert cli.main(["run", "--task", str(card), "--probes", str(recipe), "--model", "test_vit", "--random-init",
                     "--precision", "fp32", "--num-workers", "0", "--out", str(out)]) == 0
    assert sorted(CountingCentroidProbe.calls) == sorted(SPLIT_SIZES.values())
    assert len(leaderboard_rows(out)) > 0
