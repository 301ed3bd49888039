"""Naive attention that materialises the full pattern: the yardstick for the fast paths.

Written independently of :mod:`models.attention.masking` (masks come from ``tril``/``triu`` and
GQA from ``repeat_interleave``), so a shared bug cannot hide in both. Same semantics as
:func:`models.attention.attention`; computes in float64 unless another ``compute_dtype`` is asked
for (the same-dtype baseline of the FlashAttention error rule).
"""

from __future__ import annotations

import math

import torch

from models.attention.options import NO_OPTIONS, AttentionOptions
from models.shapes import Keys, Outputs, Queries, RowLse, Scores, Values


def _mask(
    n_q: int, n_k: int, causal: bool, window: int | None, device: torch.device
) -> torch.Tensor:
    """``query_pos key_pos`` bool mask: True where a key is visible."""
    full = torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    if causal:  # bottom-right: query i sees keys j <= i + (n_k - n_q)
        mask = full.tril(diagonal=n_k - n_q)
        if window is not None:
            mask = mask & full.triu(diagonal=n_k - n_q - window + 1)
        return mask
    if window is not None:
        return full.tril(diagonal=window - 1) & full.triu(diagonal=-(window - 1))
    return full


def _alibi(
    slopes: torch.Tensor, n_q: int, n_k: int, causal: bool, dtype: torch.dtype
) -> torch.Tensor:
    """``head_index query_pos key_pos`` bias ``-slope * distance``."""
    i = torch.arange(n_q, dtype=dtype, device=slopes.device)[:, None]
    j = torch.arange(n_k, dtype=dtype, device=slopes.device)[None, :]
    dist = (i + (n_k - n_q) - j) if causal else (i - j).abs()
    return -slopes.to(dtype)[:, None, None] * dist


def naive_scores(
    q: Queries,
    k: Keys,
    options: AttentionOptions = NO_OPTIONS,
    *,
    compute_dtype: torch.dtype = torch.float64,
) -> tuple[Scores, Scores]:
    """Scaled, capped, biased logits and the visibility mask, fully materialised.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        options: the softmax terms (see :class:`AttentionOptions`).
        compute_dtype: dtype of every operation.

    Returns:
        ``scores`` (``batch head_index query_pos key_pos``, -inf where masked) and ``mask``
        (same shape, bool, True = visible).
    """
    n_heads, n_q, d = q.shape[1], q.shape[2], q.shape[3]
    n_k = k.shape[2]
    k_full = k.repeat_interleave(n_heads // k.shape[1], dim=1).to(compute_dtype)
    scale = 1.0 / math.sqrt(d) if options.scale is None else options.scale
    scores = q.to(compute_dtype) @ k_full.transpose(-1, -2) * scale
    if options.softcap is not None:  # written out here, not shared with the fast paths
        scores = torch.tanh(scores / options.softcap) * options.softcap
    if options.alibi is not None:
        scores = scores + _alibi(options.alibi, n_q, n_k, options.causal, compute_dtype)
    mask = _mask(n_q, n_k, options.causal, options.window, q.device)[None, None]
    if options.padding is not None:
        mask = mask & options.padding[:, None, None, :]
    mask = mask.expand(scores.shape)
    return scores.masked_fill(~mask, float("-inf")), mask


def naive_attention(
    q: Queries,
    k: Keys,
    v: Values,
    options: AttentionOptions = NO_OPTIONS,
    *,
    compute_dtype: torch.dtype = torch.float64,
) -> tuple[Outputs, RowLse, Scores]:
    """Output, LSE and pattern of attention, all in ``compute_dtype``.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        v: ``batch kv_head_index key_pos d_head``.
        options: as :func:`naive_scores`.
        compute_dtype: dtype of every operation (float64 for a reference).

    Returns:
        ``out`` (``batch head_index query_pos d_head``), ``lse`` (``batch head_index
        query_pos``, natural log, -inf for a row with no visible key) and ``pattern``
        (``batch head_index query_pos key_pos``, rows sum to 1, or 0 when nothing is visible).
    """
    scores, mask = naive_scores(q, k, options, compute_dtype=compute_dtype)
    lse = torch.logsumexp(scores, dim=-1)
    pattern = torch.where(mask, torch.exp(scores - lse[..., None]), 0.0).to(compute_dtype)
    v_full = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1).to(compute_dtype)
    return pattern @ v_full, lse, pattern
