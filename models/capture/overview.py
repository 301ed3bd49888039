"""Every head's whole pattern, max-pooled, computed exactly while the capture pass runs.

A block of the overview shows the largest weight of its ``factor x factor`` cells, over every
query row and every key. The weights are never formed: per row, the largest logit of each
block of keys is found first, and only then is the row's log-sum-exp subtracted and the
exponential taken (``exp`` and subtraction are monotone, so ``max exp(s - lse) =
exp(max s - lse)`` in floating point too). The logits come from one float32 matrix product per
chunk of query rows, with keys reordered so that the ``factor`` keys of a block lie ``P``
columns apart: the block maximum is then a running maximum over ``factor`` contiguous slabs
instead of a reduction over tiny groups (which torch runs 20-100x slower).

Low-precision q and k (bfloat16, float16) are upcast per chunk, so the overview is the float32
computation from the model's own q and k.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float

OVERVIEW = 256
THUMB = 64
CHUNK_BYTES = 8 * 1024**2  # logits per chunk: small enough to stay in the last-level cache


def overview_factor(n_tokens: int, size: int = OVERVIEW) -> int:
    """Positions per pixel edge of an overview of at most ``size`` pixels."""
    return max(1, math.ceil(n_tokens / size))


def thumb_factor(n_tokens: int, size: int = THUMB, overview: int = OVERVIEW) -> int:
    """Positions per pixel edge of a thumbnail of at most ``size`` pixels that is a whole
    number of overview pixels, so thumbnails are the overview max-pooled again."""
    base = overview_factor(n_tokens, overview)
    return base * math.ceil(math.ceil(n_tokens / base) / size)


def _key_slabs(k: torch.Tensor, factor: int, n_pix: int) -> torch.Tensor:
    """``kv_head d_head factor pixel`` float32: key ``p * factor + t`` at ``[..., t, p]``, keys
    past the end zero (masked later)."""
    n_kv, n, d = k.shape
    keys = k.to(torch.float32)
    if n_pix * factor > n:
        keys = torch.nn.functional.pad(keys, (0, 0, 0, n_pix * factor - n))
    return keys.view(n_kv, n_pix, factor, d).permute(0, 3, 2, 1).contiguous()


def _max_over(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Maximum over ``dim`` by halving (a handful of vectorised calls for any size)."""
    while x.shape[dim] > 1:
        half = x.shape[dim] // 2
        top = torch.maximum(x.narrow(dim, 0, half), x.narrow(dim, half, half))
        if x.shape[dim] % 2:
            top = torch.cat([top, x.narrow(dim, 2 * half, 1)], dim=dim)
        x = top
    return x.squeeze(dim)


def _chunk_maxima(
    q_rows: torch.Tensor, slabs: torch.Tensor, n_blocks: int, r0: int, n: int, causal: bool
) -> torch.Tensor:
    """``head_index rows n_blocks`` largest raw logit ``q . k`` of each block of keys per row."""
    n_kv, d, factor, _ = slabs.shape
    n_heads, n_rows, _ = q_rows.shape
    keys = slabs[..., :n_blocks].reshape(n_kv, d, factor * n_blocks)
    logits = torch.matmul(q_rows.unflatten(0, (n_kv, -1)), keys[:, None]).view(
        n_heads, n_rows, factor, n_blocks
    )
    first = r0 // factor if causal else n_blocks - 1
    if causal or n_blocks * factor > n:  # keys after the row or past the end never win
        device = q_rows.device
        key = (
            torch.arange(first, n_blocks, device=device)[None, :] * factor
            + torch.arange(factor, device=device)[:, None]
        )
        row = torch.arange(r0, r0 + n_rows, device=device)[:, None, None]
        masked = key[None] > row if causal else (key >= n)[None]
        logits[..., first:].masked_fill_(masked, float("-inf"))
    return _max_over(logits, 2)


def layer_overview(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    lse: Float[torch.Tensor, "head_index query_pos"],
    scale: float,
    causal: bool,
    factor: int,
) -> Float[torch.Tensor, "head_index pixel pixel"]:
    """Every head's pattern ``exp(q k^T * scale - lse)`` of one layer, max-pooled exactly.

    Args:
        q: the layer's queries as the softmax saw them (any float dtype; upcast per chunk).
        k: its keys (fewer heads for GQA/MQA: query head ``h`` reads ``h // group``).
        lse: float32 log-sum-exp of every row.
        scale: the logit multiplier.
        causal: keys after the query are masked.
        factor: positions per pixel edge.

    Returns:
        ``head_index pixel pixel`` float32 block maxima on ``q``'s device, NaN where a block
        lies wholly above the causal diagonal.
    """
    n_heads, n, _ = q.shape
    n_pix = math.ceil(n / factor)
    slabs = _key_slabs(k, factor, n_pix)
    rows_per_chunk = factor * max(1, CHUNK_BYTES // (4 * n_heads * n_pix * factor * factor))
    blocks_per_chunk = rows_per_chunk // factor
    out = torch.full((n_heads, n_pix, n_pix), float("nan"), device=q.device)
    for b0 in range(0, n_pix, blocks_per_chunk):
        b1 = min(b0 + blocks_per_chunk, n_pix)
        r0, r1 = b0 * factor, min(b1 * factor, n)
        n_blocks = b1 if causal else n_pix
        best = _chunk_maxima(q[:, r0:r1].to(torch.float32), slabs, n_blocks, r0, n, causal)
        best.mul_(scale).sub_(lse[:, r0:r1, None].to(best.device))
        if (r1 - r0) % factor:  # the last rows: pad the block with rows that never win
            best = torch.nn.functional.pad(
                best, (0, 0, 0, factor - (r1 - r0) % factor), value=float("-inf")
            )
        top = _max_over(best.view(n_heads, b1 - b0, factor, n_blocks), 2)
        out[:, b0:b1, :n_blocks] = top.exp()
    if causal:
        out[:, _above_diagonal(n, factor, n_pix, q.device)] = float("nan")
    return out


def _above_diagonal(n: int, factor: int, n_pix: int, device) -> torch.Tensor:
    """``pixel pixel`` blocks whose first key lies after their last query."""
    first_key = torch.arange(n_pix, device=device) * factor
    last_query = torch.clamp((torch.arange(n_pix, device=device) + 1) * factor, max=n) - 1
    return first_key[None, :] > last_query[:, None]


def pool_again(
    overview: Float[np.ndarray, "... pixel pixel"], by: int
) -> Float[np.ndarray, "... thumb thumb"]:
    """Max-pool an overview ``by`` pixels at a time (NaN cells skipped, all-NaN blocks NaN)."""
    if by == 1:
        return np.array(overview, dtype=np.float32)
    p = overview.shape[-1]
    t = math.ceil(p / by)
    padded = np.full((*overview.shape[:-2], t * by, t * by), np.nan, dtype=np.float32)
    padded[..., :p, :p] = overview
    blocks = padded.reshape((*overview.shape[:-2], t, by, t, by))
    return np.fmax.reduce(np.fmax.reduce(blocks, axis=-1), axis=-2)
