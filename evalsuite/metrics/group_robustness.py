"""Group invariance: the PathoROB robustness index of an embedding, over a site/scanner/stain column.

For each item i (a test tile) take its k nearest neighbours by cosine similarity among the other items,
skipping i itself and, when `exclude` gives one cluster id per item (its patient or slide), every item
of i's cluster. Over the neighbours j of every i count

    SO = #(class_j == class_i and group_j != group_i)   same biology, other site: the wanted neighbours
    OS = #(class_j != class_i and group_j == group_i)   other biology, same site: site-driven neighbours

    robustness_index = sum_i SO_i / (sum_i SO_i + sum_i OS_i)      in [0, 1], higher is more site-invariant

Counts are pooled over all items and all k neighbour ranks before the ratio (a ratio of sums, not a mean
of per-item ratios). Neighbours of the same class and site (SS) and of another class and site (OO) do
not enter.

Source: Koemen, de Jong, Hense et al., "Towards robust foundation models for digital pathology",
arXiv:2507.17845 (Nature Communications 2026), and its code, bifold-pathomics/PathoROB at commit
46594e9269e35acee105de3a0668bc9291bf7df5: pathorob/robustness_index/robustness_index_utils.py
(`calculate_fractions`, `aggregate_stats`, `compute_robustness_index`: SO / (SO + OS) of counts summed
over samples and over neighbour ranks 1..k; `filter_out_query_case_from_neighbors` drops neighbours of
the query's slide, `slide_id`) and robustness_index.py (features L2-normalised, then Euclidean kNN, the
same ranking as cosine; every sample queries all others; fixed k per dataset: 11 Camelyon, 46 Tolkach
ESCA, 61 TCGA). Differences here (docs/group_robustness.md): computed on the test split only; k is
given, not chosen by kNN balanced accuracy; a k larger than some item's eligible neighbours is an
error rather than a silent cut of every item to the smallest count; ties in similarity go to the lower
item index; the interval is the evalsuite bootstrap over queries (or their clusters; shown_intervals.py), where
PathoROB reports the mean and std of 1000 unseeded query resamples; no 2x2 (class x centre) pairing as
PathoROB's TCGA setting, i.e. its unpaired Camelyon / Tolkach mode.

Undefined (nan, not an error): fewer than two groups or fewer than two classes among the items (with
one group SO is always 0 and the index 0 says nothing; with one class OS is always 0), or SO + OS = 0.
Memory: features (a float16 memory map or any [N, D] array) are read `batch_size` rows at a time and
upcast per batch; the search keeps a running top-k per query, never an [N, N] matrix.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import BOOTSTRAP_DRAWS, NOTE_SUFFIX, cluster_index
from evalsuite.metrics.neighbours import keep_top
from evalsuite.metrics.shown_intervals import shown_interval

DEFAULT_K = 11  # PathoROB's smallest fixed k (Camelyon); its others are 46 and 61 on larger datasets
METRIC = "robustness_index"


def robustness_index(features, labels, groups, k: int = DEFAULT_K, exclude=None, **search) -> float:
    """The PathoROB robustness index of `features` [N, D] with class `labels` [N] and `groups` [N] (site ids of
    any type); `exclude`: a cluster id per item whose members are never each other's neighbours."""
    same_other, other_same = pair_counts(features, labels, groups, k, exclude, **search)
    return index_from_counts(same_other, other_same, labels, groups)


def group_robustness(features, labels, groups, k: int = DEFAULT_K, exclude=None, clusters=None, seed: int = 0,
                     unit: str = "cluster", **search) -> dict:
    """{robustness_index, robustness_index_ci (low, high), so_pairs, os_pairs}: the index and its bootstrap over
    `clusters` (one id per item, e.g. its patient, `unit` what they are; None: over items), the interval shown as
    shown_intervals.py says (and its note under robustness_index + NOTE_SUFFIX, when it has one)."""
    same_other, other_same = pair_counts(features, labels, groups, k, exclude, **search)
    value = index_from_counts(same_other, other_same, labels, groups)
    found = {METRIC: value, f"{METRIC}_ci": (np.nan, np.nan), "so_pairs": int(same_other.sum()),
             "os_pairs": int(other_same.sum())}
    if not np.isnan(value):
        shown = shown_interval(value, index_draws(same_other, other_same, clusters, seed=seed),
                               cluster_index(clusters, len(same_other))[1], METRIC, unit)
        found[f"{METRIC}_ci"] = shown.bounds
        if shown.note:
            found[f"{METRIC}{NOTE_SUFFIX}"] = shown.note
    return found


def index_from_counts(same_other: np.ndarray, other_same: np.ndarray, labels=None, groups=None) -> float:
    """sum SO / (sum SO + sum OS); nan when undefined (see the module docstring)."""
    if labels is not None and (len(np.unique(np.asarray(labels))) < 2 or len(np.unique(np.asarray(groups))) < 2):
        return np.nan
    total = float(same_other.sum() + other_same.sum())
    return float(same_other.sum()) / total if total > 0 else np.nan


def index_draws(same_other, other_same, clusters=None, draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> np.ndarray:
    """The index in each bootstrap draw over queries (or their `clusters`): the draws of evalsuite.metrics.bootstrap
    for the same seed, each a weighted ratio of the per-query counts; the neighbour lists stay those of the full
    split, as in PathoROB. Fewer than two clusters: no draws."""
    same_other = np.asarray(same_other, dtype=np.float64)
    other_same = np.asarray(other_same, dtype=np.float64)
    cluster_of_query, n_clusters = cluster_index(clusters, len(same_other))
    if n_clusters < 2:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    values = np.empty(draws)
    for draw in range(draws):
        weights = np.bincount(rng.integers(0, n_clusters, size=n_clusters), minlength=n_clusters)[cluster_of_query]
        wanted, unwanted = weights @ same_other, weights @ other_same
        values[draw] = wanted / (wanted + unwanted) if wanted + unwanted > 0 else np.nan
    return values


def pair_counts(features, labels, groups, k: int, exclude=None, batch_size: int = 1024,
                database_batch_size: int = 4096, device="cpu") -> tuple[np.ndarray, np.ndarray]:
    """(SO per item, OS per item) as int64 [N] over each item's k nearest eligible neighbours."""
    labels, group_ids, cluster_ids = _check(features, labels, groups, exclude, k)
    neighbours = nearest_neighbours(features, k, cluster_ids, batch_size, database_batch_size, torch.device(device))
    same_class = labels[neighbours] == labels[:, None]
    same_group = group_ids[neighbours] == group_ids[:, None]
    return (same_class & ~same_group).sum(axis=1), (~same_class & same_group).sum(axis=1)


def _check(features, labels, groups, exclude, k):
    items = len(features)
    labels = np.asarray(labels).reshape(-1)
    if len(features.shape) != 2 or len(labels) != items or groups is None or len(groups) != items:
        raise ValueError(f"need features [N, D] with N labels and N groups, got {tuple(features.shape)}, "
                         f"{len(labels)} labels, {None if groups is None else len(groups)} groups")
    _, group_ids = np.unique(np.asarray(groups), return_inverse=True)
    cluster_ids = np.arange(items) if exclude is None else np.unique(np.asarray(exclude), return_inverse=True)[1]
    if exclude is not None and len(exclude) != items:
        raise ValueError(f"{len(exclude)} exclusion ids for {items} items")
    check_k(k, items, exclude)
    return labels, group_ids.reshape(-1), cluster_ids.reshape(-1)


def usable_k(k: int, items: int, exclude=None) -> int:
    """`k`, lowered to the fewest neighbours any item has outside its own cluster on a small test split (PathoROB's
    code shortens the neighbour lists the same way); one line when an item has none at all."""
    sizes = np.unique(np.asarray(exclude), return_counts=True)[1] if exclude is not None and items else [1]
    eligible = items - max(sizes) if items else 0
    if eligible < 1 and exclude is not None and items:  # "k=1 must be from 1 to 0" would say to lower k
        raise EvalsuiteError(f"robustness index: all {items} items come from one patient/slide, so none has a "
                             "neighbour outside its own; it needs items of at least two patients/slides (or drop "
                             "the card's group)")
    check_k(min(k, max(eligible, 1)), items, exclude)
    return int(min(k, eligible))


def check_k(k, items: int, exclude=None) -> None:
    """One line unless every one of `items` has at least k neighbours outside its own `exclude` cluster (itself
    when None): callers can check a split's size before computing any feature."""
    sizes = np.unique(np.asarray(exclude), return_counts=True)[1] if exclude is not None and items else [1]
    eligible = items - max(sizes) if items else 0  # the largest cluster's items have the fewest
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or k > eligible:
        what = "items" if exclude is None else "items outside the query's own patient/slide"
        raise EvalsuiteError(f"robustness index: k={k} must be an integer from 1 to {eligible}, the fewest other "
                             f"{what} any item has among the {items}; lower k or evaluate more items")


@torch.no_grad()
def nearest_neighbours(features, k: int, cluster_ids: np.ndarray, batch_size: int = 1024,
                       database_batch_size: int = 4096, device=torch.device("cpu")) -> np.ndarray:
    """[N, k] indices of each item's k most cosine-similar items outside its own cluster (an item is its own
    cluster at least), most similar first; equal similarities go to the lower index."""
    items = len(features)
    out = np.empty((items, k), dtype=np.int64)
    clusters = torch.from_numpy(cluster_ids).to(device)
    for query_start in range(0, items, batch_size):
        query = _unit_rows(features, query_start, query_start + batch_size, device)
        query_clusters = clusters[query_start : query_start + len(query)]
        best_sims = torch.empty((len(query), 0), device=device)
        best_indices = torch.empty((len(query), 0), dtype=torch.long, device=device)
        for start in range(0, items, database_batch_size):
            rows = _unit_rows(features, start, start + database_batch_size, device)
            sims = query @ rows.T
            sims[query_clusters[:, None] == clusters[start : start + len(rows)][None, :]] = -torch.inf
            indices = torch.arange(start, start + len(rows), device=device).expand(len(query), -1)
            best_sims, best_indices = keep_top(torch.cat([best_sims, sims], 1),
                                                torch.cat([best_indices, indices], 1), k)
        order = torch.sort(best_sims, dim=1, descending=True, stable=True).indices  # columns are in index order
        out[query_start : query_start + len(query)] = best_indices.gather(1, order).cpu().numpy()
    return out


def _unit_rows(features, start: int, stop: int, device) -> torch.Tensor:
    """Rows start:stop as float32 unit vectors (an all-zero row stays zero: cosine 0 with everything)."""
    rows = torch.from_numpy(np.array(features[start:stop])).to(device).float()  # a copy: a memory map is read-only
    return torch.nn.functional.normalize(rows, dim=1)
