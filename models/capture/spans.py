"""Attention from a span of tokens (or words) and to it, for the token strip.

The rule (:data:`SPAN_RULE`) is the word rule applied to any selection: attention *from* a span is
the mean of its query rows (a distribution over keys that still sums to 1), attention *to* a span
is, for each query, the sum of its weights on the span's keys. In word space the span's words are
each the mean of their pieces' rows first, so a span of one word is exactly that word's row of
the merged pattern. Only the span's rows (from) or columns (to) are read from the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from jaxtyping import Float

from models.capture.views import Scope
from models.capture.words import Words, merge_strip
from models.cost import Cost

if TYPE_CHECKING:
    from models.capture.run import AttentionRun
    from models.capture.weighted import ValueWeighting
    from models.model.facts import ModelFacts

Direction = Literal["from", "to"]

SPAN_RULE = (
    "Attention from a span is the mean of its positions' rows (it still sums to 1); attention to "
    "a span is, for each position, the sum of its weights on the span's positions. Over a layer "
    "or all heads, heads are averaged; all heads means those of the softmax layers, since a "
    "linear-attention layer's signed mixing matrix holds no attention weights to average with "
    "them (its own layer or head shows it)."
)
CHUNK_BYTES = 32 * 2**20  # one block of rows read at once


def _heads(run: AttentionRun, scope: Scope, layer: int, head: int) -> list[tuple[int, int]]:
    n_heads = run.facts.n_heads
    if scope == "head":
        return [(layer, head)]
    layers = [layer] if scope == "layer" else run.softmax_layers()
    return [(li, h) for li in layers for h in range(n_heads)]


def _reduce(
    run: AttentionRun,
    heads: list[tuple[int, int]],
    rows: range,
    cols: slice,
    row_weights: Float[np.ndarray, " query"] | None,
    weighting: ValueWeighting | None,
) -> Float[np.ndarray, " pos"]:
    """Mean over ``heads`` of their ``rows`` x ``cols`` windows, reduced as it is read: with
    ``row_weights``, the rows' weighted sum (one value per key); without, each row's sum over
    ``cols`` (one value per query). Read in blocks of rows of about :data:`CHUNK_BYTES`, whole
    layers at once where no weighting is asked for, so memory stays bounded at any length."""
    n_cols = len(range(run.n_tokens)[cols])
    total = np.zeros(n_cols if row_weights is not None else len(rows))
    for li in sorted({li for li, _ in heads}):
        wanted = [h for lj, h in heads if lj == li]
        signed = run.signed(li)  # a linear layer: its mixing matrix, never weighted
        whole = weighting is None and not signed and len(wanted) == run.facts.n_heads
        step = max(1, CHUNK_BYTES // ((4 * len(wanted) if whole else 8) * max(n_cols, 1)))
        for lo in range(0, len(rows), step):
            part = slice(rows.start + lo, rows.start + min(lo + step, len(rows)))
            if whole:
                window = run.store.layer_window(li, part, cols).sum(axis=0, dtype=np.float64)
            else:
                window = np.zeros((part.stop - part.start, n_cols))
                for h in wanted:
                    one = run.drawn(li, h, part, cols).astype(np.float64)
                    if weighting is not None and not signed:
                        one *= weighting.scale(li, h, part, cols)
                    window += one
            if row_weights is not None:
                total += row_weights[lo : lo + len(window)] @ window
            else:
                total[lo : lo + len(window)] += window.sum(axis=1)
    return total / len(heads)


def span_cost(
    facts: ModelFacts, n_tokens: int, n_span: int, scope: Scope, factored: bool, weighted: bool
) -> Cost:
    """Cost of :func:`span_weights` for a span of ``n_span`` tokens of an ``n_tokens`` run: it
    reads ``n_span x n_tokens`` weights of each head in ``scope`` (rebuilt from q and k when
    ``factored``), a block of rows of about :data:`CHUNK_BYTES` at a time."""
    n_heads = 1 if scope == "head" else facts.n_heads * (1 if scope == "layer" else facts.n_layers)
    cells = float(n_heads) * n_span * n_tokens
    per_cell = (2 * facts.d_head + 8 if factored else 1) + (4 if weighted else 1)
    block = min(
        CHUNK_BYTES,
        (4 * facts.n_heads if not weighted and scope != "head" else 8) * n_span * n_tokens,
    )
    # the block read and its float64 sum or copies; a rebuilt block is built in place, so it
    # costs about the same (measured on SmolLM2 at 1,000 tokens over every head: 1.5 to 2.4
    # blocks, the allocator's grain included)
    peak = 11 * block // 4 + 4 * n_tokens * 8
    return Cost(flops=cells * per_cell, peak_bytes=int(peak))


def span_weights(
    run: AttentionRun,
    scope: Scope,
    layer: int,
    head: int,
    span: slice,
    direction: Direction,
    words: Words | None = None,
    weighting: ValueWeighting | None = None,
) -> Float[np.ndarray, " pos"]:
    """Weights to colour the prompt with for a selected span (see :data:`SPAN_RULE`).

    Args:
        run: the captured run.
        scope: one head, the mean over ``layer``'s heads, or over all heads.
        layer, head: the head (``head`` is ignored unless ``scope == "head"``).
        span: the selected positions: token positions, or word indices when ``words`` is given.
        direction: ``from`` the span to every key, or ``to`` the span from every query.
        words: merge into words (the result then has one weight per word).
        weighting: value-weighted patterns (:class:`models.capture.weighted.ValueWeighting`).

    Returns:
        One weight per token (or word); NaN where no position of the span can be seen (from)
        or sees the span (to) in a causal model. Cost: reads ``len(span) x n`` weights per head.
    """
    tokens = span if words is None else words.tokens_of(span)
    start, stop, _ = tokens.indices(run.n_tokens)
    if stop <= start:
        raise ValueError("the span is empty")
    heads = _heads(run, scope, layer, head)
    if direction == "from":
        if words is None:
            per_row = np.full(stop - start, 1.0 / (stop - start))
        else:  # each word's rows averaged first, then the words
            per_row = 1.0 / np.repeat(words.counts[span], words.counts[span])
            per_row /= len(range(words.n_words)[span])
        weights = _reduce(run, heads, range(start, stop), slice(None), per_row, weighting)
        if run.facts.causal:
            weights[stop:] = np.nan
    else:
        weights = _reduce(run, heads, range(run.n_tokens), slice(start, stop), None, weighting)
        if run.facts.causal:
            weights[:start] = np.nan
    if words is None:
        return weights
    return merge_strip(weights, words, "keys" if direction == "from" else "queries")
