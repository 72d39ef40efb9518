"""Every metric a probe, a scorer or a run column can put in the leaderboard has a declared direction
(evalsuite/metrics/directions.py), and `leaderboard --metric M` ranks models and picks each model's probe on val by
it. Issue 40: `--metric mse` put the model with the larger error first and kept the probe with the largest val MSE.

The names are collected by running the code that emits them on tiny inputs (scorers of every task kind, the
few-shot and retrieval probes, the robustness rows), so a metric added there without a direction fails here."""

import csv
import io
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from evalsuite import cli
from evalsuite.reporting.table.wide import RUN_COLUMN_METRICS
from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows

RNG = np.random.default_rng(0)
LABELS = np.tile([0, 1, 2], 12)
SERIES = ("_ci", "_draws")  # a scorer's interval and draws of a metric: never leaderboard rows


def _classification() -> set:
    from evalsuite.metrics.classification import classification_split_metrics

    probe = SimpleNamespace(predict_proba=lambda x: RNG.dirichlet(np.ones(3), size=len(LABELS)))
    return set(classification_split_metrics(SimpleNamespace(ordinal=True), probe, None, LABELS, with_intervals=True))


def _regression() -> set:
    from evalsuite.metrics.regression import ITEM_PREDICTIONS, regression_split_metrics

    targets = np.stack([RNG.normal(size=20), np.ones(20)], axis=1)  # a constant target: the *_undefined_targets
    probe = SimpleNamespace(predict=lambda x: targets + RNG.normal(size=targets.shape))
    card = SimpleNamespace(name="t", targets=["a", "b"])
    return set(regression_split_metrics(card, probe, None, targets, with_intervals=True)) - {ITEM_PREDICTIONS}


def _cross_validated() -> set:
    """A cross-validated task's test rows: each metric's mean over folds and its `_fold_std`."""
    from evalsuite.results.folds import merge_folds

    metrics = {"mse": 0.5, "pearson": 0.3, "pearson_undefined_targets": 1}
    fold = {"probe": "ridge", "seed": 0, "selected_params": {},
            "metrics": {split: metrics for split in ("train", "val", "test")}}
    return set(merge_folds([[fold], [fold]])[0]["metrics"]["test"])


def _survival() -> set:
    from evalsuite.metrics.survival import survival_split_metrics

    targets = np.stack([np.arange(1.0, 11.0), np.tile([0.0, 1.0], 5)], axis=1)
    probe = SimpleNamespace(predict_risk=lambda x: RNG.normal(size=10))
    return set(survival_split_metrics(None, probe, None, targets, with_intervals=True))


def _segmentation() -> set:
    from evalsuite.metrics.segmentation import IMAGE_CONFUSIONS, segmentation_split_metrics

    per_image = RNG.integers(1, 9, size=(4, 3, 3))
    probe = SimpleNamespace(image_confusions=lambda x, y: per_image)
    card = SimpleNamespace(classes=["background", "tumour", "stroma"], path="card.yaml")
    return set(segmentation_split_metrics(card, probe, None, None, with_intervals=True)) - {IMAGE_CONFUSIONS}


def _split_scoring_probes() -> set:
    from evalsuite.probes.pooled.fewshot import FewShotProbe
    from evalsuite.probes.pooled.retrieval import RetrievalProbe

    features = RNG.normal(size=(len(LABELS), 4)).astype(np.float32)
    splits = {"train": (features, LABELS), "test": (features, LABELS)}
    fewshot = FewShotProbe(3, shots=(1, 2), support_sets=2).evaluate(splits)
    retrieval = RetrievalProbe(3, ks=(1, 3)).evaluate(splits)
    return {*fewshot[0], *fewshot[1], *retrieval[0], *retrieval[1], *_text_retrieval(splits)}


def _text_retrieval(splits: dict) -> set:
    from evalsuite.probes.texts.retrieval_texts import RetrievalTexts
    from evalsuite.probes.texts.text_retrieval import CAPTIONS, CLASS_TEXTS, TextRetrievalProbe

    names = set()
    for source, texts in ((CLASS_TEXTS, 3), (CAPTIONS, len(LABELS))):
        embeddings = RetrievalTexts(RNG.normal(size=(texts, 4)).astype(np.float32), source, {})
        means, intervals = TextRetrievalProbe(3, ks=(1, 2), texts=embeddings).evaluate(splits)
        names |= {*means, *intervals}
    return names


def _robustness_rows() -> set:
    from evalsuite.metrics.group_robustness import METRIC as GROUP_METRIC
    from evalsuite.robustness.invariance import invariance_result
    from evalsuite.robustness.perturbations import PERTURBATIONS
    from evalsuite.tasks.kinds import KINDS

    recipe = SimpleNamespace(params={}, path="knn.yaml", sha256="")
    probe = SimpleNamespace(selected_params_={})
    scores = {name: {"cosine": {"mean": 0.9, "median": 0.9}, "delta": -0.1} for name in PERTURBATIONS}
    headlines = {metric for kind in KINDS.values() for metric in kind.selection_metrics}
    rows = {name for headline in headlines
            for name in invariance_result(recipe, probe, 0, headline, scores)["metrics"]["test"]}
    return rows | {GROUP_METRIC}


def emitted_metrics() -> set:
    """Every metric name the scorers, probes and run columns emit, with the scorers' _ci and _draws series."""
    return (_classification() | _regression() | _cross_validated() | _survival() | _segmentation()
            | _split_scoring_probes() | _robustness_rows() | set(RUN_COLUMN_METRICS))


EMITTED = sorted(emitted_metrics())
ROW_METRICS = [m for m in EMITTED if not m.endswith(SERIES)]


def test_the_collection_reaches_every_family():
    for name in ("mse", "ece", "c_index", "dice_tumour", "retrieval_map@3", "nll_2shot", "cosine_median_jpeg",
                 "c_index_delta_blur", "pearson_undefined_targets", "robustness_index", "throughput_img_s",
                 "quadratic_kappa", "iou_fg_mean_draws", "mse_fold_std"):
        assert name in EMITTED, name


def test_every_emitted_metric_has_a_declared_direction():
    from evalsuite.metrics.directions import direction

    assert [m for m in EMITTED if direction(m) is None] == []


@pytest.mark.parametrize("metric, higher", [("mse", False), ("nll_4shot", False), ("ece_draws", False),
                                            ("pearson_ci", True), ("dice_mean", True), ("dice_ci", True),
                                            ("brier_delta_jpeg", False), ("r2_undefined_targets", False),
                                            ("dice_mean_fold_std", False)])
def test_names_made_from_a_metric_take_its_direction(metric, higher):
    from evalsuite.metrics.directions import higher_is_better

    assert higher_is_better(metric) is higher


def test_an_undeclared_metric_is_refused_not_ranked_as_higher_is_better():
    from evalsuite.errors import EvalsuiteError
    from evalsuite.metrics.directions import higher_is_better

    with pytest.raises(EvalsuiteError, match="metric 'wobble' has no declared direction"):
        higher_is_better("wobble")


def _value(quality: float, higher: bool) -> float:
    """A value of the metric that is better the larger `quality` is, in the metric's own direction."""
    return 0.5 + (0.4 if higher else -0.4) * quality


# (model, probe) -> (val quality, test quality): each model's best probe on val is p_val; p_test is better on test
# only, so a probe chosen in the wrong direction shows up; good beats bad on test with either probe.
QUALITY = {("good", "p_val"): (0.9, 0.8), ("good", "p_test"): (0.2, 0.95),
           ("bad", "p_val"): (0.5, 0.1), ("bad", "p_test"): (0.1, 0.3)}


def _board(out, metrics: list, higher: dict) -> None:
    rows = []
    for (model, probe), qualities in QUALITY.items():
        run_id = f"{model}-{probe}"
        throughput = 300.0 if model == "good" else 100.0
        for split, quality in zip(("val", "test"), qualities):
            rows += [{"run_id": run_id, "timestamp_utc": "2026-01-02T00:00:00+00:00", "task": "t", "model": model,
                      "weights_id": "w", "probe": probe, "selected_params": "{}", "split": split, "metric": metric,
                      "value": f"{_value(quality, higher[metric]):.6f}", "seed": 0, "n_samples": 36,
                      "headline_metric": "balanced_accuracy", "throughput_img_s": f"{throughput:.6f}",
                      "forward_img_s": f"{throughput:.6f}"} for metric in metrics]
    append_rows(out / LEADERBOARD_FILE, rows)


def board_cli(capsys, *args) -> subprocess.CompletedProcess:
    capsys.readouterr()
    code = cli.main(["leaderboard", *map(str, args)])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def _wide(result) -> dict:
    assert result.returncode == 0, result.stderr
    return {row["model"]: row for row in csv.DictReader(io.StringIO(result.stdout))}


def test_mse_ranks_the_smaller_error_first_and_keeps_the_probe_with_the_smallest_val_mse(capsys, tmp_path):
    """Issue 40: the model with the larger MSE came first, with its probe of largest val MSE."""
    _board(tmp_path, ["mse", "pearson"], {"mse": False, "pearson": True})
    wide = _wide(board_cli(capsys, "--out", tmp_path, "--metric", "mse", "--format", "csv"))
    assert (wide["good"]["t_rank"], wide["good"]["t_probe"]) == ("1", "p_val")
    assert float(wide["good"]["t"]) == pytest.approx(_value(0.8, higher=False))
    assert (wide["bad"]["t_rank"], wide["bad"]["t_probe"]) == ("2", "p_val")
    with open(tmp_path / "leaderboard_wide.csv", newline="") as handle:
        assert [row["model"] for row in csv.DictReader(handle)] == ["good", "bad"]


def test_leaderboard_ranks_and_chooses_probes_by_the_declared_direction_of_every_metric(capsys, tmp_path):
    from evalsuite.metrics.directions import higher_is_better

    scored = [m for m in ROW_METRICS if m not in RUN_COLUMN_METRICS]
    _board(tmp_path, scored + ["balanced_accuracy"] * ("balanced_accuracy" not in scored),
           {m: higher_is_better(m) for m in ROW_METRICS})
    wrong = {}
    for metric in ROW_METRICS:
        wide = _wide(board_cli(capsys, "--out", tmp_path, "--metric", metric, "--format", "csv"))
        shown = {model: (wide[model]["t_rank"], wide[model]["t_probe"]) for model in ("good", "bad")}
        if shown != {"good": ("1", "p_val"), "bad": ("2", "p_val")}:
            wrong[metric] = shown
    assert wrong == {}
