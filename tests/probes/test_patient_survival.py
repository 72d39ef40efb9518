"""Survival is fitted and scored per patient (issue 23 item 1), and the mean-pool Cox penalty is relative to the
train data's scale (item 5). References: lifelines' CoxPHFitter and concordance_index on per-patient data."""

import csv

import numpy as np
import pandas as pd
import pytest
from lifelines import CoxPHFitter
from lifelines.utils import concordance_index as lifelines_c_index

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import PatientBags, SlideBags
from evalsuite.metrics.survival import survival_split_metrics
from evalsuite.probes import ABMILProbe, MeanPoolProbe
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DIM = 4
CARD = """name: tiny_patients
kind: survival
reader: {name: slide_csv, args: {manifest: slides.csv}}
splits: [train, val, test]
selection_metric: c_index
probes: [meanpool]
"""


def _cohort(patients: int, seed: int):
    """Per slide (tiles, patient number) with 1-3 slides a patient, the slides shuffled so a patient's slides are
    not next to each other in the cache; per patient (time, event) from a log-hazard shared by its tiles."""
    rng = np.random.default_rng(seed)
    direction = np.eye(DIM)[0]
    log_hazard = rng.normal(size=patients)
    slides = [(p, rng.normal(size=(int(rng.integers(3, 9)), DIM)) + log_hazard[p] * direction)
              for p in range(patients) for _ in range(int(rng.integers(1, 4)))]
    order = rng.permutation(len(slides))
    slides = [slides[i] for i in order]
    event_time = rng.exponential(np.exp(-1.2 * log_hazard))
    censor_time = rng.exponential(2 * np.median(event_time), size=patients)
    targets = np.stack([np.minimum(event_time, censor_time), (event_time <= censor_time).astype(float)], axis=1)
    return slides, targets


def _slide_bags(slides) -> SlideBags:
    counts = [len(tiles) for _, tiles in slides]
    return SlideBags(np.concatenate([t for _, t in slides]).astype(np.float16), np.concatenate([[0], np.cumsum(counts)]))


def _write_cohort(root, split_slides: dict) -> tuple:
    """slides.csv of every split's slides (files need not exist to read targets) and the card; returns the reader."""
    with open(root / "slides.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["slide_path", "split", "patient", "time", "event"])
        writer.writeheader()
        for split, (slides, targets) in split_slides.items():
            for number, (patient, _) in enumerate(slides):
                writer.writerow({"slide_path": f"{split}-s{number}.svs", "split": split, "patient": f"{split}-p{patient}",
                                 "time": targets[patient, 0], "event": int(targets[patient, 1])})
    (root / "card.yaml").write_text(CARD + f"data_root: {root}\n")
    return build_reader(load_card(str(root / "card.yaml")))


def _patient_split(reader, split: str, slides) -> tuple:
    reader.keep(split, [f"{split}-s{number}" for number in range(len(slides))])
    return PatientBags(_slide_bags(slides), reader.patient_of_slide(split)), reader.targets(split)


def test_the_reader_gives_one_target_and_one_cluster_per_patient_and_the_c_index_is_per_patient(tmp_path):
    """Reference: lifelines.utils.concordance_index on one (time, -risk, event) row per patient."""
    cohorts = {"train": _cohort(40, 0), "val": _cohort(20, 1), "test": _cohort(30, 2)}
    reader = _write_cohort(tmp_path, cohorts)
    data = {split: _patient_split(reader, split, slides) for split, (slides, _) in cohorts.items()}
    bags, targets = data["test"]
    test_slides, test_targets = cohorts["test"]
    first_seen = list(dict.fromkeys(p for p, _ in test_slides))
    assert len(test_slides) > 30 and len(bags) == len(targets) == 30 and reader.scored_unit == "patient"
    assert np.array_equal(targets, test_targets[first_seen])  # one row per patient, in order of first slide
    assert reader.groups("test") == [f"test-p{p}" for p in first_seen]  # each patient its own bootstrap cluster
    probe = MeanPoolProbe(0, cox_lr=[0.05], cox_weight_decay=[0.0, 0.1], cox_epochs=300)
    probe.fit(*data["train"], *data["val"], "c_index")
    risk = probe.predict_risk(bags)
    assert risk.shape == (30,)
    scored = survival_split_metrics(None, probe, bags, targets, with_intervals=True, groups=reader.groups("test"))
    reference = lifelines_c_index(targets[:, 0], -risk, targets[:, 1])
    assert scored["c_index"] == pytest.approx(reference, abs=1e-12)
    assert scored["c_index_ci"][0] <= scored["c_index"] <= scored["c_index_ci"][1]


def test_a_patients_bag_is_the_tiles_of_all_its_slides():
    slides, _ = _cohort(12, 3)
    bags = PatientBags(_slide_bags(slides), [p for p, _ in slides])
    assert len(bags) == 12 and bags.dim == DIM
    for patient in range(12):
        expected = np.concatenate([t for p, t in slides if p == patient]).astype(np.float16)
        assert np.array_equal(bags.bag(patient), expected) and bags.tile_counts[patient] == len(expected)
        assert np.array_equal(bags.bag_rows(patient, np.array([0, len(expected) - 1])), expected[[0, -1]])
    with pytest.raises(EvalsuiteError, match="one patient number"):
        PatientBags(_slide_bags(slides), [0] * (len(slides) - 1))


def _merged(slides, patients: int) -> SlideBags:
    """Each patient's slides joined into one slide, tiles in the same order: what a per-patient fit must equal."""
    return _slide_bags([(p, np.concatenate([t for q, t in slides if q == p])) for p in range(patients)])


@pytest.mark.parametrize("probe_cls, params", [
    (MeanPoolProbe, {"cox_lr": [0.05], "cox_weight_decay": [0.0, 0.1], "cox_epochs": 200}),
    (ABMILProbe, {"epochs": 4, "patience": None, "survival_batch_size": 16, "max_tiles_train": 10,
                  "warmup_epochs": 0}),
])
def test_both_probes_fit_and_score_one_row_per_patient(probe_cls, params):
    """A fit on patient bags equals a fit on a cache where each patient is one slide: one Cox row, one risk."""
    (train, train_y), (val, val_y), (test, _) = _cohort(40, 4), _cohort(20, 5), _cohort(30, 6)
    as_patients = [PatientBags(_slide_bags(s), [p for p, _ in s]) for s in (train, val, test)]
    as_slides = [_merged(s, n) for s, n in ((train, 40), (val, 20), (test, 30))]
    risks = []
    for train_bags, val_bags, test_bags in (as_patients, as_slides):
        probe = probe_cls(0, seed=1, **params).fit(train_bags, train_y, val_bags, val_y, "c_index")
        risks.append(probe.predict_risk(test_bags))
    assert risks[0].shape == (30,) and np.array_equal(risks[0], risks[1])


def _per_patient_frame(bags, targets) -> pd.DataFrame:
    vectors = np.stack([bags.bag(i).mean(axis=0, dtype=np.float32).astype(np.float16) for i in range(len(bags))])
    frame = pd.DataFrame(vectors.astype(np.float64), columns=[f"x{d}" for d in range(DIM)])
    return frame.assign(T=targets[:, 0], E=targets[:, 1])


def test_the_cox_head_has_one_row_per_patient_as_lifelines_on_patients():
    """Reference: lifelines CoxPHFitter on the patients' tile-mean vectors (one row each); the fit on slide rows
    (a patient repeated once per slide) is a different model."""
    slides, targets = _cohort(60, 7)
    bags = PatientBags(_slide_bags(slides), [p for p, _ in slides])
    frame = _per_patient_frame(bags, targets)
    reference = CoxPHFitter().fit(frame, "T", "E").params_.values
    probe = MeanPoolProbe(0, cox_lr=[0.05], cox_weight_decay=[0.0], cox_epochs=600).fit(bags, targets, bags, targets,
                                                                                        "c_index")
    assert probe.cox_weight_.numpy() == pytest.approx(reference, abs=1e-2)
    per_slide = pd.concat([frame.iloc[[p]] for p, _ in slides])
    assert not np.allclose(CoxPHFitter().fit(per_slide, "T", "E").params_.values, reference, atol=1e-2)


def _scaled_cohort(n: int = 200, seed: int = 0):
    """Dimensions on scales 0.05, 1 and 20 with offsets; hazards exp(0.8 a - 0.5 b + 0.4 c) of the unit-scale
    values; continuous times (no ties, where lifelines' Efron = our Breslow)."""
    rng = np.random.default_rng(seed)
    unit = rng.normal(size=(n, 3))
    vectors = (unit * np.array([0.05, 1.0, 20.0]) + np.array([3.0, -1.0, 50.0])).astype(np.float16)
    event_time = rng.exponential(1 / np.exp(unit @ np.array([0.8, -0.5, 0.4])))
    censor_time = rng.exponential(2.0, size=n)
    targets = np.stack([np.minimum(event_time, censor_time), (event_time <= censor_time).astype(float)], axis=1)
    return vectors, targets


def test_the_meanpool_cox_penalty_is_relative_to_the_train_scale():
    """Reference: lifelines CoxPHFitter(penalizer = wd * events / patients), which standardises each column on the
    data (sd, ddof 1) before its L2 penalty; our head minimises the mean Cox loss over events + wd/2 ||w||^2 on the
    same standardised vectors, the same optimum. Scaling every feature by 16 changes nothing."""
    vectors, targets = _scaled_cohort()
    wd = 0.1
    frame = pd.DataFrame(vectors.astype(np.float64), columns=["a", "b", "c"]).assign(T=targets[:, 0], E=targets[:, 1])
    penalizer = wd * targets[:, 1].sum() / len(targets)
    reference = CoxPHFitter(penalizer=penalizer).fit(frame, "T", "E").params_.values
    fitted = []
    for scale in (1.0, 16.0):
        bags = SlideBags((vectors.astype(np.float32) * scale).astype(np.float16), np.arange(len(vectors) + 1))
        probe = MeanPoolProbe(0, cox_lr=[0.01], cox_weight_decay=[0.0, wd], cox_epochs=500)
        probe.fit(bags, targets, bags, targets, "c_index")
        single = MeanPoolProbe(0, cox_lr=[0.01], cox_weight_decay=[wd], cox_epochs=500).fit(bags, targets, bags,
                                                                                           targets, "c_index")
        assert single.cox_weight_.numpy() * scale == pytest.approx(reference, rel=1e-3)
        fitted.append((probe.selected_params_, survival_split_metrics(None, probe, bags, targets)["c_index"]))
    assert fitted[0] == fitted[1]  # the same head chosen and the same c-index whatever the feature scale
