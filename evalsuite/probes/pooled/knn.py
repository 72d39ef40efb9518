"""kNN probe: cosine similarity of L2-normalised features, k chosen on val.

The training bank is streamed in float32 chunks against each query batch, keeping a running
top-k, so neither the bank nor the queries are ever upcast whole. Prediction is a majority
vote among the k nearest, ties broken by summed similarity.
"""

import numpy as np
import torch

from evalsuite.metrics.classification import METRICS
from evalsuite.probes._validate import check_features_labels
from evalsuite.probes.base import FittedProbe
from evalsuite.probes.batches import iter_float32_batches
from evalsuite.runtime.progress import Progress

VOTE_ROWS = 4096  # queries voted at a time


class KNNProbe(FittedProbe):
    targets = ("class",)  # vectors with class ids (a slide encoder's survival vectors go to the cox probe)
    def __init__(self, num_classes: int, k: int | list[int] = (1, 3, 5, 10, 20, 30, 40, 50), batch_size: int = 1024,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.num_classes = num_classes
        self.k_grid = sorted(int(k) for k in (k if isinstance(k, (list, tuple)) else [k]))
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.seed = seed  # kNN is deterministic; kept for a uniform probe interface

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "balanced_accuracy"):
        self.bank_ = features
        # A copy: cached labels are a read-only memory map, which torch.from_numpy warns about.
        self.bank_labels_ = torch.tensor(
            check_features_labels(features, labels, self.num_classes, "knn probe train split"), device=self.device)
        val_labels = check_features_labels(val_features, val_labels, self.num_classes, "knn probe val split")
        usable = [k for k in self.k_grid if k <= len(labels)] or [len(labels)]
        sims, neighbours = self._neighbours(val_features, max(usable))
        scores = [METRICS[selection_metric](val_labels, self._vote(sims, neighbours, k)) for k in usable]
        best = int(np.argmax(scores))
        self.k_ = usable[best]
        self.selected_params_ = {"k": self.k_, "val_" + selection_metric: float(scores[best])}
        return self

    def predict_proba(self, features) -> np.ndarray:
        return self._vote(*self._neighbours(features, self.k_), self.k_)

    @torch.no_grad()
    def _neighbours(self, queries, k: int):
        """Top-k similarities and bank indices for every query, as [Q, k] tensors on the device. Filled in place
        (float32 and int32: 8 bytes a neighbour) rather than gathered per batch and concatenated, so the table is
        held once: at PCam's 32,768 val queries x k 50 that was 40 MB more at the peak, and the fit's peak RSS grew
        from CRC-100K's size to PCam's by 23 % (benchmarks/scale.py)."""
        k = min(k, len(self.bank_))
        top_sims = torch.empty((len(queries), k), device=self.device)
        top_indices = torch.empty((len(queries), k), dtype=torch.int32, device=self.device)
        bank_order = np.arange(len(self.bank_))
        # Each query batch reads the whole bank: on a large split this loop is the kNN probe's minutes.
        progress = Progress("knn", -(-len(queries) // self.batch_size), unit="query batch")
        for number, (rows, query) in enumerate(
                iter_float32_batches(queries, np.arange(len(queries)), self.batch_size, self.device), 1):
            query = torch.nn.functional.normalize(query, dim=1)
            best_sims = torch.full((len(query), 0), -2.0, device=self.device)
            best_indices = torch.empty((len(query), 0), dtype=torch.long, device=self.device)
            for bank_indices, bank in iter_float32_batches(self.bank_, bank_order, self.batch_size, self.device):
                sims = query @ torch.nn.functional.normalize(bank, dim=1).T
                indices = torch.from_numpy(bank_indices).to(self.device).expand(len(query), -1)
                merged_sims = torch.cat([best_sims, sims], dim=1)
                merged_indices = torch.cat([best_indices, indices], dim=1)
                top = merged_sims.topk(min(k, merged_sims.shape[1]), dim=1)
                best_sims, best_indices = top.values, merged_indices.gather(1, top.indices)
            top_sims[rows[0] : rows[-1] + 1] = best_sims
            top_indices[rows[0] : rows[-1] + 1] = best_indices.int()
            progress.update(number)
        progress.close()
        return top_sims, top_indices

    def _vote(self, sims: torch.Tensor, neighbours: torch.Tensor, k: int) -> np.ndarray:
        """Class probabilities [Q, classes] from the first k neighbours, a block of queries at a time (the votes'
        int64 labels and weights are [block, k], not [Q, k])."""
        out = np.empty((len(sims), self.num_classes), dtype=np.float32)
        for start in range(0, len(sims), VOTE_ROWS):
            block = slice(start, start + VOTE_ROWS)
            labels = self.bank_labels_[neighbours[block, :k].long()]
            counts = torch.zeros(len(labels), self.num_classes, device=self.device)
            counts.scatter_add_(1, labels, torch.ones_like(sims[block, :k]))
            summed_sims = torch.zeros_like(counts).scatter_add_(1, labels, sims[block, :k])
            # Vote shares are the probabilities; a tiny similarity term only breaks count ties.
            proba = (counts / k + 1e-4 * summed_sims / k).clamp_min(0)
            out[block] = (proba / proba.sum(dim=1, keepdim=True)).cpu().numpy()
        return out
