"""Why a whole row looks the way it does, and where one pair of parts acts over the prompt.

Both are arithmetic on what :func:`models.circuits.why_keep.keep` kept (one pass):

- :func:`row_split`: every key of one query. Each query-side part's share of each key's logit
  (``scale q_a(i) . k(j)``) and each key-side part's (``scale q(i) . k_b(j)``), and the pairs
  averaged under the row's own weights: ``sum_j w_ij scale q_a(i) . k_b(j)``, which adds up to
  the row's expected logit ``sum_j w_ij s(i, j)`` (less ALiBi's part) exactly, since the logit
  is linear in each key's parts.
- :func:`pair_map`: one (query part, key part) pair at every cell of the head's pattern, and
  its weighted mean per query: where in the prompt, say, the position embeddings on both sides
  make the previous-token stripe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.why import CellError
from models.circuits.why_keep import KeptHead
from models.head import Head


@dataclass(frozen=True)
class RowSplit:
    """One query's whole row, split by part.

    Attributes:
        head, query: the row.
        query_parts, key_parts: the part names of each side.
        raw: ``key_pos`` the model's logits before any cap.
        weights: ``key_pos`` its weights (0 for keys the query does not see).
        query_shares: ``query_part key_pos`` each query-side part's share of each logit.
        key_shares: ``key_part key_pos`` each key-side part's share of each logit (0 where the
            query does not see the key).
        expected: ``query_part key_part`` the pairs averaged under the row's weights.
    """

    head: Head
    query: int
    query_parts: tuple[str, ...]
    key_parts: tuple[str, ...]
    raw: np.ndarray
    weights: np.ndarray
    query_shares: np.ndarray
    key_shares: np.ndarray
    expected: np.ndarray


def _check_query(kept: KeptHead, query: int) -> None:
    if not 0 <= query < kept.n_pos:
        raise CellError(
            f"The query position {query} is outside the prompt (0 to {kept.n_pos - 1})."
        )


def row_split(kept: KeptHead, query: int) -> RowSplit:
    """Every key of ``query`` split by part (float64, key parts from the kept float32 ones).

    Raises:
        CellError: ``query`` is outside the prompt.
    """
    _check_query(kept, query)
    scale = kept.terms.scale
    raw = kept.raw_row(query)
    weights = kept.terms.weights(raw, query)
    seen = kept.terms.visible(query, kept.n_pos)
    q_parts = kept.query_parts[query].to(torch.float64)
    keys = kept.key_parts  # pos part d_head, float32: summed in float32, as kept
    n, n_parts, d_head = keys.shape
    key_shares = (keys @ kept.q[query]).T.to(torch.float64) * scale
    averaged = (weights.to(torch.float32) @ keys.reshape(n, -1)).reshape(n_parts, d_head)
    averaged = averaged.to(torch.float64)
    return RowSplit(
        head=kept.head,
        query=query,
        query_parts=kept.query.names,
        key_parts=kept.key.names,
        raw=raw.numpy(),
        weights=weights.numpy(),
        query_shares=(q_parts @ kept.k.to(torch.float64).T * scale).numpy(),
        key_shares=(key_shares * seen).numpy(),
        expected=(q_parts @ averaged.T * scale).numpy(),
    )


@dataclass(frozen=True)
class PairMap:
    """One (query part, key part) pair over the whole pattern.

    Attributes:
        head: the head.
        query_part, key_part: the pair.
        values: ``query_pos key_pos`` the pair's share of each logit (NaN where no weight).
        per_query: ``query_pos`` its share averaged under each row's weights.
    """

    head: Head
    query_part: str
    key_part: str
    values: np.ndarray
    per_query: np.ndarray


def pattern(kept: KeptHead) -> tuple[torch.Tensor, torch.Tensor]:
    """``query_pos key_pos`` the head's weights from its own queries and keys (float64), and
    which keys each query sees."""
    n = kept.n_pos
    positions = torch.arange(n)
    q, k = kept.q.to(torch.float64), kept.k.to(torch.float64)
    raw = q @ k.T * kept.terms.scale + kept.terms.position_bias(positions[:, None], positions)
    seen = kept.terms.visible(positions[:, None], n)
    weights = torch.softmax(kept.terms.capped(raw).masked_fill(~seen, -math.inf), dim=-1)
    return weights, seen


def pair_map(kept: KeptHead, query_part: str, key_part: str) -> PairMap:
    """Where the pair (``query_part``, ``key_part``) acts over the prompt.

    Raises:
        KeyError: a part of that name is not on its side.
    """
    if query_part not in kept.query.names or key_part not in kept.key.names:
        raise KeyError(f"no pair ({query_part}, {key_part}) in head {kept.head}")
    q = kept.query_parts[:, kept.query.names.index(query_part)].to(torch.float64)
    k = kept.key_parts[:, kept.key.names.index(key_part)].to(torch.float64)
    values = q @ k.T * kept.terms.scale
    weights, seen = pattern(kept)
    return PairMap(
        head=kept.head,
        query_part=query_part,
        key_part=key_part,
        values=values.masked_fill(~seen, math.nan).numpy(),
        per_query=(weights * values).sum(dim=-1).numpy(),
    )
