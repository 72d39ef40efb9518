"""Quadratic weighted kappa of ordinal cards: equal to scikit-learn's, its bootstrap interval from the same weighted
draws as the other metrics, reported only for cards with `ordinal: true`, tested by `leaderboard --compare`."""

import csv
import io

import numpy as np
import pytest
import yaml
from conftest import leaderboard_rows, run_cli
from sklearn.metrics import cohen_kappa_score

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.classification import classification_split_metrics
from evalsuite.metrics.few_clusters import widened
from evalsuite.metrics.intervals import bootstrap_intervals
from evalsuite.metrics.significance import has_item_form, higher_is_better, paired_bootstrap
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.resources import cards_dir

GRADES = 6


def _graded(items: int, seed: int, noise: float = 1.2):
    """ISUP-like grades and probabilities peaked near the true grade (off by one or two grades at times)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, GRADES, size=items)
    centre = np.clip(np.round(y + rng.normal(0, noise, size=items)), 0, GRADES - 1)
    logits = -((np.arange(GRADES)[None, :] - centre[:, None]) ** 2) + rng.normal(0, 0.1, size=(items, GRADES))
    proba = np.exp(logits)
    return y, proba / proba.sum(1, keepdims=True)


class _Fixed:
    """A fitted probe that returns given probabilities (the scorer's public input)."""

    def __init__(self, proba):
        self.proba = proba

    def predict_proba(self, _features):
        return self.proba


class _Card:
    def __init__(self, ordinal: bool):
        self.ordinal = ordinal


def test_kappa_equals_scikit_learn_quadratic_cohen_kappa():
    y, proba = _graded(200, seed=0)
    reference = cohen_kappa_score(y, proba.argmax(1), weights="quadratic")
    scored = classification_split_metrics(_Card(True), _Fixed(proba), None, y)
    assert 0.3 < reference < 0.95  # a probe that is right in grade order but not perfect
    assert scored["quadratic_kappa"] == pytest.approx(reference, abs=1e-12)


def test_a_grade_absent_from_truth_and_prediction_keeps_the_grade_distances():
    # Grades 1 and 3 never occur: scikit-learn's default would put 0, 2, 4, 5 at distances 0, 1, 2, 3.
    y = np.array([0, 0, 2, 2, 4, 4, 5, 5, 0, 5])
    predicted = np.array([0, 2, 2, 4, 4, 5, 5, 4, 0, 2])
    proba = np.eye(GRADES)[predicted]
    scored = classification_split_metrics(_Card(True), _Fixed(proba), None, y)["quadratic_kappa"]
    with_distances = cohen_kappa_score(y, predicted, weights="quadratic", labels=np.arange(GRADES))
    compressed = cohen_kappa_score(y, predicted, weights="quadratic")
    assert scored == pytest.approx(with_distances, abs=1e-12)
    assert abs(with_distances - compressed) > 0.01


# scikit-learn warns on the one-class split scored directly here; a run refuses such a split before its probes.
@pytest.mark.filterwarnings("ignore:A single label was found")
def test_kappa_is_reported_only_for_ordinal_cards_and_a_single_class_split_is_nan():
    y, proba = _graded(60, seed=1)
    assert "quadratic_kappa" not in classification_split_metrics(_Card(False), _Fixed(proba), None, y)
    assert "quadratic_kappa" not in classification_split_metrics(None, _Fixed(proba), None, y)
    one_class = classification_split_metrics(_Card(True), _Fixed(np.eye(GRADES)[np.full(5, 3)]), None, np.full(5, 3))
    assert np.isnan(one_class["quadratic_kappa"])  # no disagreement is expected by chance: kappa is undefined


def test_kappa_interval_is_the_cluster_bootstrap_of_scikit_learn_kappa_with_draw_weights():
    y, proba = _graded(90, seed=2)
    slides = np.arange(90) // 3  # three items per slide: a cluster bootstrap over 30 slides
    scored = classification_split_metrics(_Card(True), _Fixed(proba), None, y, with_intervals=True, groups=slides,
                                          seed=7)
    # The reference: the same draws written out (1000 draws of 30 slides with replacement from default_rng(seed),
    # each item weighted by how often its slide was drawn), each scored by scikit-learn, then read for 30 clusters
    # (few_clusters.widened) and their 2.5 and 97.5 percentiles.
    rng = np.random.default_rng(7)
    values = []
    for _ in range(1000):
        drawn = np.bincount(rng.integers(0, 30, size=30), minlength=30)
        values.append(cohen_kappa_score(y, proba.argmax(1), weights="quadratic", labels=np.arange(GRADES),
                                        sample_weight=drawn[slides].astype(float)))
    low, high = scored["quadratic_kappa_ci"]
    observed = cohen_kappa_score(y, proba.argmax(1), weights="quadratic", labels=np.arange(GRADES))
    reference = np.nanpercentile(widened(np.array(values), observed, 30), [2.5, 97.5])
    assert (low, high) == pytest.approx(tuple(reference), abs=1e-12)
    assert low < scored["quadratic_kappa"] < high
    assert set(bootstrap_intervals(y, proba, groups=slides, ordinal=True)) - set(bootstrap_intervals(y, proba)) \
        == {"quadratic_kappa"}


def test_compare_tests_kappa_higher_is_better():
    y, proba = _graded(120, seed=3)
    blurred = 0.5 * proba + 0.5 / GRADES  # same ranking, flatter: same kappa
    worse = np.roll(proba, 2, axis=1)  # grades predicted two too high (mod 6): far worse kappa
    assert has_item_form("quadratic_kappa") and higher_is_better("quadratic_kappa")
    same = paired_bootstrap(y, [proba], [blurred], "quadratic_kappa", draws=200)
    better = paired_bootstrap(y, [proba], [worse], "quadratic_kappa", draws=200)
    assert same.difference == 0 and same.p_value == 1
    reference = (cohen_kappa_score(y, proba.argmax(1), weights="quadratic")
                 - cohen_kappa_score(y, worse.argmax(1), weights="quadratic"))
    assert better.difference == pytest.approx(reference, abs=1e-12) and better.p_value < 0.05


def test_the_panda_cards_are_ordinal_and_demo_is_not():
    assert load_card("panda").ordinal and load_card("panda_small").ordinal
    assert not load_card("demo").ordinal


@pytest.mark.parametrize("kind_lines, value, message", [
    ("kind: slide\nreader: {name: slide_csv}\nclasses: [a, b]\nselection_metric: balanced_accuracy\n", "grades",
     "field 'ordinal' must be bool"),
    ("kind: survival\nreader: {name: slide_csv}\nselection_metric: c_index\n", "true",
     "field 'ordinal' applies to classification and slide cards only"),
    ("kind: segmentation\nreader: {name: pannuke}\nclasses: [background, a]\nselection_metric: dice_fg_mean\n", "true",
     "field 'ordinal' applies to classification and slide cards only"),
])
def test_a_bad_ordinal_field_is_a_one_line_error_naming_the_card(tmp_path, kind_lines, value, message):
    path = tmp_path / "card.yaml"
    path.write_text(f"name: c\n{kind_lines}splits: [train, val, test]\nprobes: [linear]\nordinal: {value}\n")
    with pytest.raises(EvalsuiteError, match=message) as caught:
        load_card(str(path))
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


@pytest.mark.slow
def test_an_ordinal_card_puts_kappa_with_its_interval_on_the_leaderboard(tmp_path):
    card = yaml.safe_load((cards_dir() / "demo.yaml").read_text())
    card.update(name="demo_ordinal", ordinal=True)  # the demo's three classes taken as grades, for the plumbing
    path = tmp_path / "demo_ordinal.yaml"
    path.write_text(yaml.safe_dump(card))
    out = tmp_path / "out"
    result = run_cli("run", "--task", path, "--model", "test_vit", "--random-init", "--probes", "linear",
                     "--num-workers", "0", "--out", out)
    assert result.returncode == 0, result.stderr
    kappa = {row["split"]: row for row in leaderboard_rows(out) if row["metric"] == "quadratic_kappa"}
    assert set(kappa) == {"train", "val", "test"}
    test = kappa["test"]
    assert float(test["ci_low"]) <= float(test["value"]) <= float(test["ci_high"])
    assert test["headline_metric"] == "balanced_accuracy"  # kappa is reported beside the headline, not instead
    table = run_cli("leaderboard", "--out", out, "--metric", "quadratic_kappa", "--format", "csv")
    assert table.returncode == 0, table.stderr
    (wide,) = csv.DictReader(io.StringIO(table.stdout))  # one model, one seed: its cell is the test row's value
    assert wide["demo_ordinal_metric"] == "quadratic_kappa" and wide["demo_ordinal"] == test["value"]
