"""Which keys a query may see, and the ALiBi distance, from position indices.

The rules, shared by the tiled path, :func:`rebuild_pattern` and the Triton kernel (which writes
the same arithmetic inline):

- causal with ``n_q != n_k`` is aligned bottom-right: query ``i`` sits at key position
  ``i_aligned = i + (n_k - n_q)`` and sees keys ``j <= i_aligned`` (the last query sees every key,
  as when decoding with a KV cache). A query with ``i_aligned < 0`` sees no key.
- causal with a window ``w``: keys ``i_aligned - w < j <= i_aligned`` (the last ``w`` keys,
  itself included).
- non-causal with a window ``w``: keys with ``|i - j| < w`` (no alignment shift).
- ALiBi adds ``-slope * distance`` where distance is ``i_aligned - j`` when causal and ``|i - j|``
  when not.
- a key padding mask (``batch key_pos``, True = valid) removes keys for every query of that batch.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int

Positions = Int[torch.Tensor, "pos"]


def aligned_queries(q_pos: Positions, n_q: int, n_k: int, causal: bool) -> Positions:
    """Query positions on the key axis: shifted by ``n_k - n_q`` when causal.

    Args:
        q_pos: ``query_pos`` integer indices.
        n_q: number of queries.
        n_k: number of keys.
        causal: whether the bottom-right causal alignment applies.

    Returns:
        ``query_pos`` integer positions comparable with key indices.
    """
    return q_pos + (n_k - n_q) if causal else q_pos


def allowed_keys(
    q_pos: Positions, k_pos: Positions, n_q: int, n_k: int, *, causal: bool, window: int | None
) -> Bool[torch.Tensor, "query_pos key_pos"]:
    """Bool ``query_pos key_pos`` matrix: True where the query may attend to the key.

    Args:
        q_pos: ``query_pos`` integer indices in ``[0, n_q)``.
        k_pos: ``key_pos`` integer indices in ``[0, n_k)``.
        n_q: number of queries.
        n_k: number of keys.
        causal: apply the bottom-right causal mask.
        window: keep only the last ``window`` keys (causal) or ``|i - j| < window``; None = all.

    Returns:
        ``query_pos key_pos`` bool tensor (padding mask not included).
    """
    rel = aligned_queries(q_pos, n_q, n_k, causal)[:, None] - k_pos[None, :]
    ok = torch.ones(rel.shape, dtype=torch.bool, device=rel.device)
    if causal:
        ok = rel >= 0
        if window is not None:
            ok = ok & (rel < window)
    elif window is not None:
        ok = rel.abs() < window
    return ok


def key_distance(
    q_pos: Positions, k_pos: Positions, n_q: int, n_k: int, *, causal: bool
) -> Float[torch.Tensor, "query_pos key_pos"]:
    """ALiBi distance ``query_pos key_pos`` as float32: ``i_aligned - j`` (causal) or ``|i - j|``.

    Args:
        q_pos: ``query_pos`` integer indices.
        k_pos: ``key_pos`` integer indices.
        n_q: number of queries.
        n_k: number of keys.
        causal: use the aligned signed distance instead of the absolute one.

    Returns:
        ``query_pos key_pos`` float32 distances.
    """
    rel = aligned_queries(q_pos, n_q, n_k, causal)[:, None] - k_pos[None, :]
    return (rel if causal else rel.abs()).to(torch.float32)
