"""Where a run's heads park their attention: the measured sink, not a guess from the tokenizer.

BERT-style encoders are often said to sink on ``[CLS]`` but usually park on ``[SEP]``; decoders
sink on their first token whether or not it is a BOS token. The page states what this run's
heads do, measured on a few query rows of every head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

SAMPLE_ROWS = 16


@dataclass(frozen=True)
class SinkSummary:
    """The key that receives the most attention, and how many heads favour it.

    Attributes:
        position: the key position with the largest mean weight over heads and sampled rows.
        mean_weight: that mean weight.
        n_heads: heads whose own largest mean weight is on ``position``.
        n_total: heads in the model.
        rows: the query rows sampled.
    """

    position: int
    mean_weight: float
    n_heads: int
    n_total: int
    rows: tuple[int, ...]


def sample_rows(n_tokens: int, causal: bool, k: int = SAMPLE_ROWS) -> list[int]:
    """Query rows to measure on: the second half of the prompt (in a causal model the first
    rows can only attend to the first tokens, which would make any of them look like a sink)."""
    start = n_tokens // 2 if causal and n_tokens > 2 else 0
    return sorted({int(r) for r in np.linspace(start, n_tokens - 1, num=min(k, n_tokens))})


def measured_sink(run: AttentionRun) -> SinkSummary:
    """The run's attention sink, from ``SAMPLE_ROWS`` query rows of every head."""
    rows = sample_rows(run.n_tokens, run.facts.causal)
    per_head = np.concatenate(  # one read per layer: the sampled rows of all its heads at once
        [
            run.store.layer_window(layer, rows, slice(None)).mean(axis=1)
            for layer in range(run.facts.n_layers)
        ]
    )
    per_head = np.nan_to_num(per_head)
    overall = per_head.mean(axis=0)
    position = int(np.argmax(overall))
    favourite = per_head.argmax(axis=1)
    return SinkSummary(
        position,
        float(overall[position]),
        int((favourite == position).sum()),
        per_head.shape[0],
        tuple(rows),
    )
