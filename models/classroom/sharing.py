"""How query heads share key/value heads (MHA, GQA, MQA) and what each variant weighs.

With ``h`` query heads and ``g`` key/value heads (``g`` divides ``h``), consecutive blocks of
``h / g`` query heads read the same K and V. ``g = h`` is multi-head attention (MHA), ``g = 1``
multi-query attention (MQA), anything in between grouped-query attention (GQA).
"""

from __future__ import annotations

from models.head import HeadGroups, SharingKind

Kind = SharingKind


def sharing_kind(n_heads: int, n_kv_heads: int) -> Kind:
    """``"MHA"`` when every query head has its own K/V, ``"MQA"`` for one shared, else GQA."""
    return HeadGroups.checked(n_heads, n_kv_heads).kind


def check_grouping(n_heads: int, n_kv_heads: int) -> None:
    """Raise ``ValueError`` (message for the user) unless ``n_kv_heads`` divides ``n_heads``."""
    HeadGroups.checked(n_heads, n_kv_heads)


def kv_groups(n_heads: int, n_kv_heads: int) -> list[int]:
    """The key/value head read by each query head, e.g. ``(8, 2) -> [0,0,0,0,1,1,1,1]``."""
    return HeadGroups.checked(n_heads, n_kv_heads).kv_heads()


def attention_params(
    d_model: int, n_heads: int, n_kv_heads: int, d_head: int, bias: bool = False
) -> dict[str, int]:
    """Weights of one attention layer's four projections.

    Args:
        d_model: residual width.
        n_heads: query heads (h).
        n_kv_heads: key/value heads (g).
        d_head: width of one head.
        bias: add one bias per output unit of each projection.

    Returns:
        ``{"W_Q", "W_K", "W_V", "W_O", "total"}`` counts: ``W_Q = d_model h d_head``,
        ``W_K = W_V = d_model g d_head``, ``W_O = h d_head d_model``.
    """
    check_grouping(n_heads, n_kv_heads)
    counts = {
        "W_Q": d_model * n_heads * d_head + (n_heads * d_head if bias else 0),
        "W_K": d_model * n_kv_heads * d_head + (n_kv_heads * d_head if bias else 0),
        "W_V": d_model * n_kv_heads * d_head + (n_kv_heads * d_head if bias else 0),
        "W_O": n_heads * d_head * d_model + (d_model if bias else 0),
    }
    counts["total"] = sum(counts.values())
    return counts


def divisors(n: int) -> list[int]:
    """Every ``g`` with ``n % g == 0``, ascending (the valid key/value head counts)."""
    return [g for g in range(1, n + 1) if n % g == 0]
