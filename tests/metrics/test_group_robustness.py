"""The PathoROB robustness index (evalsuite.metrics.group_robustness) against a worked example and scikit-learn."""

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.group_robustness import (
    group_robustness,
    index_draws,
    nearest_neighbours,
    pair_counts,
    robustness_index,
)
from evalsuite.metrics.shown_intervals import shown_interval

# Worked example: four unit vectors at these angles; cosine order = angle order.
#   item  angle  class  site
#   0      0 deg   0     A
#   1     10 deg   0     B
#   2     25 deg   1     A
#   3     90 deg   1     B
# k=1: 0->1 SO, 1->0 SO, 2->1 OO, 3->2 SO                        SO 3, OS 0 -> 1.0
# k=2: 0->1,2 SO+OS; 1->0,2 SO+OO; 2->1,0 OO+OS; 3->2,1 SO+OS     SO 3, OS 3 -> 0.5
# k=1, items 0 and 1 one patient (never each other's neighbours):
#      0->2 OS, 1->2 OO, 2->3? no: 2->1 OO (15 deg < 65 deg), 3->2 SO  SO 1, OS 1 -> 0.5
ANGLES_DEG = np.array([0.0, 10.0, 25.0, 90.0])
WORKED = np.stack([np.cos(np.radians(ANGLES_DEG)), np.sin(np.radians(ANGLES_DEG))], axis=1)
WORKED_CLASSES = np.array([0, 0, 1, 1])
WORKED_SITES = np.array(["A", "B", "A", "B"])


@pytest.mark.parametrize("k, expected", [(1, 1.0), (2, 0.5)])
def test_worked_example_by_hand(k, expected):
    assert robustness_index(WORKED, WORKED_CLASSES, WORKED_SITES, k) == pytest.approx(expected)


def test_worked_example_counts_and_patient_exclusion():
    same_other, other_same = pair_counts(WORKED, WORKED_CLASSES, WORKED_SITES, 2)
    assert same_other.tolist() == [1, 1, 0, 1] and other_same.tolist() == [1, 0, 1, 1]
    patients = ["p1", "p1", "p2", "p3"]
    assert robustness_index(WORKED, WORKED_CLASSES, WORKED_SITES, 1, exclude=patients) == pytest.approx(0.5)


def _reference(features, labels, groups, k, exclude=None):
    """scikit-learn cosine kNN over all items, then each query's own cluster dropped and SO / OS counted by hand."""
    items = len(features)
    clusters = np.arange(items) if exclude is None else np.asarray(exclude)
    order = NearestNeighbors(n_neighbors=items, metric="cosine", algorithm="brute").fit(features) \
        .kneighbors(features, return_distance=False)
    same_other = other_same = 0
    for query in range(items):
        kept = [j for j in order[query] if clusters[j] != clusters[query]][:k]
        for j in kept:
            same_class, same_group = labels[j] == labels[query], groups[j] == groups[query]
            same_other += int(same_class and not same_group)
            other_same += int(not same_class and same_group)
    return same_other / (same_other + other_same)


def _cohort(seed=0, items=60, dims=16):
    """Features mixing a class signal and a site signal, 3 classes x 3 sites, 20 patients."""
    rng = np.random.default_rng(seed)
    labels, sites = rng.integers(0, 3, items), rng.integers(0, 3, items)
    centres_class, centres_site = rng.normal(size=(3, dims)), rng.normal(size=(3, dims))
    features = centres_class[labels] + 0.8 * centres_site[sites] + rng.normal(size=(items, dims))
    patients = rng.integers(0, 20, items)
    return features.astype(np.float32), labels, np.array([f"site{s}" for s in sites]), patients


@pytest.mark.parametrize("k", [1, 5, 17])
def test_matches_scikit_learn_in_small_batches(k):
    features, labels, sites, _ = _cohort()
    ours = robustness_index(features, labels, sites, k, batch_size=7, database_batch_size=5)
    assert ours == pytest.approx(_reference(features, labels, sites, k), abs=1e-12)
    assert 0 < ours < 1


def test_matches_scikit_learn_with_patients_excluded():
    features, labels, sites, patients = _cohort(seed=1)
    ours = robustness_index(features, labels, sites, 9, exclude=patients, batch_size=8, database_batch_size=11)
    assert ours == pytest.approx(_reference(features, labels, sites, 9, exclude=patients), abs=1e-12)
    # Excluding patients changes the neighbour lists, so the test above checks the exclusion, not a no-op.
    assert ours != pytest.approx(robustness_index(features, labels, sites, 9))


def test_float16_memmap_equals_float32(tmp_path):
    features, labels, sites, _ = _cohort(seed=2)
    mapped = np.lib.format.open_memmap(tmp_path / "f.npy", mode="w+", dtype=np.float16, shape=features.shape)
    mapped[:] = features
    mapped.flush()
    mapped = np.load(tmp_path / "f.npy", mmap_mode="r")
    upcast = np.asarray(mapped, dtype=np.float32)
    np.testing.assert_array_equal(pair_counts(mapped, labels, sites, 7, batch_size=16),
                                  pair_counts(upcast, labels, sites, 7))
    assert robustness_index(mapped, labels, sites, 7, batch_size=16) == robustness_index(upcast, labels, sites, 7)


def test_ties_go_to_the_lower_index():
    features = np.ones((6, 3), dtype=np.float32)
    neighbours = nearest_neighbours(features, 3, np.arange(6), batch_size=2, database_batch_size=4)
    assert neighbours[0].tolist() == [1, 2, 3] and neighbours[5].tolist() == [0, 1, 2]


def test_one_group_one_class_or_no_counted_pair_is_nan():
    features, labels, sites, _ = _cohort(seed=3)
    assert np.isnan(robustness_index(features, labels, np.full(len(labels), "A"), 3))  # SO would be 0: not 0.0
    assert np.isnan(robustness_index(features, np.zeros(len(labels), int), sites, 3))  # OS would be 0: not 1.0
    # Site and class the same partition: every neighbour is SS or OO, so SO + OS = 0.
    assert np.isnan(robustness_index(features, labels, labels.astype(str), 3))
    result = group_robustness(features, labels, np.full(len(labels), "A"), 3)
    assert np.isnan(result["robustness_index"]) and np.isnan(result["robustness_index_ci"]).all()


@pytest.mark.parametrize("k", [0, 4, 2.0, True])
def test_k_out_of_range_is_one_line_error(k):
    with pytest.raises(EvalsuiteError) as error:
        robustness_index(WORKED, WORKED_CLASSES, WORKED_SITES, k)
    assert "k=" in str(error.value) and "\n" not in str(error.value)


def test_k_counts_only_items_outside_the_patient():
    # Items 0 and 1 share a patient: each has 2 eligible neighbours, so k=3 is refused though N-1 = 3.
    with pytest.raises(EvalsuiteError, match="from 1 to 2"):
        robustness_index(WORKED, WORKED_CLASSES, WORKED_SITES, 3, exclude=["p", "p", "q", "r"])


def test_bootstrap_draws_are_the_weighted_ratio_of_resampled_queries():
    features, labels, sites, patients = _cohort(seed=4)
    same_other, other_same = pair_counts(features, labels, sites, 5)
    drawn = index_draws(same_other, other_same, seed=3)
    # Reference: resample query indices with the same generator and recompute the ratio of sums.
    rng, values = np.random.default_rng(3), []
    for _ in range(1000):
        picked = rng.integers(0, len(labels), size=len(labels))
        values.append(same_other[picked].sum() / (same_other[picked].sum() + other_same[picked].sum()))
    assert drawn == pytest.approx(values)
    value = robustness_index(features, labels, sites, 5)
    low, high = np.percentile(values, [2.5, 97.5])
    assert low < value < high
    items = group_robustness(features, labels, sites, 5, seed=3)
    # Each query its own cluster: the shown interval is the draws' percentile interval read for that many clusters.
    shown = shown_interval(value, np.array(values), len(labels), "robustness_index").bounds
    assert items["robustness_index"] == value and items["robustness_index_ci"] == pytest.approx(shown, abs=1e-12)
    by_patient = group_robustness(features, labels, sites, 5, clusters=patients, seed=3)
    assert by_patient["robustness_index"] == value and by_patient["robustness_index_ci"] != pytest.approx((low, high))
    assert len(index_draws(same_other, other_same, clusters=np.zeros(len(labels)))) == 0


def test_usable_k_lowers_k_to_the_fewest_neighbours_outside_an_items_cluster():
    from evalsuite.metrics.group_robustness import usable_k

    assert usable_k(11, 100) == 11
    assert usable_k(11, 8) == 7  # each of 8 items has 7 others
    assert usable_k(11, 8, exclude=["a"] * 5 + ["b"] * 3) == 3  # patient a's items have 3 others
    # Issue 24: was "k=1 must be an integer from 1 to 0", which sends the user to lower k.
    with pytest.raises(EvalsuiteError, match="all 4 items come from one patient/slide, so none has a neighbour"):
        usable_k(11, 4, exclude=["a"] * 4)
