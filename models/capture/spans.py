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

if TYPE_CHECKING:
    from models.capture.run import AttentionRun
    from models.capture.weighted import ValueWeighting

Direction = Literal["from", "to"]

SPAN_RULE = (
    "Attention from a span is the mean of its positions' rows (it still sums to 1); attention to "
    "a span is, for each position, the sum of its weights on the span's positions. Over a layer "
    "or all heads, heads are averaged."
)


def _heads(run: AttentionRun, scope: Scope, layer: int, head: int) -> list[tuple[int, int]]:
    n_layers, n_heads = run.facts.n_layers, run.facts.n_heads
    if scope == "head":
        return [(layer, head)]
    layers = [layer] if scope == "layer" else range(n_layers)
    return [(li, h) for li in layers for h in range(n_heads)]


def _read(
    run: AttentionRun,
    heads: list[tuple[int, int]],
    rows: slice,
    cols: slice,
    weighting: ValueWeighting | None,
) -> Float[np.ndarray, "query key"]:
    """Mean over ``heads`` of their ``rows`` x ``cols`` windows (whole layers read at once)."""
    total = np.zeros((len(range(run.n_tokens)[rows]), len(range(run.n_tokens)[cols])))
    layers = sorted({li for li, _ in heads})
    for li in layers:
        wanted = [h for lj, h in heads if lj == li]
        if weighting is None and len(wanted) == run.facts.n_heads:
            total += run.store.layer_window(li, rows, cols).astype(np.float64).sum(axis=0)
            continue
        for h in wanted:
            window = run.window(li, h, rows, cols).astype(np.float64)
            total += window if weighting is None else window * weighting.scale(li, h, rows, cols)
    return total / len(heads)


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
    every = slice(None)
    if direction == "from":
        rows = _read(run, heads, slice(start, stop), every, weighting)
        if words is None:
            weights = rows.mean(axis=0)
        else:  # each word's rows averaged first, then the words
            per_row = 1.0 / np.repeat(words.counts[span], words.counts[span])
            weights = (rows * per_row[:, None]).sum(axis=0) / len(range(words.n_words)[span])
        if run.facts.causal:
            weights[stop:] = np.nan
    else:
        weights = _read(run, heads, every, slice(start, stop), weighting).sum(axis=1)
        if run.facts.causal:
            weights[:start] = np.nan
    if words is None:
        return weights
    return merge_strip(weights, words, "keys" if direction == "from" else "queries")
