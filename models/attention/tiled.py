"""Exact tiled attention in plain PyTorch: the Triton kernel's algorithm, on any device.

Queries are cut into tiles of ``block_m``; for each tile, keys are visited in blocks of
``block_n`` (blocks no query of the tile may see are skipped) and each query row keeps a running
max ``m`` and running sum ``l`` of ``exp(s - m)`` (the online softmax), so only a
``block_m x block_n`` slice of the scores exists at any time. Arithmetic is float32 whatever
the input dtype; the output is cast back at the end. GQA is handled by stacking a tile's
queries as ``batch kv_head_index (group tile) d_head``, so each K/V block is used by its query
group without copying K or V per query head.

Inputs are assumed validated (see :mod:`models.attention.validate`).
"""

from __future__ import annotations

import torch

from models.attention.masking import allowed_keys, key_distance
from models.attention.options import AttentionOptions
from models.shapes import Keys, Outputs, Queries, RowLse, Values

DEFAULT_BLOCK_M = 128
DEFAULT_BLOCK_N = 128


def _key_range(
    first_q: int, last_q: int, n_q: int, n_k: int, causal: bool, window: int | None
) -> tuple[int, int]:
    """Keys ``[lo, hi)`` that queries ``first_q..last_q`` may see; other key blocks are skipped."""
    if causal:
        shift = n_k - n_q
        lo = 0 if window is None else max(0, first_q + shift - window + 1)
        return lo, max(lo, min(n_k, last_q + shift + 1))
    if window is None:
        return 0, n_k
    return max(0, first_q - window + 1), min(n_k, last_q + window)


def tiled_attention(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions,
    *,
    block_m: int = DEFAULT_BLOCK_M,
    block_n: int = DEFAULT_BLOCK_N,
) -> tuple[Outputs, RowLse]:
    """Attention output and per-row natural-log LSE, computed tile by tile.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        v: ``batch kv_head_index key_pos d_head``.
        options: the softmax terms, validated (see :mod:`models.attention.masking` for the
            masking rules).
        block_m: queries per tile.
        block_n: keys per tile.

    Returns:
        ``out`` (``batch head_index query_pos d_head``, dtype of q) and ``lse``
        (``batch head_index query_pos`` float32; -inf where a row has no valid key, and that
        row's output is zero).
    """
    n_q = q.shape[2]
    tiles = [
        _query_tile(q, k, v, start, min(start + block_m, n_q), options, block_n)
        for start in range(0, n_q, block_m)
    ]
    out = torch.cat([t[0] for t in tiles], dim=2)
    lse = torch.cat([t[1] for t in tiles], dim=2)
    return out.to(q.dtype), lse


def _query_tile(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    first: int,
    end: int,
    options: AttentionOptions,
    block_n: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 output ``batch head_index tile d_head`` and LSE of queries ``first..end-1``."""
    causal, window, key_padding_mask = options.causal, options.window, options.padding
    alibi_slopes, scale = options.alibi, options.scale_for(q.shape[3])
    b, n_heads, n_q, d = q.shape
    n_kv, n_k = k.shape[1], k.shape[2]
    group, size = n_heads // n_kv, end - first
    rows = group * size  # GQA: the query heads of one K/V head stacked as rows
    q_rows = q[:, :, first:end].to(torch.float32).reshape(b, n_kv, rows, d)
    q_pos = first + torch.arange(rows, device=q.device) % size
    slopes = None
    if alibi_slopes is not None:  # one slope per row: head = kv * group + row // size
        slopes = alibi_slopes.to(torch.float32).reshape(n_kv, group).repeat_interleave(size, 1)

    m = torch.full((b, n_kv, rows), float("-inf"), device=q.device)
    l = torch.zeros((b, n_kv, rows), device=q.device)
    acc = torch.zeros((b, n_kv, rows, d), device=q.device)
    lo, hi = _key_range(first, end - 1, n_q, n_k, causal, window)
    for start in range(lo - lo % block_n, hi, block_n):
        stop = min(start + block_n, n_k)
        k_pos = torch.arange(start, stop, device=q.device)
        s = torch.matmul(q_rows, k[:, :, start:stop].to(torch.float32).transpose(-1, -2)) * scale
        s = options.capped(s)
        if slopes is not None:
            s = s - slopes[:, :, None] * key_distance(q_pos, k_pos, n_q, n_k, causal=causal)
        valid = allowed_keys(q_pos, k_pos, n_q, n_k, causal=causal, window=window)[None, None]
        if key_padding_mask is not None:
            valid = valid & key_padding_mask[:, None, None, start:stop]
        s = s.masked_fill(~valid, float("-inf"))
        m, l, acc = _online_softmax_step(m, l, acc, s, v[:, :, start:stop].to(torch.float32))

    has_key = l > 0
    l_safe = torch.where(has_key, l, 1.0)
    out = torch.where(has_key[..., None], acc / l_safe[..., None], 0.0)
    lse = torch.where(has_key, m + torch.log(l_safe), float("-inf"))
    return out.reshape(b, n_heads, size, d), lse.reshape(b, n_heads, size)


def _online_softmax_step(
    m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, s: torch.Tensor, v_blk: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fold one block of masked scores into the running max, sum and weighted value sum.

    Args:
        m: ``... rows`` running max (-inf while a row has seen no valid key).
        l: ``... rows`` running sum of ``exp(s - m)``.
        acc: ``... rows d_head`` running sum of ``exp(s - m) @ v``.
        s: ``... rows block`` scores, -inf where masked.
        v_blk: ``... block d_head`` values of this block.

    Returns:
        The updated ``(m, l, acc)``; new tensors, the inputs are left as they were.
    """
    m_new = torch.maximum(m, s.amax(dim=-1))
    # A row with no valid key so far has m_new = -inf; subtract 0 instead so exp gives 0, not NaN.
    m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
    p = torch.exp(s - m_safe[..., None])
    alpha = torch.exp(m - m_safe)
    l_new = l * alpha + p.sum(dim=-1)
    acc_new = acc * alpha[..., None] + torch.matmul(p, v_blk)
    return m_new, l_new, acc_new
