"""Sequence-first attention for torch's nn.MultiheadAttention inside library models (open_clip's towers, CONCH's
pooler): the same numbers, without a CPU autocast slow path.

A `batch_first=True` nn.MultiheadAttention transposes its [batch, tokens, width] input to [tokens, batch, width]
and projects that non-contiguous view. Outside autocast, inference takes torch's fused path and never does; under
autocast the fused path is off, and on a CPU the projection of the transposed view runs as a batched matmul over a
copied weight: open_clip's ViT-B/16 under bf16 autocast took 2x as long as in float32 (benchmarks/attention_layout.py
prints the ratio). Here each such module is switched to sequence-first and given its input already transposed and
contiguous (and its output transposed back), so the projections are plain matrix products of the same values.
"""

import torch
from torch import nn


def _to_sequence_first(module, args, kwargs):
    transposed = {}  # query, key and value are often one tensor: it must stay one (the packed projection)
    args = tuple(transposed.setdefault(id(a), a.transpose(0, 1).contiguous()) if torch.is_tensor(a) else a
                 for a in args)
    return args, kwargs


def _to_batch_first(module, args, kwargs, output):
    attended, weights = output
    return attended.transpose(0, 1), weights


def sequence_first_attention(model: nn.Module) -> int:
    """Switches every batch-first nn.MultiheadAttention in `model` (query, key and value passed positionally, as
    open_clip and torch's own callers pass them); returns how many."""
    switched = 0
    for module in model.modules():
        if isinstance(module, nn.MultiheadAttention) and module.batch_first:
            module.batch_first = False
            module.register_forward_pre_hook(_to_sequence_first, with_kwargs=True)
            module.register_forward_hook(_to_batch_first, with_kwargs=True)
            switched += 1
    return switched
