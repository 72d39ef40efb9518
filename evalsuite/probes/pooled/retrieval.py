"""Retrieval probe: each test item queries the train set by cosine similarity; top-k accuracy, majority-vote
accuracy and mAP@k of the labels it retrieves (definitions and their sources: evalsuite.metrics.retrieval).

Nothing is trained and val is not read. Queries and database are L2-normalised and compared by dot product.
Queries go in batches of `batch_size` against the train set in batches of `database_batch_size`, both read
as float16 and upcast one batch at a time, keeping a running top-k per query: memory is bounded by the
two batches and [batch, k], never the whole cache as float32 nor a [queries, train] similarity matrix.

Equal similarities go to the lower train index (torch.topk alone promises no order among ties): the
running list is kept in index order and sorted by (similarity descending, index ascending) at the end, see
`evalsuite.metrics.neighbours.keep_top`. A k larger than the train set is an error naming the recipe
parameter, not a silent clamp: mAP@k divides by k, so a clamped k would change the metric's meaning.
The interval is the bootstrap over queries or the reader's patients (1000 draws with the task's draw seed, the
draws every probe of the task uses, not the probe seed: retrieval is deterministic, so every seed gets the same
interval), shown as evalsuite.metrics.shown_intervals says; its notes are `interval_notes_`.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import cluster_index
from evalsuite.metrics.neighbours import keep_top
from evalsuite.metrics.retrieval import per_query_scores, retrieval_draws
from evalsuite.metrics.shown_intervals import shown_intervals_of
from evalsuite.probes._validate import check_features_labels
from evalsuite.probes.base import SplitScoringProbe
from evalsuite.probes.batches import iter_float32_batches

INTERVAL_UNIT = "query"


class RetrievalProbe(SplitScoringProbe):
    targets = ("class",)  # vectors with class ids (a slide encoder's survival vectors go to the cox probe)
    interval_unit = INTERVAL_UNIT

    def __init__(self, num_classes: int, ks: int | list[int] = (1, 3, 5, 10), batch_size: int = 256,
                 database_batch_size: int = 4096,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.num_classes = num_classes
        self.ks = sorted({int(k) for k in (ks if isinstance(ks, (list, tuple)) else [ks])})
        if not self.ks or self.ks[0] < 1:
            raise EvalsuiteError(f"retrieval probe: ks {list(ks) if isinstance(ks, (list, tuple)) else ks} must be "
                                 "integers >= 1; fix `ks` in the probe recipe")
        self.batch_size = int(batch_size)
        self.database_batch_size = int(database_batch_size)
        self.device = torch.device(device)
        self.seed = seed  # recorded; retrieval is deterministic and the bootstrap draws with the task's draw seed
        self.selected_params_ = {"ks": self.ks, "similarity": "cosine", "database": "train"}
        self.interval_notes_ = {}

    accepts_clusters = True  # the runner passes the reader's clusters (patients, slides) for the bootstrap

    def evaluate(self, split_data: dict, split: str = "test", groups=None, draw_seed: int = 0) -> tuple[dict, dict]:
        """({retrieval_<kind>@k: mean over queries}, {same: [low, high] of the bootstrap over `groups`, one cluster
        id per query, or over queries when None, drawn with `draw_seed`})."""
        database_x, database_y = split_data["train"]
        database_y = check_features_labels(database_x, database_y, self.num_classes, "retrieval probe train split")
        query_x, query_y = split_data[split]
        query_y = check_features_labels(query_x, query_y, self.num_classes, f"retrieval probe {split} split")
        if self.ks[-1] > len(database_y):
            raise EvalsuiteError(f"retrieval probe: k={self.ks[-1]} is more than the {len(database_y)} train samples "
                                 f"it retrieves from; use ks of at most {len(database_y)} in the probe recipe")
        neighbours = self.neighbours(database_x, query_x, self.ks[-1])
        scores = per_query_scores(database_y[neighbours], query_y, self.ks)
        means = {name: float(values.mean()) for name, values in scores.items()}
        drawn = retrieval_draws(scores, seed=draw_seed, groups=groups)
        clusters = cluster_index(groups, len(query_y))[1]
        intervals, self.interval_notes_ = shown_intervals_of(means, drawn, clusters,
                                                             "cluster" if groups is not None else INTERVAL_UNIT)
        return means, intervals

    @torch.no_grad()
    def neighbours(self, database, queries, k: int) -> np.ndarray:
        """[queries, k] database indices, most similar first, ties to the lower index."""
        out = np.empty((len(queries), k), dtype=np.int64)
        database_order = np.arange(len(database))
        for query_indices, query in iter_float32_batches(queries, np.arange(len(queries)), self.batch_size,
                                                         self.device):
            query = torch.nn.functional.normalize(query, dim=1)
            best_sims = torch.empty((len(query), 0), device=self.device)
            best_indices = torch.empty((len(query), 0), dtype=torch.long, device=self.device)
            for database_indices, rows in iter_float32_batches(database, database_order, self.database_batch_size,
                                                               self.device):
                sims = query @ torch.nn.functional.normalize(rows, dim=1).T
                indices = torch.from_numpy(database_indices).to(self.device).expand(len(query), -1)
                best_sims, best_indices = keep_top(torch.cat([best_sims, sims], dim=1),
                                                   torch.cat([best_indices, indices], dim=1), k)
            # keep_top holds the columns in index order, so a stable sort leaves ties with the lower index first.
            by_similarity = torch.sort(best_sims, dim=1, descending=True, stable=True).indices
            out[query_indices] = best_indices.gather(1, by_similarity).cpu().numpy()
        return out
