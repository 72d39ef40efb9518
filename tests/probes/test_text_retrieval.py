"""Text-image retrieval recall@k (evalsuite.metrics.text_retrieval, probes/texts/text_retrieval.py): a hand-computed case,
an independent numpy re-computation of CLIP_benchmark's definition (written here from its documented steps, not
imported), ties, the database bootstrap of the class-text direction, and the checks of ks."""

import numpy as np
import pytest

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.directions import higher_is_better
from evalsuite.metrics.text_retrieval import best_positive_ranks, database_recall, ranked_order, recall_per_query
from evalsuite.probes.texts.retrieval_texts import RetrievalTexts
from evalsuite.probes.texts.text_retrieval import CAPTIONS, CLASS_TEXTS, TextRetrievalProbe, check_ks_fit, checked_ks


def _texts(embeddings, source) -> RetrievalTexts:
    rows = np.asarray(embeddings, dtype=np.float32)
    return RetrievalTexts(rows / np.linalg.norm(rows, axis=1, keepdims=True), source, {"texts": source})


def clip_benchmark_recall(text_emb, image_emb, positive_pairs, k) -> tuple[float, float]:
    """CLIP_benchmark's zeroshot_retrieval definition: scores = normalised texts x images; per query, true positives
    among its top k / its positives; the reported recall@k is the mean over queries of (that > 0). Returns
    (text queries retrieving images, image queries retrieving texts)."""
    text_emb = text_emb / np.linalg.norm(text_emb, axis=1, keepdims=True)
    image_emb = image_emb / np.linalg.norm(image_emb, axis=1, keepdims=True)
    scores = text_emb @ image_emb.T

    def one_way(scores, positives):
        topk = np.argsort(-scores, axis=1)[:, :k]
        true_positive = np.take_along_axis(positives, topk, axis=1).sum(axis=1)
        return float(((true_positive / positives.sum(axis=1)) > 0).mean())

    return one_way(scores, positive_pairs), one_way(scores.T, positive_pairs.T)


def test_recall_of_a_hand_computed_case():
    # Three images (rows) x three captions; image i's caption is i. Image 0 ranks its caption 1st, image 1 2nd,
    # image 2 3rd: image-to-text recall@1 = 1/3, @2 = 2/3, @3 = 1.
    scores = np.array([[0.9, 0.1, 0.0], [0.8, 0.5, 0.1], [0.7, 0.6, 0.2]])
    ranks = best_positive_ranks(scores, np.eye(3, dtype=bool))
    assert ranks.tolist() == [0, 1, 2]
    recall = recall_per_query(ranks, [1, 2, 3], "image_to_text")
    assert [recall[f"image_to_text_recall@{k}"].mean() for k in (1, 2, 3)] == pytest.approx([1 / 3, 2 / 3, 1])
    # Captions as queries (columns): caption 0 ranks image 0 first; caption 1: 0.6 > 0.5, image 1 is 2nd;
    # caption 2: 0.2 is the highest of its column, 1st.
    assert best_positive_ranks(scores.T, np.eye(3, dtype=bool)).tolist() == [0, 1, 0]


def test_equal_scores_go_to_the_lower_index_and_a_query_without_positive_is_left_out():
    scores = np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
    assert ranked_order(scores)[0].tolist() == [0, 1, 2]
    ranks = best_positive_ranks(scores, np.array([[False, False, True], [False, False, False]]))
    assert ranks.tolist() == [2, -1]
    assert recall_per_query(ranks, [2, 3], "text_to_image") == {"text_to_image_recall@2": [0.0],
                                                                 "text_to_image_recall@3": [1.0]}


@pytest.mark.parametrize("batch_size", [7, 256])
def test_captions_equal_the_clip_benchmark_definition(batch_size):
    rng = np.random.default_rng(0)
    images = rng.normal(size=(40, 8)).astype(np.float16)  # the cache's dtype
    captions = images.astype(np.float32) + rng.normal(scale=1.5, size=(40, 8))
    probe = TextRetrievalProbe(3, ks=(1, 5, 10), batch_size=batch_size, texts=_texts(captions, CAPTIONS))
    means, intervals = probe.evaluate({"test": (images, np.arange(40) % 3)})
    for k in (1, 5, 10):
        text_to_image, image_to_text = clip_benchmark_recall(captions, images.astype(np.float64),
                                                             np.eye(40, dtype=bool), k)
        assert means[f"text_to_image_recall@{k}"] == pytest.approx(text_to_image, abs=1e-12)
        assert means[f"image_to_text_recall@{k}"] == pytest.approx(image_to_text, abs=1e-12)
        low, high = intervals[f"text_to_image_recall@{k}"]
        assert low <= means[f"text_to_image_recall@{k}"] <= high
    assert 0 < means["image_to_text_recall@1"] < means["image_to_text_recall@10"] < 1  # not a trivial case


def test_class_texts_equal_the_clip_benchmark_definition_and_leave_out_ks_of_every_class():
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2, 3], 15)
    classes = rng.normal(size=(4, 8))
    images = (classes[labels] + rng.normal(scale=2.0, size=(60, 8))).astype(np.float16)
    probe = TextRetrievalProbe(4, ks=(1, 3, 5), texts=_texts(classes, CLASS_TEXTS))
    means, intervals = probe.evaluate({"test": (images, labels)})
    positives = labels[None, :] == np.arange(4)[:, None]  # [texts, images]
    for k in (1, 3):
        text_to_image, image_to_text = clip_benchmark_recall(classes, images.astype(np.float64), positives, k)
        assert means[f"image_to_text_recall@{k}"] == pytest.approx(image_to_text, abs=1e-12)  # top-k accuracy
        assert means[f"text_to_image_recall@{k}"] == pytest.approx(text_to_image, abs=1e-12)
    assert "image_to_text_recall@5" not in means and "text_to_image_recall@5" in means  # 5 >= 4 class texts
    assert probe.selected_params_["image_to_text_ks_left_out"] == [5]
    assert probe.selected_params_["trained_on"] == "nothing (zero-shot)"
    assert set(intervals) == set(means) and all(higher_is_better(name) for name in means)


def test_the_class_text_interval_resamples_the_images_searched():
    # One text; images in its ranked order: a negative, then the positive. Taking the negative twice puts two
    # copies before the positive (recall@2 0); leaving it out puts the positive first (recall@1 1).
    order, positives = np.array([[0, 1]]), np.array([[False, True]])
    assert database_recall(order, positives, np.array([1.0, 1.0]), [1, 2]).tolist() == [0.0, 1.0]
    assert database_recall(order, positives, np.array([2.0, 1.0]), [1, 2, 3]).tolist() == [0.0, 0.0, 1.0]
    assert database_recall(order, positives, np.array([0.0, 1.0]), [1]).tolist() == [1.0]
    assert np.isnan(database_recall(order, positives, np.array([1.0, 0.0]), [1])).all()  # its positive not drawn


def test_the_intervals_resample_clusters_and_a_single_cluster_has_none():
    rng = np.random.default_rng(2)
    labels = np.repeat([0, 1], 10)
    images = rng.normal(size=(20, 4)).astype(np.float16)
    probe = TextRetrievalProbe(2, ks=(1,), texts=_texts(rng.normal(size=(2, 4)), CLASS_TEXTS))
    _, by_patient = probe.evaluate({"test": (images, labels)}, groups=np.arange(20) // 2)
    assert all(low <= high for low, high in by_patient.values())
    _, one = probe.evaluate({"test": (images, labels)}, groups=np.zeros(20))
    assert all(np.isnan(bounds).all() for bounds in one.values())


def test_class_texts_with_every_k_at_or_above_the_classes_score_text_to_image_only():
    rng = np.random.default_rng(3)
    probe = TextRetrievalProbe(2, ks=(2, 4), texts=_texts(rng.normal(size=(2, 4)), CLASS_TEXTS))
    means, intervals = probe.evaluate({"test": (rng.normal(size=(8, 4)).astype(np.float16), np.arange(8) % 2)})
    assert set(means) == set(intervals) == {"text_to_image_recall@2", "text_to_image_recall@4"}


def test_ks_are_checked_with_the_recipe_parameter_named():
    with pytest.raises(EvalsuiteError, match="k=10 is more than the 6 test images.*`ks` in the probe recipe"):
        check_ks_fit(checked_ks([1, 10]), 6)
    with pytest.raises(EvalsuiteError, match="fix `ks`"):
        checked_ks([0, 1])
    with pytest.raises(EvalsuiteError, match="needs the texts of a vision-language model"):
        TextRetrievalProbe(2)


def test_a_random_init_run_names_each_untrained_text_probe_in_its_chance_level_note():
    from evalsuite.probes.texts.zeroshot import chance_level_note

    untrained = {"trained_on": "nothing (zero-shot)"}
    record = {"model": {"weights_id": "random-init:0"},
              "probes": [{"probe": "text_retrieval", "selected_params": untrained},
                         {"probe": "zeroshot", "selected_params": untrained}, {"probe": "linear"}]}
    assert chance_level_note(record).startswith("text_retrieval, zeroshot ran with random weights")
    assert "numbers are chance level" in chance_level_note(record)
    assert chance_level_note({**record, "model": {"weights_id": "sha256:ab"}}) is None
