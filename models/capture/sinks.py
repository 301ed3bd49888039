"""Where a run's heads park their attention: the measured sink, not a guess from the tokenizer.

BERT-style encoders are often said to sink on ``[CLS]`` but usually park on ``[SEP]``; decoders
sink on their first token whether or not it is a BOS token. The page states what this run's
heads do, measured on a few query rows of every head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models.attention.pattern import MASK_BYTES
from models.cost import Cost

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
        gated_weight: a model with output gates: the weight on ``position`` as it reaches the
            output, each head's weight times its gate at the query (mean over the gate's
            dimensions; 1 for a head without a gate), averaged the same way; else None.
        learned_weight: a model with learned sinks: their mean weight over the same heads and
            rows (0 for a head without one); else None.
    """

    position: int
    mean_weight: float
    n_heads: int
    n_total: int
    rows: tuple[int, ...]
    gated_weight: float | None = None
    learned_weight: float | None = None


def sink_cost(run: AttentionRun) -> Cost:
    """What :func:`measured_sink` takes: every head's mean over the sampled rows (float32, one
    row a head), and a layer's read of those rows at a time. Rebuilt from a factored store, a
    layer's read holds the key heads' k and the rows' q (float32 copies), the rows' scores of
    every head and their masks (one head's size), and their mean; a dense
    store's rows are gathered from the held patterns. Reads are counted twice (the heap cannot
    always place a layer's blocks in the holes the previous one left) and the sum half again
    (measured on SmolLM2 at 4,000 tokens: 19 MiB, 1.9 times a single read and the means)."""
    facts, n = run.facts, run.n_tokens
    k = min(SAMPLE_ROWS, n)
    cells = facts.n_heads * k * n
    held = 4 * facts.n_layers * facts.n_heads * n
    read = 4 * cells + 4 * facts.n_heads * n
    if run.factored:
        read += 4 * facts.d_head * (facts.n_kv_heads * n + facts.n_heads * k) + MASK_BYTES * k * n
    per_cell = 2 * facts.d_head + 8 if run.factored else 1
    return Cost(
        flops=float(facts.n_layers * cells * per_cell), peak_bytes=3 * (held + 2 * read) // 2
    )


def sample_rows(n_tokens: int, causal: bool, k: int = SAMPLE_ROWS) -> list[int]:
    """Query rows to measure on: the second half of the prompt (in a causal model the first
    rows can only attend to the first tokens, which would make any of them look like a sink)."""
    start = n_tokens // 2 if causal and n_tokens > 2 else 0
    return sorted({int(r) for r in np.linspace(start, n_tokens - 1, num=min(k, n_tokens))})


def measured_sink(run: AttentionRun) -> SinkSummary:
    """The run's attention sink, from ``SAMPLE_ROWS`` query rows of every head."""
    rows = sample_rows(run.n_tokens, run.facts.causal)
    n_heads = run.facts.n_heads
    per_head = np.empty((run.facts.n_layers * n_heads, run.n_tokens), dtype=np.float32)
    extras = run.extras
    gates = {} if extras is None else {li: extras.mean_gate(li) for li in extras.gates}
    gate_of = np.ones((run.facts.n_layers * n_heads, len(rows)), dtype=np.float32)
    for layer in range(run.facts.n_layers):  # one read per layer: its heads' sampled rows
        window = run.store.layer_window(layer, rows, slice(None))
        per_head[layer * n_heads : (layer + 1) * n_heads] = window.mean(axis=1)
        del window  # the next layer's rows are read without this one's still held
        found = gates.get(layer)
        if found is not None:
            gate_of[layer * n_heads : layer * n_heads + found.shape[0]] = found[:, rows]
    np.nan_to_num(per_head, copy=False)
    overall = per_head.mean(axis=0)
    position = int(np.argmax(overall))
    favourite = per_head.argmax(axis=1)
    gated = None
    if gates:  # the sink's column once more, each row times its head's gate there
        column = np.concatenate(
            [
                run.store.layer_window(li, rows, slice(position, position + 1))[..., 0]
                for li in range(run.facts.n_layers)
            ]
        )
        gated = float(np.nan_to_num(column * gate_of).mean())
    learned = None
    if extras is not None and extras.sinks:
        total = sum(float(sink[:, rows].sum()) for sink in extras.sinks.values())
        learned = total / (per_head.shape[0] * len(rows))
    return SinkSummary(
        position,
        float(overall[position]),
        int((favourite == position).sum()),
        per_head.shape[0],
        tuple(rows),
        gated,
        learned,
    )
