"""Text-image retrieval recall@k in both directions, and its bootstrap interval (docs/zeroshot.md).

Scores are cosines of L2-normalised text and image embeddings. A query's candidates are ranked by score,
highest first, equal scores going to the lower candidate index. recall@k of one query is 1 when at least one
of its positives is among its k best-ranked candidates, else 0; the metric is the mean over queries. That is
the CLIP-paper recall@k that LAION-AI/CLIP_benchmark reports (clip_benchmark/metrics/zeroshot_retrieval.py,
commit 48de38c: `recall_at_k(...) > 0`, meaned over queries), so each query is scored by the rank of its
best-ranked positive: recall@k = [that rank < k] (ranks counted from 0).

Names: `text_to_image_recall@k` (text queries, image candidates; CLIP_benchmark's `image_retrieval_recall@k`)
and `image_to_text_recall@k` (image queries, text candidates; its `text_retrieval_recall@k`).

Intervals: the percentile bootstrap over the test images (or their patients), on evalsuite.metrics.bootstrap's
draws. A direction whose queries are the images, or captions each tied to one image, resamples those queries.
The class-text direction has one query per class, too few to resample; there a draw resamples the images the
class texts search (the database), which is where that score's sampling variation lies.
"""

import numpy as np

from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, cluster_index, draw_weights

TEXT_TO_IMAGE, IMAGE_TO_TEXT = "text_to_image", "image_to_text"


def metric_name(direction: str, k: int) -> str:
    """`text_to_image_recall@5`: letters, digits, `_` and `@` only, safe in a CSV cell and a file name."""
    return f"{direction}_recall@{k}"


def best_positive_ranks(scores, positives) -> np.ndarray:
    """int64 [queries]: per row of `scores` [queries, candidates], how many candidates rank before its best-ranked
    positive (`positives`: bool, same shape), ties to the lower index; -1 for a row without positives."""
    scores, positives = np.asarray(scores), np.asarray(positives, dtype=bool)
    order = ranked_order(scores)
    found = np.take_along_axis(positives, order, axis=1)
    return np.where(found.any(axis=1), found.argmax(axis=1), -1).astype(np.int64)


def ranked_order(scores) -> np.ndarray:
    """[queries, candidates] candidate indices per row, highest score first, ties to the lower index."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), axis=1, kind="stable")


def recall_per_query(ranks, ks, direction: str) -> dict:
    """{metric name: float64 [queries with a positive]}: 1.0 where the best positive's rank is below k."""
    ranks = np.asarray(ranks, dtype=np.int64)
    ranks = ranks[ranks >= 0]  # a query with no positive has no recall (CLIP_benchmark would divide 0 by 0)
    return {metric_name(direction, k): (ranks < k).astype(np.float64) for k in ks}


def query_draws(scores: dict, groups=None, seed: int = 0, draws: int = BOOTSTRAP_DRAWS) -> dict:
    """{metric: float64 [draws]}: the mean of per-query scores, one query per test image, in each draw resampling
    the images (or their clusters, `groups`); fewer than two clusters give no draws."""
    names = list(scores)
    if not names:  # e.g. class texts with every recipe k at or above the number of classes
        return {}
    values = np.stack([np.asarray(scores[n], dtype=np.float64) for n in names], axis=1)
    if cluster_index(groups, len(values))[1] < 2:
        return {name: np.zeros(0) for name in names}
    means = np.stack([weights @ values / weights.sum() for weights in draw_weights(groups, len(values), draws, seed)])
    return {name: means[:, i] for i, name in enumerate(names)}


def database_recall(order, positives_in_order, weights, ks) -> np.ndarray:
    """[len(ks)] recall@k over the text queries when each image is taken `weights` times (0: left out).

    `order` [texts, images] ranks the images per text; `positives_in_order` marks that text's positives in the
    same order. Copies of one image sit together, so a text's top k hold a positive exactly when fewer than k
    copies of images come before its first drawn positive. A text none of whose positives is drawn is left out."""
    taken = weights[order]
    drawn_positive = positives_in_order & (taken > 0)
    has = drawn_positive.any(axis=1)
    first = drawn_positive.argmax(axis=1)[has]
    before = (np.cumsum(taken, axis=1) - taken)[has, first] if has.any() else np.zeros(0)
    return np.array([(before < k).mean() if len(before) else np.nan for k in ks])


def database_draws(order, positives_in_order, ks, groups=None, seed: int = 0, draws: int = BOOTSTRAP_DRAWS) -> dict:
    """{text_to_image_recall@k: float64 [draws]}: each draw resamples the images (or clusters) the texts search."""
    names = [metric_name(TEXT_TO_IMAGE, k) for k in ks]
    images = order.shape[1]
    if cluster_index(groups, images)[1] < 2:
        return {name: np.zeros(0) for name in names}
    means = np.stack([database_recall(order, positives_in_order, weights, ks)
                      for weights in draw_weights(groups, images, draws, seed)])
    return {name: means[:, i] for i, name in enumerate(names)}
