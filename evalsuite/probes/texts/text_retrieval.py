"""Text-image retrieval probe: recall@k both ways between the test images and texts, nothing trained.

The texts (evalsuite.probes.texts.retrieval_texts) are the card's class texts (one prompt-ensembled embedding per class;
an image's positive is its class's text, a class text's positives are the images of that class) or one caption
per test image (each image's own caption is its only positive). Definitions and intervals:
evalsuite.metrics.text_retrieval. Only the test split is read: train is never read (nothing is fitted) and val is
not read (nothing is chosen). Image embeddings are the float16 cache's rows, upcast one batch at a time; captions
are never held as a [texts, images] score matrix, only as [batch, texts] blocks.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import cluster_index
from evalsuite.metrics.shown_intervals import shown_intervals_of
from evalsuite.metrics.text_retrieval import (
    IMAGE_TO_TEXT,
    TEXT_TO_IMAGE,
    best_positive_ranks,
    database_draws,
    database_recall,
    metric_name,
    query_draws,
    ranked_order,
    recall_per_query,
)
from evalsuite.probes._validate import check_features_labels, require_texts
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.probes.batches import iter_float32_batches
from evalsuite.probes.texts.zeroshot import ZERO_SHOT

CAPTIONS, CLASS_TEXTS = "captions", "class_texts"


def checked_ks(ks, where: str = "text_retrieval probe") -> list:
    ks = sorted({int(k) for k in (ks if isinstance(ks, (list, tuple)) else [ks])})
    if not ks or ks[0] < 1:
        raise EvalsuiteError(f"{where}: ks must be integers >= 1; fix `ks` in the probe recipe")
    return ks


def check_ks_fit(ks: list, images: int, where: str = "text_retrieval probe") -> None:
    """A k above the test images is refused, not clamped: recall@k would then mean recall@images."""
    if ks[-1] > images:
        raise EvalsuiteError(f"{where}: k={ks[-1]} is more than the {images} test images (and texts) it retrieves "
                             f"among; use ks of at most {images} (`ks` in the probe recipe)")


def image_to_text_ks(ks: list, texts) -> list:
    """The ks the image queries are scored at. Among C class texts a k >= C finds every class (recall 1 by
    construction), so those ks are left out there (and listed in selected_params); k=1 always stays (C >= 2)."""
    return [k for k in ks if texts.source != CLASS_TEXTS or k < len(texts.embeddings)]


class TextRetrievalProbe(SplitScoringProbe):
    reads_retrieval_texts = True  # the runner hands it the texts (probes/texts/retrieval_texts.py)
    maps_images_to_joint = True  # applies texts.image_to_joint to every batch of cached rows
    targets = ("class",)
    chooses_on_val = False
    learns_from_train = False  # reads the test split only (base.splits_read)
    accepts_clusters = True  # the runner passes the reader's clusters (patients) for the bootstrap
    interval_unit = "image"

    def __init__(self, num_classes: int, ks: int | list[int] = (1, 5, 10), batch_size: int = 256, texts=None,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.texts = require_texts(texts, "text_retrieval", what="texts")
        self.num_classes = num_classes
        self.ks = checked_ks(ks)
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.seed = seed  # recorded; retrieval is deterministic and the bootstrap draws with the task's draw seed
        self.interval_notes_ = {}
        self.image_ks = image_to_text_ks(self.ks, texts)
        left_out = sorted(set(self.ks) - set(self.image_ks))
        self.selected_params_ = {"ks": self.ks, "similarity": "cosine", "trained_on": ZERO_SHOT, **texts.params,
                                 **({"image_to_text_ks_left_out": left_out} if left_out else {})}

    def evaluate(self, split_data: dict, split: str = "test", groups=None, draw_seed: int = 0) -> tuple[dict, dict]:
        """({metric: mean over queries}, {metric: [low, high]}) on `split`; `groups`: a cluster id per image; the
        bootstrap draws with `draw_seed` (the task's: every probe seed gets the same interval)."""
        features, labels = split_data[split]
        labels = check_features_labels(features, labels, self.num_classes, f"text_retrieval probe {split} split")
        check_ks_fit(self.ks, len(labels))
        if self.texts.source == CAPTIONS:
            means, drawn = self._captions(features, groups, draw_seed)
        else:
            means, drawn = self._class_texts(features, labels, groups, draw_seed)
        clusters = cluster_index(groups, len(labels))[1]
        intervals, self.interval_notes_ = shown_intervals_of(means, drawn, clusters,
                                                             "cluster" if groups is not None else self.interval_unit)
        return means, intervals

    def _class_texts(self, features, labels: np.ndarray, groups, draw_seed: int) -> tuple[dict, dict]:
        scores = self.image_text_scores(features)  # [images, classes]: small, the classes are few
        per_image = recall_per_query(best_positive_ranks(scores, labels[:, None] == np.arange(scores.shape[1])),
                                     self.image_ks, IMAGE_TO_TEXT)
        order = ranked_order(scores.T)  # [classes, images]
        positives = labels[order] == np.arange(scores.shape[1])[:, None]
        means = {name: float(values.mean()) for name, values in per_image.items()}
        recall = database_recall(order, positives, np.ones(len(labels)), self.ks)
        means.update({metric_name(TEXT_TO_IMAGE, k): float(r) for k, r in zip(self.ks, recall)})
        drawn = {**query_draws(per_image, groups, draw_seed), **database_draws(order, positives, self.ks, groups, draw_seed)}
        return means, drawn

    def _captions(self, features, groups, draw_seed: int) -> tuple[dict, dict]:
        if len(self.texts.embeddings) != len(features):
            raise EvalsuiteError(f"the cached test split has {len(features)} images but the reader lists "
                                 f"{len(self.texts.embeddings)} captions; the manifest changed since the features "
                                 "were cached: remove the task's cache (`evalsuite cache ls`, then "
                                 "`evalsuite cache rm KEY`)")
        image_ranks, text_ranks = self.caption_ranks(features)
        per_query = {**recall_per_query(image_ranks, self.image_ks, IMAGE_TO_TEXT),
                     **recall_per_query(text_ranks, self.ks, TEXT_TO_IMAGE)}
        # Caption t is tied to image t, so both directions resample the same images on the same draws.
        return ({name: float(values.mean()) for name, values in per_query.items()},
                query_draws(per_query, groups, draw_seed))

    @torch.no_grad()
    def image_text_scores(self, features) -> np.ndarray:
        """float32 [images, texts]: cosine of every image with every text (for the few class texts)."""
        texts = torch.from_numpy(self.texts.embeddings).to(self.device)
        out = np.empty((len(features), len(texts)), dtype=np.float32)
        for rows, batch in iter_float32_batches(features, np.arange(len(features)), self.batch_size, self.device):
            joint = self.texts.image_to_joint(batch)
            out[rows] = (torch.nn.functional.normalize(joint, dim=1) @ texts.T).cpu().numpy()
        return out

    @torch.no_grad()
    def caption_ranks(self, features) -> tuple[np.ndarray, np.ndarray]:
        """(per image: captions ranked before its own; per caption: images ranked before its own), ties to the
        lower index. Two passes over [batch, captions] blocks: the first gives each image's rank and its own
        pair's score, the second counts, per caption, the images scoring above that score."""
        texts = torch.from_numpy(self.texts.embeddings).to(self.device)
        columns = torch.arange(len(texts), device=self.device)
        image_ranks, own = np.empty(len(features), dtype=np.int64), torch.empty(len(texts), device=self.device)
        text_ranks = torch.zeros(len(texts), dtype=torch.long, device=self.device)
        for rows, block in self._blocks(features, texts):
            index = torch.from_numpy(rows).to(self.device)
            own[index] = block[torch.arange(len(rows), device=self.device), index]
            before = (block > own[index, None]) | ((block == own[index, None]) & (columns[None] < index[:, None]))
            image_ranks[rows] = before.sum(dim=1).cpu().numpy()
        for rows, block in self._blocks(features, texts):  # the same inputs and shapes: the same values again
            index = torch.from_numpy(rows).to(self.device)
            before = (block > own[None]) | ((block == own[None]) & (index[:, None] < columns[None]))
            before[torch.arange(len(rows), device=self.device), index] = False  # an image never precedes itself
            text_ranks += before.sum(dim=0)
        return image_ranks, text_ranks.cpu().numpy()

    def _blocks(self, features, texts):
        for rows, batch in iter_float32_batches(features, np.arange(len(features)), self.batch_size, self.device):
            yield rows, torch.nn.functional.normalize(self.texts.image_to_joint(batch), dim=1) @ texts.T
