"""Slide probes (abmil, meanpool) learn from bags of float16 tiles read one bag at a time, reproducibly."""

import numpy as np
import pytest
import torch
from conftest import RecordingFeatures
from conftest import marked_bags as shared_marked_bags

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import SlideBags
from evalsuite.metrics.classification import METRICS
from evalsuite.metrics.survival import concordance_index
from evalsuite.probes import PROBES, ABMILProbe, MeanPoolProbe
from evalsuite.probes.bags.abmil import size_groups
from evalsuite.storage.npy_rows import NpyRows

DIM = 16
ABMIL_FAST = {"epochs": 12, "patience": None, "batch_size": 8, "survival_batch_size": 32, "max_tiles_train": 24,
              "warmup_epochs": 0}
MEANPOOL_FAST = {"lr": [0.01], "weight_decay": [0.0], "epochs": 40, "batch_size": 16, "cox_lr": [0.05],
                 "cox_weight_decay": [0.01, 0.1], "cox_epochs": 150}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _bags(per_slide: list[np.ndarray]) -> SlideBags:
    counts = [len(tiles) for tiles in per_slide]
    return SlideBags(np.concatenate(per_slide).astype(np.float16), np.concatenate([[0], np.cumsum(counts)]))


def marked_bags(slides: int, seed: int) -> tuple[SlideBags, np.ndarray]:
    """Class 1 slides hold 3 'positive' tiles (shifted along one direction) among 15-50 background tiles."""
    return shared_marked_bags(slides, seed, DIM, shift=3.5, tiles=(15, 50))


def survival_bags(slides: int, seed: int) -> tuple[SlideBags, np.ndarray]:
    """Every tile of a slide shifted by its log-hazard along one direction; exponential times, ~35 % censored."""
    rng = np.random.default_rng(seed)
    direction = np.random.default_rng(98).normal(size=DIM)
    direction /= np.linalg.norm(direction)
    log_hazard = rng.normal(size=slides)
    per_slide = [rng.normal(size=(int(rng.integers(8, 30)), DIM)) + h * direction for h in log_hazard]
    event_time = rng.exponential(np.exp(-1.5 * log_hazard))
    censor_time = rng.exponential(2 * np.median(event_time), size=slides)
    targets = np.stack([np.minimum(event_time, censor_time), (event_time <= censor_time).astype(float)], axis=1)
    return _bags(per_slide), targets


@pytest.fixture(scope="module")
def marked():
    return {"train": marked_bags(64, 0), "val": marked_bags(32, 1), "test": marked_bags(60, 2)}


@pytest.fixture(scope="module")
def survival():
    return {"train": survival_bags(100, 0), "val": survival_bags(50, 1), "test": survival_bags(100, 2)}


def _fit(probe_cls, params, data, metric, seed=0):
    return probe_cls(0 if metric == "c_index" else 2, seed=seed, **params).fit(*data["train"], *data["val"], metric)


def test_both_are_registered_slide_probes():
    assert PROBES["abmil"] is ABMILProbe and PROBES["meanpool"] is MeanPoolProbe
    assert ABMILProbe.inputs == MeanPoolProbe.inputs == "bags"


def test_abmil_finds_the_few_positive_tiles_and_meanpool_works(marked):
    bags, labels = marked["test"]
    abmil = _fit(ABMILProbe, ABMIL_FAST, marked, "balanced_accuracy")
    proba = abmil.predict_proba(bags)
    assert proba.dtype == np.float32 and proba.shape == (60, 2) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)
    assert METRICS["balanced_accuracy"](labels, proba) > 0.8
    assert set(abmil.selected_params_) == {"epoch", "val_balanced_accuracy", "val_loss", "epochs_trained"}
    meanpool = _fit(MeanPoolProbe, MEANPOOL_FAST, marked, "balanced_accuracy")
    assert METRICS["balanced_accuracy"](labels, meanpool.predict_proba(bags)) > 0.65


@pytest.mark.parametrize("probe_cls, params", [(ABMILProbe, ABMIL_FAST), (MeanPoolProbe, MEANPOOL_FAST)])
def test_survival_risk_orders_the_slides(probe_cls, params, survival):
    bags, targets = survival["test"]
    probe = _fit(probe_cls, params, survival, "c_index")
    risk = probe.predict_risk(bags)
    assert risk.dtype == np.float32 and risk.shape == (100,)
    assert concordance_index(targets[:, 0], targets[:, 1], risk) > 0.7
    assert "val_c_index" in probe.selected_params_
    with pytest.raises(RuntimeError, match="predict_risk"):
        probe.predict_proba(bags)


def test_the_same_seed_gives_identical_predictions(marked, survival):
    first = _fit(ABMILProbe, ABMIL_FAST, marked, "balanced_accuracy", seed=3).predict_proba(marked["test"][0])
    again = _fit(ABMILProbe, ABMIL_FAST, marked, "balanced_accuracy", seed=3).predict_proba(marked["test"][0])
    assert np.array_equal(first, again)
    dropout = {**ABMIL_FAST, "dropout_input": 0.25, "dropout_mlp": 0.25, "epochs": 3}
    first = _fit(ABMILProbe, dropout, survival, "c_index", seed=3).predict_risk(survival["test"][0])
    again = _fit(ABMILProbe, dropout, survival, "c_index", seed=3).predict_risk(survival["test"][0])
    assert np.array_equal(first, again)
    other = _fit(ABMILProbe, dropout, survival, "c_index", seed=4).predict_risk(survival["test"][0])
    assert not np.array_equal(first, other)


def _recorded(bags: SlideBags) -> SlideBags:
    return SlideBags(RecordingFeatures(np.asarray(bags.features)), bags.offsets)


@pytest.mark.parametrize("probe_cls, params", [(ABMILProbe, {**ABMIL_FAST, "epochs": 2, "eval_batch_tiles": 64}),
                                               (MeanPoolProbe, {**MEANPOOL_FAST, "epochs": 2})])
def test_tiles_are_read_one_bag_at_a_time(probe_cls, params, marked):
    stores = {split: _recorded(bags) for split, (bags, _) in marked.items()}
    probe = probe_cls(2, **params).fit(stores["train"], marked["train"][1], stores["val"], marked["val"][1])
    probe.predict_proba(stores["test"])
    for bags in stores.values():
        reads = bags.features.rows_per_read
        assert reads and max(reads) <= bags.tile_counts.max() < len(bags.features)
    if probe_cls is ABMILProbe:  # training reads only the sampled tiles of a bag
        assert max(stores["train"].features.rows_per_read) <= params["max_tiles_train"]


@pytest.mark.parametrize("probe_cls, params", [(ABMILProbe, {**ABMIL_FAST, "epochs": 3}),
                                               (MeanPoolProbe, MEANPOOL_FAST)])
def test_bags_on_disk_give_the_predictions_of_bags_in_ram(probe_cls, params, survival, tmp_path):
    on_disk = {}
    for split, (bags, targets) in survival.items():
        np.save(tmp_path / f"{split}.npy", bags.features)
        on_disk[split] = (SlideBags(NpyRows(tmp_path / f"{split}.npy"), bags.offsets), targets)
    in_ram = _fit(probe_cls, params, survival, "c_index").predict_risk(survival["test"][0])
    from_disk = _fit(probe_cls, params, on_disk, "c_index").predict_risk(on_disk["test"][0])
    assert np.array_equal(in_ram, from_disk)


def test_padding_does_not_change_a_bags_output(marked):
    """The mask keeps padded rows out of the attention: a bag scores the same alone or padded beside a longer one."""
    probe = _fit(ABMILProbe, {**ABMIL_FAST, "epochs": 2}, marked, "balanced_accuracy")
    bags = marked["test"][0]
    alone = ABMILProbe.predict_proba(_with(probe, eval_batch_tiles=1), bags)
    padded = ABMILProbe.predict_proba(_with(probe, eval_batch_tiles=10**6), bags)
    assert np.allclose(alone, padded, atol=1e-5)


def _with(probe, **attributes):
    for name, value in attributes.items():
        setattr(probe, name, value)
    return probe


def test_size_groups_cover_every_bag_within_the_budget():
    counts = np.array([5, 50, 3, 8, 200, 7, 7])
    groups = size_groups(counts, budget_tiles=30)
    assert sorted(np.concatenate(groups).tolist()) == list(range(7))
    for group in groups:
        assert len(group) * counts[group].max() <= 30 or len(group) == 1


@pytest.mark.parametrize("probe_cls", [ABMILProbe, MeanPoolProbe])
def test_bad_targets_are_one_line_errors(probe_cls, marked, survival):
    bags, labels = marked["train"]
    cases = [((bags, labels + 1), "label 2 is outside 0..1"),
             ((bags, labels[:-1]), "64 slides but 63 targets")]
    surv_bags, targets = survival["train"]
    negative = targets.copy()
    negative[4, 0] = -3.0
    censored = targets.copy()
    censored[:, 1] = 0
    cases += [((surv_bags, negative), "survival time -3.0 of slide 4 is negative"),
              ((surv_bags, censored), "all 100 slides are censored")]
    for (train_bags, train_targets), message in cases:
        with pytest.raises(EvalsuiteError) as raised:
            probe_cls(2, epochs=1).fit(train_bags, train_targets, train_bags, train_targets)
        assert message in str(raised.value) and "\n" not in str(raised.value)


def test_abmil_takes_the_requested_device():
    """CPU here; on a CUDA host the same fit runs on the GPU (the network and batches follow `device`)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = {"train": marked_bags(16, 0), "val": marked_bags(8, 1)}
    params = {**ABMIL_FAST, "epochs": 2, "warmup_epochs": 5}  # the recipe's warm-up path too
    probe = ABMILProbe(2, device=device, **params).fit(*data["train"], *data["val"])
    assert next(probe.model_.parameters()).device.type == device.type
    assert probe.predict_proba(data["val"][0]).shape == (8, 2)
