"""Feature extraction: a frozen backbone over a dataset into a preallocated float16 array.

Rows are written into an array allocated once for the whole split: collecting per-batch
tensors and concatenating them would hold two copies of the cache at the peak.
"""

import sys

import numpy as np
import torch
from tqdm import tqdm

from evalsuite.cache import CACHE_DTYPE
from evalsuite.devices import autocast_context, loader_kwargs
from evalsuite.errors import EvalsuiteError

FLOAT16_MAX = float(np.finfo(np.float16).max)


def extract_features(backbone, dataset, device: torch.device, batch_size: int = 64, num_workers: int = 2,
                     use_autocast: bool = True, description: str = "extract"):
    """Return (features float16 [N, D], number of samples passed through the backbone)."""
    backbone.model.to(device)
    features = np.empty((len(dataset), backbone.embed_dim), dtype=CACHE_DTYPE)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                         **loader_kwargs(device, num_workers))
    forwarded = 0
    with torch.inference_mode(), tqdm(total=len(dataset), desc=description, unit="img", leave=False,
                                      mininterval=_progress_interval_s()) as bar:
        for images, _ in loader:
            with autocast_context(device, use_autocast):
                output = backbone.pooled_features(images.to(device, non_blocking=True))
            rows = _checked_rows(output.float(), backbone.embed_dim, forwarded, description)
            features[forwarded : forwarded + len(rows)] = rows.to(torch.float16).cpu().numpy()
            forwarded += len(rows)
            bar.update(len(rows))
    return features, forwarded


def _progress_interval_s() -> float:
    # Slurm job logs are not terminals: redraw rarely there instead of flooding the log.
    return 0.1 if sys.stderr.isatty() else 10.0


def _checked_rows(rows: torch.Tensor, embed_dim: int, offset: int, description: str) -> torch.Tensor:
    if rows.ndim != 2 or rows.shape[1] != embed_dim:
        raise EvalsuiteError(f"{description}: backbone returned {tuple(rows.shape)}, expected [batch, {embed_dim}]")
    if not torch.isfinite(rows).all():
        bad = int((~torch.isfinite(rows)).any(dim=1).nonzero()[0]) + offset
        raise EvalsuiteError(f"{description}: backbone produced NaN/inf features (first at sample {bad}); "
                             "check the weights, or rerun with --no-autocast")
    if rows.abs().max() > FLOAT16_MAX:
        raise EvalsuiteError(f"{description}: features exceed the float16 range (|x| > {FLOAT16_MAX:.0f}) and "
                             "would overflow the float16 cache; this backbone needs feature normalisation")
    return rows
