"""Transformation invariance scores: row-wise cosine similarity of two embedding matrices and its summary.

cos(a, b) = a . b / (||a|| ||b||), computed in float64 from the (float16) embeddings. Two rows that
are both all-zero are identical and score 1; one all-zero row against a non-zero one scores 0
(torch.nn.functional.cosine_similarity gives 0 for both, by clamping the norms).
THUNDER reports the mean and the std of this per transformation (MICS-Lab/thunder
src/thunder/tasks/transformation_invariance.py at 6fe47e0975411bb692263217a816b62a0c809a39);
the median is added here because a few tiles the transformation ruins pull the mean down.
"""

import numpy as np

ROWS_PER_BLOCK = 4096  # float64 copies of this many rows at a time, never of a whole test split


def cosine_similarities(first, second) -> np.ndarray:
    """Cosine similarity of row i of `first` and row i of `second` (both [N, D]), as float64 [N]."""
    if first.shape != second.shape or len(first.shape) != 2:
        raise ValueError(f"need two [N, D] matrices of one shape, got {tuple(first.shape)} and {tuple(second.shape)}")
    out = np.empty(len(first), dtype=np.float64)
    for start in range(0, len(first), ROWS_PER_BLOCK):
        a = np.asarray(first[start : start + ROWS_PER_BLOCK], dtype=np.float64)
        b = np.asarray(second[start : start + ROWS_PER_BLOCK], dtype=np.float64)
        out[start : start + len(a)] = _block_cosines(a, b)
    return out


def _block_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    both_zero = ~a.any(axis=1) & ~b.any(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosines = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
    cosines[both_zero] = 1.0
    # Rounding can put a product of norms a hair below the dot product of identical rows.
    return np.clip(cosines, -1.0, 1.0)


def cosine_summary(cosines: np.ndarray) -> dict:
    """{mean, median, std (population, as THUNDER's np.std), min} of per-sample cosines."""
    values = np.asarray(cosines, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no cosine similarities to summarise")
    return {"mean": float(values.mean()), "median": float(np.median(values)), "std": float(values.std()),
            "min": float(values.min())}
