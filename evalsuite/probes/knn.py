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


class KNNProbe(FittedProbe):
    def __init__(self, num_classes: int, k=(1, 3, 5, 10, 20, 30, 40, 50), batch_size: int = 1024,
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
        """Top-k similarities and bank indices for every query, as [Q, k] tensors on the device."""
        all_sims, all_indices = [], []
        query_order = np.arange(len(queries))
        bank_order = np.arange(len(self.bank_))
        # Each query batch reads the whole bank: on a large split this loop is the kNN probe's minutes.
        progress = Progress("knn", -(-len(queries) // self.batch_size), unit="query batch")
        for _, query in iter_float32_batches(queries, query_order, self.batch_size, self.device):
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
            all_sims.append(best_sims)
            all_indices.append(best_indices)
            progress.update(len(all_sims))
        progress.close()
        return torch.cat(all_sims), torch.cat(all_indices)

    def _vote(self, sims: torch.Tensor, neighbours: torch.Tensor, k: int) -> np.ndarray:
        labels = self.bank_labels_[neighbours[:, :k]]
        counts = torch.zeros(len(labels), self.num_classes, device=self.device)
        counts.scatter_add_(1, labels, torch.ones_like(sims[:, :k]))
        summed_sims = torch.zeros_like(counts).scatter_add_(1, labels, sims[:, :k])
        # Vote shares are the probabilities; a tiny similarity term only breaks count ties.
        proba = counts / k + 1e-4 * summed_sims / k
        proba = proba.clamp_min(0)
        return (proba / proba.sum(dim=1, keepdim=True)).cpu().numpy()
