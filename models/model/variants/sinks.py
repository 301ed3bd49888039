"""Learned attention sinks: one logit per head that joins every row's softmax as an extra column.

gpt-oss gives each head a learned logit ``s_h``. Every row's softmax runs over its keys and that
logit together::

    p_ij = exp(a_ij) / (sum_k exp(a_ik) + exp(s_h)),    sink_i = exp(s_h) / (same sum)

so ``sum_j p_ij + sink_i = 1``. Hugging Face's eager attention returns ``p`` without the sink
column (its rows sum to ``1 - sink_i``), and so does the bridge's ``hook_pattern``. The app
shows the sink as its own column beside the keys, and computes entropy and every score over the
full row, sink included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jaxtyping import Float

SINK_LABEL = "sink"
SINK_KEY = -1  # where a view puts the sink among key positions: no token, seen by every query
FULL_ROW_RULE = (
    "Each row of a head with a learned sink is shown with the sink as one more column: the "
    "weights on the keys plus the sink's weight sum to 1. Entropy and every score are computed "
    "over that full row."
)


def sink_logits(module: Any) -> Float[torch.Tensor, " head_index"] | None:
    """The learned sink logit of each head of an attention module, or None when it has none.

    A sink is a parameter ``sinks`` with one value per query head (gpt-oss's name for it).
    """
    found = getattr(module, "sinks", None)
    if not isinstance(found, torch.Tensor) or found.dim() != 1:
        return None
    return found.detach().to("cpu", torch.float32)


def sink_weights(
    lse: Float[torch.Tensor, "head_index query_pos"], logits: Float[torch.Tensor, " head_index"]
) -> Float[torch.Tensor, "head_index query_pos"]:
    """Each row's weight on the sink: ``exp(s) / (exp(lse) + exp(s)) = sigmoid(s - lse)``.

    Args:
        lse: the log-sum-exp of each row's logits over its visible keys (the sink left out).
        logits: the sink logit of each head.
    """
    return torch.sigmoid(logits[:, None].to(lse.dtype) - lse)


def with_sink_column(
    rows: Float[np.ndarray, "*head query_pos key_pos"], sink: Float[np.ndarray, "*head query_pos"]
) -> Float[np.ndarray, "*head query_pos key_pos_and_sink"]:
    """The rows with the sink's weight as one more column at the end (each full row sums to 1)."""
    return np.concatenate([rows, np.asarray(sink, dtype=rows.dtype)[..., None]], axis=-1)


def full_row_entropy(
    rows: Float[np.ndarray, "*head query_pos key_pos"],
    sink: Float[np.ndarray, "*head query_pos"] | None = None,
) -> Float[np.ndarray, "*head query_pos"]:
    """Entropy in nats of each row, over its keys and (when given) its sink: ``-sum p log p``.

    Masked cells (0 or NaN) add nothing.
    """
    full = rows if sink is None else with_sink_column(rows, sink)
    p = np.nan_to_num(np.asarray(full, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms: np.ndarray = np.where(p > 0, -p * np.log(p), 0.0)
    total: np.ndarray = terms.sum(axis=-1)
    return total
