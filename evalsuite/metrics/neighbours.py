"""Nearest-neighbour search in batches: the running top-k that the retrieval probe and the group robustness index
share, with one deterministic rule for ties."""

import torch


def keep_top(sims: torch.Tensor, indices: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest columns per row, returned in ascending index order; among columns tied with the k-th value
    the lower indices win. Columns arrive in ascending index order (running best, then a later batch), so a
    stable sort settles ties; it runs only on the rare rows where torch.topk's tie choice could matter."""
    k = min(k, sims.shape[1])
    top = sims.topk(k, dim=1)
    chosen_sims, chosen_indices = top.values, indices.gather(1, top.indices)
    tied = (sims >= top.values[:, -1:]).sum(dim=1) > k
    if tied.any():
        rows = tied.nonzero().squeeze(1)
        order = torch.sort(sims[rows], dim=1, descending=True, stable=True).indices[:, :k]
        chosen_sims[rows], chosen_indices[rows] = sims[rows].gather(1, order), indices[rows].gather(1, order)
    by_index = chosen_indices.argsort(dim=1)
    return chosen_sims.gather(1, by_index), chosen_indices.gather(1, by_index)
