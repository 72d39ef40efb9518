"""Retrieval probe: acc@k, majority-vote acc@k and mAP@k (Patho-Bench's definitions) against worked examples and
scikit-learn; bounded float16 reads; deterministic ties; the query bootstrap; the CLI's leaderboard rows."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import RecordingFeatures, library_warnings, noisy_class_split, run_cli
from sklearn.metrics import accuracy_score, average_precision_score
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS
from evalsuite.metrics.retrieval import per_query_scores, retrieval_draws, retrieval_metrics
from evalsuite.probes import PROBES, RetrievalProbe
from evalsuite.storage.npy_rows import NpyRows

# Worked by hand. Query label, then the labels of its 3 nearest, nearest first.
WORKED_QUERIES = np.array([0, 1, 2, 1])
WORKED_NEIGHBOURS = np.array([
    [0, 1, 0],  # hit at 1: acc@1 1; mode 0: mv@3 1; AP@3 = (1/1 + 2/3) / 3 = 5/9
    [0, 1, 1],  # miss at 1: acc@1 0, acc@3 1; mode 1: mv@3 1; AP@3 = (1/2 + 2/3) / 3 = 7/18
    [0, 1, 0],  # no hit: 0 everywhere
    [1, 0, 2],  # hit at 1; three tied modes, its label among them: mv@3 1; AP@3 = (1/1) / 3 = 1/3
])
WORKED_MEANS = {
    "retrieval_acc@1": 2 / 4, "retrieval_acc@3": 3 / 4,
    "retrieval_mvacc@1": 2 / 4, "retrieval_mvacc@3": 3 / 4,
    "retrieval_map@1": 2 / 4, "retrieval_map@3": (5 / 9 + 7 / 18 + 0 + 1 / 3) / 4,  # = 23/72
}


def test_worked_example():
    assert retrieval_metrics(WORKED_NEIGHBOURS, WORKED_QUERIES, [1, 3]) == pytest.approx(WORKED_MEANS, abs=1e-12)


def test_map_is_scikit_learn_average_precision_times_hits_over_k():
    """Patho-Bench divides the summed precision at each hit by k; scikit-learn's AP divides it by the hits."""
    rng = np.random.default_rng(0)
    queries = rng.integers(0, 3, size=200)
    neighbours = rng.integers(0, 3, size=(200, 10))
    for k in (1, 3, 5, 10):
        ours = per_query_scores(neighbours, queries, [k])[f"retrieval_map@{k}"]
        for q in range(200):
            hits = neighbours[q, :k] == queries[q]
            if not hits.any():
                assert ours[q] == 0
            elif k == 1:  # scikit-learn needs two ranks; one hit at rank 1 is AP 1
                assert ours[q] == 1
            else:
                reference = average_precision_score(hits, np.arange(k, 0, -1)) * hits.sum() / k
                assert ours[q] == pytest.approx(reference, abs=1e-12)


def test_acc_and_majority_vote_match_a_direct_count():
    rng = np.random.default_rng(1)
    queries = rng.integers(0, 4, size=300)
    neighbours = rng.integers(0, 4, size=(300, 7))
    for k in (1, 2, 5, 7):
        scores = per_query_scores(neighbours, queries, [k])
        any_hit = [queries[q] in neighbours[q, :k] for q in range(300)]
        modes = [Counter(neighbours[q, :k].tolist()) for q in range(300)]
        in_modes = [modes[q][queries[q]] == max(modes[q].values()) for q in range(300)]
        assert np.array_equal(scores[f"retrieval_acc@{k}"], any_hit)
        assert np.array_equal(scores[f"retrieval_mvacc@{k}"], in_modes)


def test_degenerate_cases():
    one_class = per_query_scores(np.zeros((5, 4), dtype=int), np.zeros(5, dtype=int), [1, 4])
    assert all(np.all(v == 1.0) for v in one_class.values())
    never_relevant = per_query_scores(np.zeros((5, 4), dtype=int), np.full(5, 2), [1, 4])
    assert all(np.all(v == 0.0) for v in never_relevant.values())
    with pytest.raises(ValueError, match="at most the 4 neighbours"):
        per_query_scores(np.zeros((5, 4), dtype=int), np.zeros(5, dtype=int), [5])
    with pytest.raises(ValueError, match=">= 1"):
        per_query_scores(np.zeros((5, 4), dtype=int), np.zeros(5, dtype=int), [0])


def _split(seed: int = 0, per_class: int = 40, classes: int = 3, dim: int = 16) -> dict:
    return noisy_class_split(classes=classes, per_class=per_class, dim=dim, seed=seed)


def test_probe_neighbours_are_scikit_learn_cosine_neighbours_and_the_metrics_follow():
    split = _split()
    (train_x, train_y), (test_x, test_y) = split["train"], split["test"]
    probe = RetrievalProbe(3, ks=[1, 3, 5], batch_size=7, database_batch_size=11)
    ours = probe.neighbours(train_x, test_x, 5)
    reference = NearestNeighbors(n_neighbors=5, metric="cosine", algorithm="brute").fit(
        train_x.astype(np.float64)).kneighbors(test_x.astype(np.float64), return_distance=False)
    assert np.array_equal(ours, reference)
    means, _ = probe.evaluate(split)
    assert means == pytest.approx(retrieval_metrics(train_y[reference], test_y, [1, 3, 5]), abs=1e-12)


def test_majority_vote_accuracy_is_scikit_learn_knn_accuracy_when_no_vote_ties():
    """Two classes and odd k: no vote can tie, so Patho-Bench's and THUNDER's majority vote agree with kNN."""
    split = _split(classes=2, per_class=60)
    (train_x, train_y), (test_x, test_y) = split["train"], split["test"]
    means, _ = RetrievalProbe(2, ks=[1, 3, 5], batch_size=16, database_batch_size=16).evaluate(split)
    for k in (1, 3, 5):
        knn = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute").fit(
            train_x.astype(np.float64), train_y)
        assert means[f"retrieval_mvacc@{k}"] == pytest.approx(
            accuracy_score(test_y, knn.predict(test_x.astype(np.float64))), abs=1e-12)


def test_probe_degenerate_cases():
    split = _split(per_class=10)
    one_class = {name: (x, np.zeros_like(y)) for name, (x, y) in split.items()}
    means, _ = RetrievalProbe(3, ks=[1, 5]).evaluate(one_class)
    assert all(value == 1.0 for value in means.values())
    test_x, test_y = split["test"]
    train_x, train_y = split["train"]
    unseen = {"train": (train_x, np.zeros_like(train_y)), "test": (test_x, np.full_like(test_y, 2))}
    means, _ = RetrievalProbe(3, ks=[1, 5]).evaluate(unseen)
    assert all(value == 0.0 for value in means.values())
    with pytest.raises(EvalsuiteError, match=f"k=16 is more than the {len(train_y)} train samples"):
        RetrievalProbe(3, ks=[1, 16]).evaluate(split)
    with pytest.raises(EvalsuiteError, match="ks"):
        RetrievalProbe(3, ks=[0, 1])


@pytest.mark.parametrize("database_batch_size", [1, 2, 3, 100])
def test_ties_go_to_the_lower_train_index_whatever_the_batching(database_batch_size):
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    # Copies of `a` (and of 2a: same direction, same cosine) at 1, 2, 4, 6; of b elsewhere.
    train = np.stack([b, a, 2 * a, b, a, b, a, b]).astype(np.float16)
    probe = RetrievalProbe(2, ks=[3], batch_size=1, database_batch_size=database_batch_size)
    assert probe.neighbours(train, a[None].astype(np.float16), 6).tolist() == [[1, 2, 4, 6, 0, 3]]
    assert probe.neighbours(train, b[None].astype(np.float16), 3).tolist() == [[0, 3, 5]]


def test_reads_float16_one_batch_at_a_time_and_a_memory_map_gives_the_float32_numbers(tmp_path):
    split = _split(per_class=30)
    (train_x, train_y), (test_x, test_y) = split["train"], split["test"]
    probe = RetrievalProbe(3, ks=[1, 3], batch_size=8, database_batch_size=8)
    train_store, test_store = RecordingFeatures(train_x), RecordingFeatures(test_x)
    recorded = probe.evaluate({"train": (train_store, train_y), "test": (test_store, test_y)})
    reads = train_store.rows_per_read + test_store.rows_per_read
    assert reads and max(reads) <= 8 < len(train_x)
    np.save(tmp_path / "train.npy", train_x)
    np.save(tmp_path / "test.npy", test_x)
    stores = {
        "float32": (train_x.astype(np.float32), test_x.astype(np.float32)),
        "memmap": (np.load(tmp_path / "train.npy", mmap_mode="r"), np.load(tmp_path / "test.npy", mmap_mode="r")),
        "npy_rows": (NpyRows(tmp_path / "train.npy"), NpyRows(tmp_path / "test.npy")),
    }
    for name, (train_store, test_store) in stores.items():
        assert probe.evaluate({"train": (train_store, train_y), "test": (test_store, test_y)}) == recorded, name


def test_query_bootstrap_is_seeded_resamples_queries_and_brackets_the_estimate():
    rng = np.random.default_rng(3)
    queries = rng.integers(0, 3, size=120)
    neighbours = np.where(rng.random((120, 5)) < 0.6, queries[:, None], rng.integers(0, 3, size=(120, 5)))
    scores = per_query_scores(neighbours, queries, [1, 5])
    first = retrieval_draws(scores, seed=4)
    assert all(np.array_equal(first[name], retrieval_draws(scores, seed=4)[name]) for name in first)
    assert not np.array_equal(first["retrieval_map@5"], retrieval_draws(scores, seed=5)["retrieval_map@5"])
    # The same draws as evalsuite.metrics.bootstrap, done by indexing instead of weighting.
    draw_rng = np.random.default_rng(4)
    resampled = [scores["retrieval_map@5"][draw_rng.integers(0, 120, size=120)].mean() for _ in range(BOOTSTRAP_DRAWS)]
    assert first["retrieval_map@5"] == pytest.approx(resampled, abs=1e-12)
    for name, values in first.items():
        low, high = np.percentile(values, [2.5, 97.5])
        assert low <= scores[name].mean() <= high and high - low < 0.3
    assert all(len(values) == 0 for values in retrieval_draws(scores, groups=np.zeros(120)).values())


def test_the_interval_is_the_same_for_every_probe_seed_and_follows_the_draw_seed():
    """Issue 47: retrieval is deterministic, so its interval must not change with the probe seed; it is drawn with the
    draw seed the runner passes (the task's), like every other probe's."""
    split = _split()
    seeded = [RetrievalProbe(3, ks=[1, 5], seed=seed).evaluate(split, draw_seed=11) for seed in (0, 1, 2)]
    assert seeded[0] == seeded[1] == seeded[2]
    assert seeded[0][1] != RetrievalProbe(3, ks=[1, 5], seed=0).evaluate(split, draw_seed=12)[1]


def test_any_hit_accuracy_grows_with_k_and_bounds_map():
    means, intervals = RetrievalProbe(3, ks=[1, 3, 5, 10], seed=2).evaluate(_split())
    assert [means[f"retrieval_acc@{k}"] for k in (1, 3, 5, 10)] == sorted(means[f"retrieval_acc@{k}"]
                                                                         for k in (1, 3, 5, 10))
    for k in (1, 3, 5, 10):
        assert means[f"retrieval_map@{k}"] <= means[f"retrieval_acc@{k}"]
        low, high = intervals[f"retrieval_acc@{k}"]
        assert low <= means[f"retrieval_acc@{k}"] <= high
    assert PROBES["retrieval"] is RetrievalProbe


def test_retrieval_probe_through_the_cli(tmp_path):
    result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                     "--probes", "retrieval", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert not library_warnings(result.stderr), result.stderr
    board = pd.read_csv(tmp_path / "leaderboard.csv")
    expected = {f"retrieval_{kind}@{k}" for kind in ("acc", "mvacc", "map") for k in (1, 3, 5, 10)}
    assert set(board["metric"]) == expected and set(board["split"]) == {"test"}
    assert board["value"].between(0, 1).all()
    assert ((board["ci_low"] <= board["value"] + 1e-9) & (board["value"] <= board["ci_high"] + 1e-9)).all()


def test_the_bootstrap_resamples_the_clusters_the_runner_passes():
    from evalsuite.probes.pooled.retrieval import RetrievalProbe

    rng = np.random.default_rng(0)
    train, test = rng.normal(size=(40, 8)).astype(np.float16), rng.normal(size=(20, 8)).astype(np.float16)
    split_data = {"train": (train, np.arange(40) % 2), "test": (test, np.arange(20) % 2)}
    probe = RetrievalProbe(num_classes=2, ks=[1])
    means, per_query = probe.evaluate(split_data, "test")
    same_means, one_cluster = probe.evaluate(split_data, "test", groups=["patient"] * 20)
    assert same_means == means and probe.accepts_clusters
    # One patient: nothing to resample, no interval; per query there is one.
    assert np.isnan(one_cluster["retrieval_acc@1"]).all() and not np.isnan(per_query["retrieval_acc@1"]).any()
