"""Heads' whole patterns max-pooled straight from q, k and the rows' LSE: every head's
thumbnail while the capture pass runs, one head's larger overview when a page shows it.

A block of the overview shows the largest weight of its ``factor x factor`` cells, over every
query row and every key. The weights are never formed: per row, the largest logit of each
block of keys is found first, and only then is the row's log-sum-exp subtracted and the
exponential taken (``exp`` and subtraction are monotone, so ``max exp(s - lse) =
exp(max s - lse)`` in floating point too). The logits come from one float32 matrix product per
chunk of query rows, with keys reordered so that the ``factor`` keys of a block lie ``P``
columns apart: the block maximum is then a maximum over ``factor`` contiguous slabs, taken by
halving, instead of a reduction over tiny groups (which torch runs 20-100x slower).

Low-precision q and k (bfloat16, float16) are upcast per chunk, so the overview is the float32
computation from the model's own q and k.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from jaxtyping import Float

OVERVIEW = 256  # pixels a side of one head's whole pattern, pooled
THUMB = 64  # pixels a side of a head's picture in the grid, pooled
CHUNK_BYTES = 16 * 1024**2  # running block maxima of one chunk of rows, at most
CHUNKS = 8  # chunks of rows per layer: few calls, little work above the diagonal
HEADS_HINT = 16  # heads assumed when sizing chunks by bytes
ROWS_PER_BLOCK = 8  # past this many rows a block, the capture pass samples its rows
Arithmetic = Literal["float32", "model"]


def overview_factor(n_tokens: int, size: int = OVERVIEW) -> int:
    """Positions per pixel edge of an overview of at most ``size`` pixels."""
    return max(1, math.ceil(n_tokens / size))


def thumb_factor(n_tokens: int, size: int = THUMB, overview: int = OVERVIEW) -> int:
    """Positions per pixel edge of a thumbnail of at most ``size`` pixels that is a whole
    number of overview pixels (a thumbnail pixel covers whole overview pixels)."""
    base = overview_factor(n_tokens, overview)
    return base * math.ceil(math.ceil(n_tokens / base) / size)


def _key_slabs(k: torch.Tensor, factor: int, n_pix: int, folded: bool) -> torch.Tensor:
    """``kv_head factor pixel d``: key ``p * factor + t`` at ``[:, t, p]`` (so the first ``b``
    blocks of slab ``t`` are one contiguous matrix), keys past the end zero; float32, or
    ``k``'s dtype with two rows of -1 appended (``folded``: the queries' last two columns then
    subtract each row's LSE inside the product)."""
    n_kv, n, _ = k.shape
    keys = k if folded else k.to(torch.float32)
    if folded:
        keys = torch.cat([keys, keys.new_full((n_kv, n, 2), -1.0)], dim=-1)
    if n_pix * factor > n:
        keys = torch.nn.functional.pad(keys, (0, 0, 0, n_pix * factor - n))
    return keys.view(n_kv, n_pix, factor, keys.shape[-1]).transpose(1, 2).contiguous()


def _max_over(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Maximum over ``dim`` by halving (a handful of vectorised calls for any size; torch's
    own reduction over a middle axis is many times slower on the CPU)."""
    while x.shape[dim] > 1:
        half = x.shape[dim] // 2
        top = torch.maximum(x.narrow(dim, 0, half), x.narrow(dim, half, half))
        if x.shape[dim] % 2:
            top = torch.cat([top, x.narrow(dim, 2 * half, 1)], dim=dim)
        x = top
    return x.squeeze(dim)


def rows_per_chunk(n: int, factor: int, stride: int = 1) -> int:
    """Query rows per chunk: whole pixel rows, about 8 chunks a layer (fewer calls), and at
    most :data:`CHUNK_BYTES` of logits (``factor / stride`` rows a block by every key)."""
    blocks = math.ceil(n / factor)
    by_calls = math.ceil(blocks / CHUNKS)
    by_bytes = max(1, CHUNK_BYTES // (4 * HEADS_HINT * (factor // stride) * blocks * factor))
    return factor * max(1, min(by_calls, by_bytes))


def row_stride(factor: int, rows_per_block: int | None = None) -> int:
    """Query rows between sampled rows of a block: 1 (every row) while a block has at most
    ``rows_per_block`` rows (default :data:`ROWS_PER_BLOCK`), else the largest divisor of
    ``factor`` that keeps at least that many."""
    most = rows_per_block or ROWS_PER_BLOCK
    if factor <= most:
        return 1
    return max(s for s in range(1, factor // most + 1) if factor % s == 0)


def _chunk_maxima(rows: torch.Tensor, slabs: torch.Tensor, n_blocks: int, n: int) -> torch.Tensor:
    """``head_index rows n_blocks`` largest raw logit ``q . k`` of each block of keys per row:
    one product of the rows with the first ``n_blocks`` blocks' keys in slab order, then a
    maximum over the ``factor`` slabs by halving (contiguous halves, a handful of calls).

    No causal mask: a row's own block and the blocks after it also see later keys, but those
    cells are overwritten (:func:`_diagonal`) or lie wholly above the diagonal (NaN).
    """
    n_kv, factor, n_pix, d = slabs.shape
    n_heads, n_rows, _ = rows.shape
    # query head h = kv * group + j: one product per key head, no broadcast copy of the keys
    queries = rows.reshape(n_kv, -1, rows.shape[-1])
    keys = slabs[:, :, :n_blocks].reshape(n_kv, factor * n_blocks, d)
    logits = torch.bmm(queries, keys.transpose(1, 2)).view(n_kv, -1, factor, n_blocks)
    real = n - (n_pix - 1) * factor  # keys of the last block that exist
    if real < factor and n_blocks == n_pix:  # padding never wins
        logits[:, :, real:, n_pix - 1] = float("-inf")
    return _max_over(logits, 2).view(n_heads, n_rows, n_blocks)


def _diagonal(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float, factor: int, stride: int
) -> torch.Tensor:
    """``head_index pixel`` causal blocks on the diagonal, in float32 (a few MFLOP a layer)."""
    n_heads, n, d = q.shape
    n_kv, group, n_pix = k.shape[0], n_heads // k.shape[0], math.ceil(n / factor)
    pad = n_pix * factor - n
    queries, keys, sums = q.to(torch.float32), k.to(torch.float32), lse.to(torch.float32)
    if pad:  # a last block that is not whole
        queries = torch.nn.functional.pad(queries, (0, 0, 0, pad))
        keys = torch.nn.functional.pad(keys, (0, 0, 0, pad))
        sums = torch.nn.functional.pad(sums, (0, pad), value=float("inf"))
    blocks = queries.reshape(n_kv, group, n_pix, factor, d)[:, :, :, ::stride]
    per_block = blocks.shape[3]
    logits = torch.bmm(
        blocks.permute(0, 2, 1, 3, 4).reshape(n_kv * n_pix, group * per_block, d),
        keys.reshape(n_kv * n_pix, factor, d).transpose(1, 2),
    ).view(n_kv, n_pix, group, per_block, factor)
    offsets = torch.arange(per_block, device=q.device) * stride
    later = torch.arange(factor, device=q.device)[None, :] > offsets[:, None]
    best = logits.masked_fill_(later, float("-inf")).amax(dim=-1).mul_(scale)
    rows = sums.reshape(n_kv, group, n_pix, factor)[..., ::stride].permute(0, 2, 1, 3)
    top = best.sub_(rows).amax(dim=-1)  # kv pixel group
    return top.permute(0, 2, 1).reshape(n_heads, n_pix).exp()


def layer_overview(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    lse: Float[torch.Tensor, "head_index query_pos"],
    scale: float,
    causal: bool,
    factor: int,
    arithmetic: Arithmetic = "float32",
    stride: int = 1,
) -> Float[torch.Tensor, "head_index pixel pixel"]:
    """Every head's pattern ``exp(q k^T * scale - lse)`` of one layer, max-pooled.

    Args:
        q: the layer's queries as the softmax saw them (any float dtype).
        k: its keys (fewer heads for GQA/MQA: query head ``h`` reads ``h // group``).
        lse: float32 log-sum-exp of every row.
        scale: the logit multiplier.
        causal: keys after the query are masked.
        factor: positions per pixel edge.
        arithmetic: ``float32``: q and k upcast per chunk, the result is the exact max-pool of
            the float32 pattern. ``model``: the logit products run in q's own dtype (bfloat16
            products run several times faster on CPUs with native bfloat16), with each row's
            LSE folded into the product so that only ``s - lse`` is rounded: each block's
            weight ``w`` is then within a relative ``2^-8 (|ln w| + 1)`` of the exact one in
            bfloat16 (``2^-11 (|ln w| + 1)`` in float16). Same as ``float32`` for float32 q.
        stride: read every ``stride``-th query row of each block (from its first; a divisor of
            ``factor``; see :func:`row_stride`): a diagonal, an offset stripe or a sink column
            lights every row, so the picture keeps them at ``1 / stride`` of the cost; 1 reads
            every row and is exact.

    Returns:
        ``head_index pixel pixel`` float32 block maxima on ``q``'s device, NaN where a block
        lies wholly above the causal diagonal.
    """
    n_heads, n, _ = q.shape
    folded = arithmetic == "model" and q.dtype in (torch.bfloat16, torch.float16)
    n_pix = math.ceil(n / factor)
    slabs = _key_slabs(k, factor, n_pix, folded)
    chunk_rows = rows_per_chunk(n, factor, stride)
    out = torch.full((n_heads, n_pix, n_pix), float("nan"), device=q.device)
    for r0 in range(0, n, chunk_rows):
        r1 = min(r0 + chunk_rows, n)
        b0, b1 = r0 // factor, math.ceil(r1 / factor)
        n_blocks = b1 if causal else n_pix
        rows_lse = lse[:, r0:r1:stride].to(device=q.device, dtype=torch.float32)
        picked = q[:, r0:r1:stride]
        if folded:  # q . k - c with c ~ lse / scale in two half-precision parts
            c = rows_lse / scale
            c_hi = c.to(q.dtype)
            c_lo = (c - c_hi.to(torch.float32)).to(q.dtype)
            rows = torch.cat([picked, c_hi[..., None], c_lo[..., None]], dim=-1)
            shift = (c_hi.to(torch.float32) + c_lo.to(torch.float32)) * scale - rows_lse
            best = _chunk_maxima(rows, slabs, n_blocks, n)
            best = best.to(torch.float32).mul_(scale).add_(shift[..., None])
        else:
            best = _chunk_maxima(picked.to(torch.float32), slabs, n_blocks, n)
            best.mul_(scale).sub_(rows_lse[..., None])
        per_block = factor // stride
        if best.shape[1] % per_block:  # the last rows: pad the block with rows that never win
            best = torch.nn.functional.pad(
                best, (0, 0, 0, per_block - best.shape[1] % per_block), value=float("-inf")
            )
        top = _max_over(best.view(n_heads, b1 - b0, per_block, n_blocks), 2)
        out[:, b0:b1, :n_blocks] = top.exp()
    if causal:
        pixels = torch.arange(n_pix, device=q.device)
        out[:, pixels, pixels] = _diagonal(q, k, lse, scale, factor, stride)
        out[:, _above_diagonal(n, factor, n_pix, q.device)] = float("nan")
    return out


def _above_diagonal(n: int, factor: int, n_pix: int, device: torch.device) -> torch.Tensor:
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
    pooled: np.ndarray = np.fmax.reduce(np.fmax.reduce(blocks, axis=-1), axis=-2)
    return pooled
