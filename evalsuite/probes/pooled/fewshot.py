"""Few-shot probe: SimpleShot over many sampled support sets, for several shot counts.

For each k in `shots` and each of `support_sets` draws: k training samples per class form the
support set; features are centred on the support mean and L2-normalised; a test item goes to
the nearest class centroid (cosine similarity to the normalised centroids). Each metric is
reported as the mean over support sets. Its interval is the spread of single support sets:
the 2.5 and 97.5 percentiles of the per-set scores, i.e. where the score of one randomly
drawn k-shot support set falls 95 % of the time. It is not a confidence interval of the
mean: that would only be about a tenth as wide with 100 sets (the standard error is the
per-set standard deviation over sqrt(sets)), and it would say nothing about test sampling.
Runs record this kind as `intervals_95_unit` = INTERVAL_UNIT. Test features are streamed
once per k in float32 batches; all support sets are scored on each batch.
"""

import numpy as np
import torch

from evalsuite.metrics.classification import compute_metrics
from evalsuite.probes._validate import check_features_labels
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.probes.batches import iter_float32_batches
from evalsuite.runtime.cpus import one_thread
from evalsuite.runtime.progress import Progress

# What `evaluate`'s intervals are, for the run JSON beside them (the bootstrap's are "patient", "tile", ...).
INTERVAL_UNIT = "support_set_spread"
NORM_EPS = 1e-12  # torch.nn.functional.normalize's floor of a norm


class FewShotProbe(SplitScoringProbe):
    targets = ("class",)  # vectors with class ids (a slide encoder's survival vectors go to the cox probe)
    interval_unit = INTERVAL_UNIT

    def __init__(self, num_classes: int, shots: list[int] = (1, 2, 4, 8, 16), support_sets: int = 100,
                 batch_size: int = 256,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.num_classes = num_classes
        self.shots = [int(k) for k in shots]
        self.support_sets = int(support_sets)
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.seed = seed
        self.selected_params_ = {"shots": self.shots, "support_sets": self.support_sets}

    def evaluate(self, split_data: dict, split: str = "test") -> tuple[dict, dict]:
        """({metric_kshot: mean over support sets}, {metric_kshot: (2.5, 97.5) percentiles of single sets})."""
        train_x, train_y = split_data["train"]
        train_y = check_features_labels(train_x, train_y, self.num_classes, "few-shot probe train split")
        test_x, test_y = split_data[split]
        test_y = check_features_labels(test_x, test_y, self.num_classes, f"few-shot probe {split} split")
        rng = np.random.default_rng(self.seed)
        means, intervals = {}, {}
        progress = Progress("fewshot", len(self.shots), unit="config")  # a config: one shot count, all its sets
        for number, shots in enumerate(self.shots, 1):
            supports = [self._support_indices(train_y, shots, rng) for _ in range(self.support_sets)]
            scores = self._scores(train_x, train_y, supports, test_x)
            per_set = [compute_metrics(test_y, s) for s in scores]
            for name in per_set[0]:
                values = np.array([m[name] for m in per_set])
                means[f"{name}_{shots}shot"] = float(np.nanmean(values))
                intervals[f"{name}_{shots}shot"] = (float(np.nanpercentile(values, 2.5)),
                                                    float(np.nanpercentile(values, 97.5)))
            progress.update(number, f"{shots}-shot x {self.support_sets} sets: {split} balanced_accuracy "
                                    f"{means.get(f'balanced_accuracy_{shots}shot', float('nan')):.4f}")
        progress.close()
        return means, intervals

    def _support_indices(self, labels: np.ndarray, shots: int, rng) -> np.ndarray:
        # A class with fewer than k training samples contributes all it has.
        picks = [rng.choice(np.flatnonzero(labels == c), size=min(shots, int((labels == c).sum())), replace=False)
                 for c in range(self.num_classes) if (labels == c).any()]
        return np.sort(np.concatenate(picks))

    @torch.no_grad()
    def _scores(self, train_x, train_y, supports, test_x) -> np.ndarray:
        """[support sets, test items, classes] cosine similarity to each set's class centroids."""
        with one_thread():  # hundreds of [k x classes, D] sets: each op too small to share between threads
            means, centroids = zip(*(self._centroids(train_x[indices], train_y[indices]) for indices in supports))
        return self._similarities(test_x, torch.stack(means), torch.stack(centroids))  # [S, D], [S, C, D]

    def _centroids(self, rows, labels) -> tuple[torch.Tensor, torch.Tensor]:
        """The support mean [D] and the normalised class centroids [C, D] of the centred, normalised rows."""
        support = torch.from_numpy(np.asarray(rows)).to(self.device).float()
        mean = support.mean(dim=0)
        normed = torch.nn.functional.normalize(support - mean, dim=1)
        one_hot = torch.nn.functional.one_hot(torch.from_numpy(labels).to(self.device), self.num_classes)
        return mean, torch.nn.functional.normalize(one_hot.T.float() @ normed, dim=1)

    def _similarities(self, test_x, means: torch.Tensor, centroids: torch.Tensor) -> np.ndarray:
        """cos(q - m_s, c_sc) for every test item q, set s and class c, in [0, 1], as products of q with the means
        and centroids: (q.c - m.c) / |q - m| with |q - m|^2 = |q|^2 - 2 q.m + |m|^2. Centring and normalising each
        batch once per set built a [sets, batch, D] tensor (157 MB at 100 sets, 256 rows, D 1536): few-shot was
        43x its GEMM floor at CRC-100K size (benchmarks/scale.py)."""
        sets, classes, dim = centroids.shape
        flat = centroids.reshape(sets * classes, dim)
        mean_dot_centroid = (centroids * means[:, None]).sum(dim=2).double()  # [S, C]
        mean_squared = (means.double() ** 2).sum(dim=1)  # [S]
        out = np.empty((sets, len(test_x), classes), dtype=np.float32)
        order = np.arange(len(test_x))
        for batch_indices, batch in iter_float32_batches(test_x, order, self.batch_size, self.device):
            # float64 for the norms: |q|^2 - 2 q.m + |m|^2 cancels when a query lies close to a support mean.
            query_dot_centroid = (batch @ flat.T).double().reshape(len(batch), sets, classes)
            squared = (batch.double() ** 2).sum(dim=1)[:, None] - 2 * (batch @ means.T).double() + mean_squared
            norm = squared.clamp_min(0).sqrt().clamp_min(NORM_EPS)  # F.normalize's eps
            similarity = (query_dot_centroid - mean_dot_centroid) / norm[:, :, None]  # [b, S, C]
            out[:, batch_indices] = ((similarity.permute(1, 0, 2) + 1) / 2).float().cpu().numpy()
        return out  # in [0, 1]; classes absent score 0.5
