"""Protocol fidelity of the probes and metrics (issue 14): what they compute is what the README says."""

import warnings

import numpy as np
import pytest
from conftest import noisy_class_split
from sklearn.metrics import f1_score

from evalsuite.metrics.bootstrap import _ClassRanks, weighted_metrics
from evalsuite.metrics.classification import compute_metrics


def _proba_predicting(predicted: np.ndarray, classes: int) -> np.ndarray:
    proba = np.full((len(predicted), classes), 0.1 / classes)
    proba[np.arange(len(predicted)), predicted] += 0.9
    return proba


@pytest.mark.parametrize("truth, predicted", [
    ([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]),  # every class present
    ([0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0]),  # class 2 in neither truth nor prediction
    ([0, 0, 1, 1, 1, 0], [0, 2, 1, 1, 0, 0]),  # class 2 predicted only: counts, with F1 0
    ([0, 0, 2, 2, 0, 0], [0, 0, 2, 0, 0, 0]),  # class 1 absent from both, in the middle
])
def test_f1_macro_averages_over_the_classes_in_truth_or_prediction_as_scikit_learn(truth, predicted):
    truth, predicted = np.array(truth), np.array(predicted)
    proba = _proba_predicting(predicted, classes=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = f1_score(truth, predicted, average="macro")  # labels = union of those present
        ours = compute_metrics(truth, proba)["f1_macro"]
    ranks = [_ClassRanks(truth, proba[:, c], c) for c in range(3)]
    bootstrap_f1 = weighted_metrics(truth, predicted, ranks, np.ones(len(truth)), 3)["f1_macro"]
    assert ours == pytest.approx(expected, abs=1e-12)
    assert bootstrap_f1 == pytest.approx(expected, abs=1e-12)


def test_bootstrap_f1_of_a_draw_skips_a_class_the_draw_left_out():
    truth, predicted = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 0, 2, 2])
    proba = _proba_predicting(predicted, classes=3)
    ranks = [_ClassRanks(truth, proba[:, c], c) for c in range(3)]
    weights = np.array([2.0, 1.0, 0.0, 0.0, 1.0, 2.0])  # a draw without the two class-1 items
    drawn = np.repeat(np.arange(6), weights.astype(int))
    expected = f1_score(truth[drawn], predicted[drawn], average="macro")
    assert expected == 1.0  # classes 0 and 2 only, both perfect
    assert weighted_metrics(truth, predicted, ranks, weights, 3)["f1_macro"] == pytest.approx(expected)


def test_seg_best_epoch_is_not_stuck_on_a_nan_first_validation_score(monkeypatch):
    """NaN > x is False: a NaN first score must not stay "best" while later epochs score."""
    import evalsuite.probes.tokens.seg_train as seg_train
    from evalsuite.probes import PROBES

    real = seg_train.metrics_from_confusion
    calls = []

    def nan_first(confusion):
        metrics = dict(real(confusion))
        calls.append(1)
        if len(calls) == 1:
            metrics["dice_fg_mean"] = float("nan")  # e.g. a first head predicting background only
        return metrics

    monkeypatch.setattr(seg_train, "metrics_from_confusion", nan_first)
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, size=(3, 8))
    token_class = rng.integers(0, 3, (24, 4, 4))
    features = (centres[token_class] + rng.normal(0, 0.7, (24, 4, 4, 8))).astype(np.float16)
    masks = token_class.repeat(2, axis=1).repeat(2, axis=2).astype(np.uint8)
    probe = PROBES["seg_linear"](num_classes=3, seed=0, epochs=4, batch_size=8, lr=0.01)
    probe.fit(features[:16], masks[:16], features[16:], masks[16:])
    history = probe.val_history_
    assert np.isnan(history[0]) and np.isfinite(history[1:]).all()
    assert probe.selected_params_["epoch"] == 2 + int(np.argmax(history[1:]))
    assert probe.selected_params_["val_dice_fg_mean"] == pytest.approx(max(history[1:]), abs=1e-6)


def _class_sorted_split(per_class: int, seed: int, dim: int = 48, classes: int = 3):
    """Overlapping Gaussian classes, samples listed class by class (as folder-per-class readers list them)."""
    centres = np.random.default_rng(77).normal(0, 0.2, size=(classes, dim))
    labels = np.repeat(np.arange(classes), per_class)
    features = centres[labels] + np.random.default_rng(seed).normal(0, 1, size=(len(labels), dim))
    return features.astype(np.float16), labels


def test_linear_probe_selects_the_same_head_and_scores_the_same_from_ram_and_from_a_memory_map(tmp_path):
    from evalsuite.probes import LinearProbe
    from evalsuite.storage.npy_rows import NpyRows

    (train, train_y), (val, val_y) = _class_sorted_split(400, seed=1), _class_sorted_split(100, seed=2)
    np.save(tmp_path / "train.npy", train)
    np.save(tmp_path / "val.npy", val)
    params = dict(lr=[1e-2, 1e-3], weight_decay=[0.0, 1e-2], epochs=4, batch_size=32, stream_read_rows=64)
    fitted = {}
    for mode in ("ram", "memmap"):
        store = (lambda name: np.load(tmp_path / name)) if mode == "ram" else (lambda name: NpyRows(tmp_path / name))
        probe = LinearProbe(3, seed=3, **params).fit(store("train.npy"), train_y, store("val.npy"), val_y)
        fitted[mode] = (probe.selected_params_, compute_metrics(val_y, probe.predict_proba(store("val.npy"))))
    assert fitted["ram"] == fitted["memmap"]


@pytest.mark.slow
def test_run_with_ram_and_memmap_caches_gives_the_same_heads_and_metrics(tmp_path):
    """Through the CLI: the second run reuses the first's cache, read as a memory map instead of RAM.
    The run JSON also says what each probe's test interval is."""
    import json

    from conftest import run_cli

    out = tmp_path / "out"
    recipe = tmp_path / "small_linear.yaml"  # a smaller grid and fewer epochs: the order matters, not the fit
    recipe.write_text("name: linear\nprobe: linear\nparams: {lr: [0.01, 0.001], weight_decay: [0.0, 0.01], "
                      "epochs: 10, batch_size: 32}\n")
    fewshot = tmp_path / "small_fewshot.yaml"
    fewshot.write_text("name: fewshot\nprobe: fewshot\nparams: {shots: [1, 4], support_sets: 20}\n")
    records = {}
    for mode in ("ram", "memmap"):
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                         "--probes", f"{recipe},{fewshot}", "--cache", mode, "--out", out)
        assert result.returncode == 0, result.stderr
        newest = max((out / "runs").glob("*.json"), key=lambda path: path.stat().st_mtime_ns)
        records[mode] = json.loads(newest.read_text())
    assert [records[mode]["cache"]["mode"] for mode in ("ram", "memmap")] == ["ram", "memmap"]
    assert records["memmap"]["samples_extracted"] == {split: 0 for split in ("train", "val", "test")}
    for ram, memmap in zip(records["ram"]["probes"], records["memmap"]["probes"]):
        assert ram["selected_params"] == memmap["selected_params"]
        assert ram["metrics"] == memmap["metrics"]
    units = {probe["probe"]: probe["intervals_95_unit"] for probe in records["ram"]["probes"]}
    assert units == {"linear": "tile", "fewshot": "support_set_spread"}  # what ci_low/ci_high hold


def test_fewshot_interval_is_the_spread_of_single_support_sets_not_an_interval_of_the_mean():
    from evalsuite.probes import FewShotProbe
    from evalsuite.probes.pooled.fewshot import INTERVAL_UNIT

    split_data = noisy_class_split(classes=3, per_class=80)
    name = "balanced_accuracy_1shot"
    means, intervals = FewShotProbe(3, shots=[1], support_sets=200, batch_size=64, seed=0).evaluate(split_data)
    low, high = intervals[name]
    # Scores of single support sets, each drawn independently (one set per seed).
    single = np.array([FewShotProbe(3, shots=[1], support_sets=1, seed=s).evaluate(split_data)[0][name]
                       for s in range(1, 31)])
    inside = np.mean((single >= low) & (single <= high))
    assert inside >= 0.8, (low, high, single)  # about 95 % of single sets fall in it
    mean_halfwidth = 1.96 * single.std(ddof=1) / np.sqrt(200)
    assert high - low > 5 * 2 * mean_halfwidth  # far wider than the mean's own interval (about 10x)
    assert FewShotProbe.interval_unit == INTERVAL_UNIT == "support_set_spread"


def test_demo_class_counts_in_the_card_and_the_readme_are_the_readers():
    import re

    from conftest import REPO

    from evalsuite.readers import build_reader
    from evalsuite.tasks.cards import load_card

    card = load_card("demo")
    reader = build_reader(card)
    counts = {split: np.bincount(reader.dataset(split, None).labels, minlength=len(card.classes))
              for split in card.splits}
    stated = re.search(r"Counts \(train/val/test\): (.*?)\.", " ".join(card.description.split())).group(1)
    for item in stated.split(", "):
        name, numbers = item.rsplit(" ", 1)
        per_split = [int(n) for n in numbers.split("/")]
        assert per_split == [int(counts[s][card.classes.index(name)]) for s in card.splits], item
    tasks_doc = (REPO / "docs" / "tasks.md").read_text()
    demo_section = tasks_doc[tasks_doc.index("## The demo task"):tasks_doc.index("## Tile-classification tasks")]
    for split in card.splits:
        row = re.search(rf"^\| {split} \|(.*)\|$", demo_section, re.M).group(1)
        assert [int(n) for n in row.split("|")] == [*counts[split].tolist(), int(counts[split].sum())], split


def test_fewshot_similarities_equal_centring_and_normalising_each_query_per_set():
    """The few-shot scores come from products with the support means and centroids (issue 29: the direct form built
    a [sets, batch, D] tensor per batch); they equal centring each query on each set's mean and normalising it."""
    import torch

    from evalsuite.probes import FewShotProbe

    rng = np.random.default_rng(5)
    test_x = (rng.normal(size=(70, 24)) + 3.0).astype(np.float16)
    means = torch.from_numpy(rng.normal(size=(6, 24)) + 3.0).float()
    centroids = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(6, 4, 24))).float(), dim=2)
    centroids[2, 3] = 0  # a class absent from a support set: its centroid is zero and scores 0.5
    queries = torch.from_numpy(test_x.astype(np.float32))
    direct = torch.einsum("sbd,scd->sbc", torch.nn.functional.normalize(queries[None] - means[:, None], dim=2),
                          centroids)
    ours = FewShotProbe(4, batch_size=16)._similarities(test_x, means, centroids)
    np.testing.assert_allclose(ours, ((direct + 1) / 2).numpy(), atol=2e-6)
    assert np.all(ours[2, :, 3] == 0.5)
