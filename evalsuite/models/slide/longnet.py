"""LongNet's encoder (dilated attention, Ding et al. 2023) as Prov-GigaPath's slide encoder runs it, in plain torch.

Read from the torchscale copy that Prov-GigaPath bundles (GitHub prov-gigapath/prov-gigapath at 09d8e87:
`gigapath/torchscale/model/LongNet.py`, `model/LongNetConfig.py`, `architecture/config.py`, `architecture/encoder.py`,
`component/dilated_attention.py`, `component/multihead_attention.py`, `component/flash_attention.py`,
`component/feedforward_network.py`); none of that code is used or copied. PyPI's torchscale 0.3.0 has no dilated
attention and no LongNet (its `architecture/encoder.py` and `component/feedforward_network.py` are byte for byte the
bundled ones, which tests/models/slide/test_slide_gigapath.py uses to recompute this encoder).

An encoder layer is torchscale's with `subln=True` (its default): pre-LayerNorm residual blocks,
  x + out_proj(inner_attn_ln(attention(self_attn_layer_norm(x))))  then  x + fc2(ffn_layernorm(gelu(fc1(final_layer_norm(x))))),
every LayerNorm eps 1e-5; after the last layer the encoder's `layer_norm`. Dropout and drop-path are inactive in eval.

The attention (gigapath's `DilatedAttention.forward`) has no CPU path in the original: it asserts
`args.flash_attention` and `flash_attn_func` is None without CUDA (and needs fp16/bf16 with it). What it computes,
here in fp32 with ordinary matrix products: for each branch i with segment length w_i and dilation r_i
(w = (1024, 5792, 32768, 185363, 1048576), r = (1, 2, 4, 8, 16) at the published size):
  - w = min(w_i, L) for L tokens; the sequence is cut into ceil(L / w) segments, zero-padded at its end to fill the
    last one, and each segment zero-padded to a multiple of r_i;
  - the heads form r_i groups of ceil(H / r_i) (in order); group j reads the positions p of each segment with
    p = j (mod r_i), and within a segment those queries attend to those keys by softmax(q k^T / sqrt(head_dim)),
    with no mask: the zero padding enters as keys of score 0 and value 0, as under flash-attn;
  - each branch's output and log-sum-exp go back to their positions (segments laid end to end at their padded
    length, then cut to L: the original's `scattering`), positions a head does not read carry log-sum-exp -1e8;
  - the branches are summed with weights softmax_i(lse_i) per position and head, which is one softmax over the
    union (a multiset: a key read by two branches counts twice) of the keys the branches give that query.
"""

import torch
import torch.nn.functional as F
from torch import nn

UNREAD_LSE = -1e8  # the log-sum-exp the original gives a position a head's branch does not read
_SCORES_PER_CHUNK = 1 << 24  # attention scores held at once (64 MiB in fp32): long slides in bounded memory


class DilatedSelfAttention(nn.Module):
    """torchscale's attention projections (`q_proj`, `k_proj`, `v_proj`, `out_proj`, `inner_attn_ln`) around
    LongNet's dilated attention over all branches."""

    def __init__(self, width: int, heads: int, segment_lengths, dilation_ratios, eps: float):
        super().__init__()
        if width % heads or len(segment_lengths) != len(dilation_ratios):
            raise ValueError(f"width {width} / {heads} heads, {segment_lengths} segments vs {dilation_ratios} ratios")
        self.heads = heads
        self.branches = tuple(zip(segment_lengths, dilation_ratios))
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(width, width) for _ in range(4))
        self.inner_attn_ln = nn.LayerNorm(width, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = (proj(x).view(batch, length, self.heads, -1) for proj in (self.q_proj, self.k_proj, self.v_proj))
        outs, lses = zip(*(dilated_branch(q, k, v, w, r) for w, r in self.branches))
        weights = torch.softmax(torch.stack(lses), dim=0).unsqueeze(-1)  # [branches, B, L, H, 1]
        attended = (torch.stack(outs) * weights).sum(0).reshape(batch, length, width)
        return self.out_proj(self.inner_attn_ln(attended))


def dilated_branch(q, k, v, segment_length: int, ratio: int):
    """One (segment length, dilation) branch: output [B, L, H, D] and log-sum-exp [B, L, H] at every position."""
    batch, length, heads, dim = q.shape
    segment = min(segment_length, length)
    segments = -(-length // segment)
    padded = -(-segment // ratio) * ratio  # a segment's length once zero-padded to whole dilation steps
    group = -(-heads // ratio)  # heads per group: the original pads the heads to a multiple of the ratio
    offset = torch.arange(heads) // group  # the residue (mod ratio) of the positions each head reads
    head = torch.arange(heads)

    def sparse(x):  # [B, L, H, D] -> [B, segments, padded / ratio, H, D]: each head's positions of each segment
        x = F.pad(x, (0, 0, 0, 0, 0, segments * segment - length)).view(batch, segments, segment, heads, dim)
        x = F.pad(x, (0, 0, 0, 0, 0, padded - segment)).view(batch, segments, padded // ratio, ratio, heads, dim)
        return x[:, :, :, offset, head, :]

    def rows(x):  # -> [B * segments * H, padded / ratio, D]: one attention problem a row
        return x.permute(0, 1, 3, 2, 4).reshape(-1, padded // ratio, dim)

    out, lse = softmax_attention(rows(sparse(q)), rows(sparse(k)), rows(sparse(v)))
    out = out.view(batch, segments, heads, padded // ratio, dim).permute(0, 1, 3, 2, 4)
    lse = lse.view(batch, segments, heads, padded // ratio).permute(0, 1, 3, 2)
    dense_out = q.new_zeros(batch, segments, padded // ratio, ratio, heads, dim)
    dense_lse = q.new_full((batch, segments, padded // ratio, ratio, heads), UNREAD_LSE)
    dense_out[:, :, :, offset, head, :] = out
    dense_lse[:, :, :, offset, head] = lse
    # Segments end to end at their padded length, then the first L positions: the original's `scattering`.
    return (dense_out.reshape(batch, segments * padded, heads, dim)[:, :length],
            dense_lse.reshape(batch, segments * padded, heads)[:, :length])


def softmax_attention(q, k, v):
    """Unmasked softmax(q k^T / sqrt(D)) v per row [N, M, D], with each query's log-sum-exp [N, M], in chunks of rows."""
    rows_at_once = max(1, _SCORES_PER_CHUNK // (q.shape[1] * k.shape[1]))
    outs, lses = [], []
    for start in range(0, q.shape[0], rows_at_once):
        part = slice(start, start + rows_at_once)
        scores = q[part] @ k[part].transpose(1, 2) * q.shape[-1] ** -0.5
        top = scores.amax(dim=-1, keepdim=True)
        weights = torch.exp(scores - top)  # one pass of exp for both the output and the log-sum-exp
        total = weights.sum(dim=-1, keepdim=True)
        outs.append((weights @ v[part]) / total)
        lses.append((top + torch.log(total)).squeeze(-1))
    return torch.cat(outs), torch.cat(lses)


class FeedForward(nn.Module):
    """torchscale's FeedForwardNetwork with subln: fc1, exact GELU, `ffn_layernorm`, fc2."""

    def __init__(self, width: int, hidden: int, eps: float):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)
        self.ffn_layernorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.ffn_layernorm(F.gelu(self.fc1(x))))


class LongNetLayer(nn.Module):
    """torchscale's EncoderLayer (pre-LayerNorm, alpha 1) with LongNet's dilated attention."""

    def __init__(self, width: int, heads: int, hidden: int, segment_lengths, dilation_ratios, eps: float):
        super().__init__()
        self.self_attn = DilatedSelfAttention(width, heads, segment_lengths, dilation_ratios, eps)
        self.self_attn_layer_norm = nn.LayerNorm(width, eps=eps)
        self.ffn = FeedForward(width, hidden, eps)
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x))
        return x + self.ffn(self.final_layer_norm(x))


class LongNetEncoder(nn.Module):
    """torchscale's Encoder fed token embeddings (no token table, no positions, no embedding scale): `layers`, then
    `layer_norm` (normalize_output)."""

    def __init__(self, width: int, depth: int, heads: int, hidden: int, segment_lengths, dilation_ratios,
                 eps: float = 1e-5):
        super().__init__()
        self.layers = nn.ModuleList(LongNetLayer(width, heads, hidden, segment_lengths, dilation_ratios, eps)
                                    for _ in range(depth))
        self.layer_norm = nn.LayerNorm(width, eps=eps)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(the last layer's output through `layer_norm`, [input, output of layer 1, ..., of layer depth]): the
        original's `encoder_out` and `encoder_states` (return_all_hiddens)."""
        states = [x]
        for layer in self.layers:
            states.append(layer(states[-1]))
        return self.layer_norm(states[-1]), states
