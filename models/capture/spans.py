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

from models.attention.pattern import MASK_BYTES
from models.capture.views import Scope
from models.capture.words import Words, merge_strip
from models.cost import Cost
from models.model.allocator import MMAP_THRESHOLD

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
# One block of rows read at once. A whole layer's block is made larger than the C allocator's
# mmap threshold, so it is mapped for itself and unmapped when freed: blocks of one size after
# another then never leave holes in the heap (at 32 MiB, just under the threshold, the same span
# measured 47 to 94 MiB on different runs and machines).
CHUNK_BYTES = 2 * MMAP_THRESHOLD
# bytes per row-by-key cell of a block besides the weights themselves: the float64 sum and, for
# a rebuilt block, its masks (models.attention.pattern.MASK_BYTES)
SUM_BYTES = 8


def _heads(run: AttentionRun, scope: Scope, layer: int, head: int) -> list[tuple[int, int]]:
    n_heads = run.facts.n_heads
    if scope == "head":
        return [(layer, head)]
    layers = [layer] if scope == "layer" else run.softmax_layers()
    return [(li, h) for li in layers for h in range(n_heads)]


def _block_rows(n_cols: int, n_heads: int, whole: bool) -> int:
    """Rows per block: a whole layer's float32 weights (``4 * n_heads`` bytes a cell) fill
    :data:`CHUNK_BYTES`; head by head, the float64 sum (8 bytes a cell) fills half of it."""
    if whole:
        return max(1, CHUNK_BYTES // (4 * n_heads * max(n_cols, 1)))
    return max(1, CHUNK_BYTES // 2 // (SUM_BYTES * max(n_cols, 1)))


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
    ``cols`` (one value per query). Read in blocks of rows (:func:`_block_rows`), whole layers
    at once where no weighting is asked for, so memory stays bounded at any length."""
    n_cols = len(range(run.n_tokens)[cols])
    total = np.zeros(n_cols if row_weights is not None else len(rows))
    for li in sorted({li for li, _ in heads}):
        wanted = [h for lj, h in heads if lj == li]
        signed = run.signed(li)  # a linear layer: its mixing matrix, never weighted
        whole = weighting is None and not signed and len(wanted) == run.facts.n_heads
        step = _block_rows(n_cols, len(wanted), whole)
        for lo in range(0, len(rows), step):
            part = slice(rows.start + lo, rows.start + min(lo + step, len(rows)))
            if whole:
                window = run.store.layer_window(li, part, cols).sum(axis=0, dtype=np.float64)
            else:
                window = np.zeros((part.stop - part.start, n_cols))
                for h in wanted:
                    one = run.drawn(li, h, part, cols)
                    if weighting is not None and not signed:
                        one = one * weighting.scale(li, h, part, cols)
                    window += one  # float32 added into float64 in place, no float64 copy
            if row_weights is not None:
                total += row_weights[lo : lo + len(window)] @ window
            else:
                total[lo : lo + len(window)] += window.sum(axis=1)
            del window  # the next block is built without this one's sum still held
    return total / len(heads)


def span_cost(
    facts: ModelFacts, n_tokens: int, n_span: int, scope: Scope, factored: bool, weighted: bool
) -> Cost:
    """Cost of :func:`span_weights` for a span of ``n_span`` tokens of an ``n_tokens`` run: it
    reads ``n_span x n_tokens`` weights of each head in ``scope`` (rebuilt from q and k when
    ``factored``), a block of rows (:func:`_block_rows`) at a time."""
    n_heads = 1 if scope == "head" else facts.n_heads * (1 if scope == "layer" else facts.n_layers)
    cells = float(n_heads) * n_span * n_tokens
    per_cell = (2 * facts.d_head + 8 if factored else 1) + (4 if weighted else 1)
    whole = not weighted and scope != "head"
    weights = 4 * facts.n_heads if whole else 4
    rows = min(n_span, _block_rows(n_tokens, facts.n_heads, whole))
    # per cell of a block: the weights read (every head's at once for a whole layer), the
    # float64 sum, the masks of a rebuilt block, and with a weighting its factors and product
    extra = (MASK_BYTES if factored else 0) + (2 * SUM_BYTES if weighted else 0)
    block = rows * n_tokens * (weights + SUM_BYTES + extra)
    kept = 4 * facts.d_head * (facts.n_heads * rows + facts.n_kv_heads * n_tokens)  # q, k copies
    # half again for what the kernels and the allocator hold besides (measured on SmolLM2 over
    # every head: 1.1 times the sum above at 1,000 and 2,000 tokens; one head 0.95)
    return Cost(flops=cells * per_cell, peak_bytes=int(3 * (block + kept) // 2 + 4 * n_tokens * 8))


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
