"""Rebuild any window of an attention pattern from q, k and the kernel's LSE.

With ``lse = log sum_j exp(s_ij)`` per row, ``P_ij = exp(s_ij - lse_i)`` exactly, where
``s = q k^T * scale + bias`` (masked entries are 0). So a page can show a 200 x 200 corner of
a 16k-token pattern without ever holding the 16k x 16k matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import torch

from models.attention.masking import allowed_keys, key_distance
from models.attention.options import NO_OPTIONS, AttentionOptions
from models.attention.validate import check_lse, check_options, check_qk
from models.shapes import Keys, Queries, RowLse, Scores

Index: TypeAlias = slice | torch.Tensor | Sequence[int]
MASK_BYTES = 11
"""Bytes a rebuilt cell's masks hold beside its float32 weight while :func:`pattern_of_rows`
runs: the causal mask's int64 distances and three bool masks, one head's block at a time."""


def _positions(index: Index, n: int, device: torch.device, name: str) -> torch.Tensor:
    """Absolute positions picked by a slice, an index tensor or a list of ints."""
    if isinstance(index, torch.Tensor):
        if index.dim() != 1 or index.is_floating_point() or index.dtype == torch.bool:
            raise ValueError(
                f"{name} must be a slice or a 1-D integer index; got {index.dtype} "
                f"with {index.dim()} dims"
            )
        index = index.to(device=device, dtype=torch.long)
    elif not isinstance(index, slice):
        index = torch.as_tensor(list(index), dtype=torch.long, device=device)
    try:
        return torch.arange(n, device=device)[index]  # also resolves negative indices
    except IndexError as err:
        raise ValueError(f"{name} indexes outside 0..{n - 1}: {err}") from err


def rebuild_pattern(
    q: Queries,
    k: Keys,
    lse: RowLse,
    rows: Index,
    cols: Index,
    options: AttentionOptions = NO_OPTIONS,
) -> Scores:
    """A window of the attention pattern, ``exp(q k^T * scale + bias - lse)``, masked to 0.

    Pass the same options that produced ``lse`` with :func:`models.attention.attention`.

    Args:
        q: ``batch head_index query_pos d_head``.
        k: ``batch kv_head_index key_pos d_head``.
        lse: ``batch head_index query_pos`` float32 LSE from :func:`attention`.
        rows: query positions: a slice, a 1-D integer tensor or a list of ints.
        cols: key positions, likewise.
        options: the options that produced ``lse``, as for :func:`attention`.

    Returns:
        ``batch head_index len(rows) len(cols)`` float32 pattern entries.

    Raises:
        ValueError: for inconsistent shapes, dtypes, options or out-of-range indices.
    """
    check_qk(q, k)
    check_lse(q, lse)
    options = check_options(q, k, options)
    n_q, n_k = q.shape[2], k.shape[2]
    q_pos = _positions(rows, n_q, q.device, "rows")
    k_pos = _positions(cols, n_k, q.device, "cols")
    return pattern_of_rows(
        q[:, :, q_pos],
        k[:, :, k_pos],
        lse[:, :, q_pos],
        q_pos,
        k_pos,
        n_q,
        n_k,
        options,
    )


def pattern_of_rows(
    q_rows: Queries,
    k_cols: Keys,
    lse_rows: RowLse,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    n_q: int,
    n_k: int,
    options: AttentionOptions,
) -> Scores:
    """:func:`rebuild_pattern` on query rows and keys already picked out (a caller holding q
    and k in memory it must not hand over whole, such as a read-only store, copies only these).

    Args:
        q_rows: ``batch head_index len(q_pos) d_head``, the rows ``q_pos`` of q.
        k_cols: ``batch kv_head_index len(k_pos) d_head``, the keys ``k_pos`` of k.
        lse_rows: ``batch head_index len(q_pos)``, their LSE.
        q_pos, k_pos: the rows' and keys' absolute positions (1-D integer tensors).
        n_q, n_k: the lengths of the whole q and k (masks are aligned on them).
        options: as for :func:`rebuild_pattern` (nothing is validated here).
    """
    causal, window, key_padding_mask = options.causal, options.window, options.padding
    alibi_slopes, scale = options.alibi, options.scale_for(q_rows.shape[3])
    b, n_heads, n_rows, d = q_rows.shape
    n_kv, n_cols = k_cols.shape[1], k_cols.shape[2]
    group = n_heads // n_kv
    # query head h reads key head h // group: one product per key head over the rows of all
    # its query heads (a broadcast over the group would copy the keys group times)
    q_sel = q_rows.to(torch.float32).reshape(b, n_kv, group * n_rows, d)
    k_sel = k_cols.to(torch.float32)  # b kv cols d
    # one block of scores, changed in place: a rebuilt layer costs its own size, not three
    s = (q_sel @ k_sel.transpose(-1, -2)).reshape(b, n_heads, n_rows, n_cols).mul_(scale)
    s = options.capped(s)
    if alibi_slopes is not None:
        dist = key_distance(q_pos, k_pos, n_q, n_k, causal=causal)
        s.sub_(alibi_slopes.to(torch.float32)[:, None, None] * dist)
    hidden = ~allowed_keys(q_pos, k_pos, n_q, n_k, causal=causal, window=window)[None, None]
    if key_padding_mask is not None:
        hidden = hidden | ~key_padding_mask[:, None, None, k_pos]
    lse_sel = lse_rows.to(torch.float32)[..., None]
    # exp(-inf) is exactly 0: hidden keys, and rows with no key at all (LSE -inf), come out 0;
    # the masks stay the size of one head's block and one LSE, not of every head's scores
    s.sub_(lse_sel).masked_fill_(hidden, float("-inf"))
    return s.masked_fill_(lse_sel == float("-inf"), float("-inf")).exp_()
