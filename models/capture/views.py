"""What the explorer reads from a captured run: token colours, pooled thumbnails, one head's
whole-pattern overview, and where a query attends most.

Pictures of long patterns are max-pooled: a block shows its strongest weight, so a one-token-wide
diagonal (previous-token heads), an offset stripe (induction heads) or a single column (a sink)
survives at any prompt length, where an average would wash it out. A linear-attention layer's
signed mixing matrix is pooled to the entry of largest magnitude, its sign kept.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
from jaxtyping import Float

from models.attention.pattern import MASK_BYTES
from models.capture.overview import pool_again, row_stride, rows_per_chunk
from models.cost import Cost
from models.shapes import TokenWeights

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

Scope = Literal["head", "layer", "all"]
Pooling = Literal["max", "mean"]


class Reweighting(Protocol):
    """What the views read from a :class:`models.capture.weighted.ValueWeighting` (which
    imports this module, so it is named here by what it offers)."""

    @property
    def overview(self) -> Float[np.ndarray, "layer head_index pixel pixel"] | None: ...

    @property
    def overview_factor(self) -> int: ...

    def scale(
        self, layer: int, head: int, rows: slice, cols: slice
    ) -> Float[np.ndarray, "query_pos key_pos"]: ...


def scoped_weights(
    run: AttentionRun,
    scope: Scope,
    layer: int,
    head: int,
    token: int,
    direction: Literal["from", "to"],
    weighting: Reweighting | None = None,
) -> TokenWeights:
    """Weights to colour the prompt with, reading only row (or column) ``token`` of each head.

    ``from``: how much ``token`` attends to each key; ``to``: how much each query attends to
    ``token``. Means over a layer or over all heads are plain averages of the heads' weights.
    NaN marks positions the query cannot see. ``weighting`` (a
    :class:`models.capture.weighted.ValueWeighting`) turns every head's weights value-weighted.
    One head or the layer's mean of a linear-attention layer reads its signed mixing matrix
    (never weighted).
    """
    one = slice(token, token + 1)
    rows, cols = (one, slice(None)) if direction == "from" else (slice(None), one)
    if scope != "all" and run.signed(layer):
        shown = [head] if scope == "head" else list(range(run.heads_in(layer)))
        weights = np.mean(
            [run.drawn(layer, h, rows, cols).astype(np.float64) for h in shown], axis=0
        )
    elif weighting is not None:
        heads = {
            "head": [(layer, head)],
            "layer": [(layer, h) for h in range(run.facts.n_heads)],
            "all": [(li, h) for li in range(run.facts.n_layers) for h in range(run.facts.n_heads)],
        }[scope]
        weights = sum(
            run.window(li, h, rows, cols).astype(np.float64) * weighting.scale(li, h, rows, cols)
            for li, h in heads
        ) / len(heads)
    elif scope == "head":
        weights = run.window(layer, head, rows, cols).astype(np.float64)
    elif scope == "layer":
        weights = run.store.layer_window(layer, rows, cols).astype(np.float64).mean(axis=0)
    else:
        total = sum(
            run.store.layer_window(li, rows, cols).astype(np.float64).sum(axis=0)
            for li in range(run.facts.n_layers)
        )
        weights = total / (run.facts.n_layers * run.facts.n_heads)
    weights = weights.reshape(-1)
    if run.facts.causal:
        if direction == "from":
            weights[token + 1 :] = np.nan
        else:
            weights[:token] = np.nan
    row: np.ndarray = weights
    return row


def scoped_sink(
    run: AttentionRun, scope: Scope, layer: int, head: int, rows: slice
) -> float | None:
    """The learned sinks' share of the attention from queries ``rows``, in the scope of
    :func:`scoped_weights`: the mean over the rows (and over the scope's heads, a head of a
    layer without sinks counting 0), so that it and the ``from`` weights sum to 1; None when no
    head in the scope has a learned sink."""
    sinks = run.extras.sinks if run.extras is not None else {}
    layers = [layer] if scope != "all" else run.softmax_layers()
    if not any(li in sinks for li in layers):
        return None
    if scope == "head":
        return float(np.mean(sinks[layer][head, rows], dtype=np.float64))
    total = sum(
        float(sinks[li][:, rows].mean(axis=-1, dtype=np.float64).sum())
        for li in layers
        if li in sinks
    )
    return total / (len(layers) * run.facts.n_heads)


def pool(
    pattern: Float[np.ndarray, "... query_pos key_pos"], size: int, how: Pooling = "max"
) -> Float[np.ndarray, "... pixel pixel"]:
    """Pool a pattern to at most ``size`` x ``size`` (max or mean per block);
    NaN cells (masked) are left out, and all-masked blocks stay NaN."""
    return pool_rows(pattern, -(-pattern.shape[-2] // size), size, how)


def pooled_layer(
    run: AttentionRun, layer: int, size: int
) -> Float[np.ndarray, "head_index pixel pixel"]:
    """Max-pooled thumbnails of one layer, masked cells NaN.

    A streaming capture already holds max-pooled thumbnails (at its own resolution, about
    ``size`` pixels); otherwise rows are rebuilt a band at a time (bands aligned to the pooling
    blocks), so a long prompt never holds a whole layer.
    """
    pooled = getattr(run.store, "pooled", None)
    if pooled is not None:
        thumbnails: np.ndarray = pooled[layer]
        return thumbnails
    return _banded(run, size, lambda rows: run.store.layer_window(layer, rows, slice(None)))


def pooled_signed(run: AttentionRun, layer: int, size: int) -> Float[np.ndarray, "head pix pix"]:
    """Pictures of a linear-attention layer's signed mixing matrices (one per value head),
    masked cells NaN: each block shows its entry of largest magnitude, sign kept."""
    heads = range(run.heads_in(layer))
    every = slice(None)

    def read(rows: slice, sign: float) -> np.ndarray:
        return sign * np.stack([run.drawn(layer, h, rows, every) for h in heads])

    above = _banded(run, size, lambda rows: read(rows, 1.0))
    below = _banded(run, size, lambda rows: read(rows, -1.0))
    signed: np.ndarray = np.where(above >= below, above, -below)
    return signed


def head_overview(
    run: AttentionRun,
    layer: int,
    head: int,
    size: int = 192,
    weighting: Reweighting | None = None,
) -> Float[np.ndarray, "pixel pixel"]:
    """Max-pooled picture of one head's whole pattern, masked cells NaN
    (value-weighted when ``weighting`` is given).

    A streaming capture's store makes one head's overview from its q, k and LSE
    (``store.head_overview``: the max-pool of the float32 pattern over every row up to 2,048
    tokens, over evenly spaced rows beyond). A weighting that holds its own overviews
    (``weighting.overview``) is read when its pixels are the ones asked for (or pool to them).
    Otherwise the head's pattern is rebuilt a band of rows at a time and pooled.
    """
    factor = -(-run.n_tokens // size)
    if weighting is None:
        make = getattr(run.store, "head_overview", None)
        if make is not None:
            overview: np.ndarray = make(layer, head, factor)
            return overview
    else:
        stored, stored_factor = weighting.overview, weighting.overview_factor
        if stored is not None and factor % stored_factor == 0:
            return pool_again(stored[layer, head], factor // stored_factor)

    def read(rows: slice) -> np.ndarray:
        window = run.window(layer, head, rows, slice(None))
        return (
            window
            if weighting is None
            else window * weighting.scale(layer, head, rows, slice(None))
        )

    return _banded(run, size, read)


def overview_cost(run: AttentionRun, layer: int, size: int, weighted: bool) -> Cost:
    """What :func:`head_overview` (or a linear-attention layer's :func:`pooled_signed`) takes
    for one head at ``size`` pixels. From a factored store with no weighting, a chunk of rows'
    logits against every key and the halvings of their block maxima (2 float32 a cell),
    the head's q and k copies and the keys reordered into slabs; otherwise a band of
    :func:`_banded`'s rows, each cell read (rebuilt with its masks from a factored store), its
    float32 copy, and with a weighting its factors and their product; a linear-attention layer
    reads every head's signed window twice. Half again for the kernels and the allocator.
    The picture drawn from it is the caller's to add."""
    facts, n = run.facts, run.n_tokens
    factor = -(-n // size)
    keys = -(-n // factor) * factor  # the keys padded to whole pixels
    copies = 4 * facts.d_head * (2 * n + keys) + 8 * n  # q, k, the slabs; the rows' LSE
    if run.signed(layer):
        band = min(n, factor * max(1, 256 // factor))
        cells, per_cell = facts.n_heads * band * n, 3 * 4  # a stack, its negation, the pooled
    elif not weighted and hasattr(run.store, "head_overview"):
        stride = row_stride(factor)
        cells, per_cell = rows_per_chunk(n, factor, stride) // stride * keys, 8
    else:
        band = min(n, factor * max(1, 256 // factor))
        read = 4 + (MASK_BYTES if run.factored else 0)
        cells, per_cell = band * n, read + 4 + (8 if weighted else 0)
    flops = float(n * n * (2 * facts.d_head + 8 if run.factored else 1))
    return Cost(flops=flops, peak_bytes=3 * (cells * per_cell + copies) // 2)


def sink_rows(n_tokens: int, max_rows: int = 512) -> range:
    """The query rows :func:`strongest_sink` reads: every row, or evenly spaced ones past
    ``max_rows`` (between ``max_rows`` and twice that)."""
    return range(0, n_tokens, max(1, n_tokens // max_rows))


def strongest_sink_cost(run: AttentionRun, max_rows: int = 512) -> Cost:
    """What :func:`strongest_sink` takes: its sampled rows of one head against every key (read
    from a dense store in place; rebuilt with their masks, from copies of the rows' q and the
    head's k, from a factored one), and a handful of float64 and int64 arrays a key. Half again
    for the kernels and the allocator."""
    facts, n = run.facts, run.n_tokens
    cells = len(sink_rows(n, max_rows)) * n
    held = 6 * 8 * n
    if run.factored:
        held += cells * (4 + MASK_BYTES) + 4 * facts.d_head * (len(sink_rows(n, max_rows)) + n)
    per_cell = 2 * facts.d_head + 8 if run.factored else 1
    return Cost(flops=float(cells * per_cell), peak_bytes=3 * held // 2)


def _banded(run: AttentionRun, size: int, read: Callable[[slice], np.ndarray]) -> np.ndarray:
    """Max-pool what ``read(rows)`` returns, a band of rows at a time (never the whole head).

    Weights are never negative and a rebuilt pattern holds 0 where the mask forbids, so the
    plain maximum of a block is the maximum over its allowed cells; blocks that lie wholly above
    a causal diagonal are then marked NaN (masked).
    """
    n = run.n_tokens
    factor = -(-n // size)
    band = factor * max(1, 256 // factor)
    parts = [
        pool_rows(
            np.asarray(read(slice(start, min(start + band, n))), dtype=np.float32), factor, size
        )
        for start in range(0, n, band)
    ]
    pooled = np.concatenate(parts, axis=-2)
    if run.facts.causal:
        first_key = np.arange(pooled.shape[-1]) * factor
        last_query = np.minimum((np.arange(pooled.shape[-2]) + 1) * factor, n) - 1
        pooled[..., first_key[None, :] > last_query[:, None]] = np.nan
    return pooled


def strongest_key(
    run: AttentionRun, layer: int, head: int, query: int, skip_first: bool = False
) -> int:
    """The key position query ``query`` of head ``layer.head`` puts the most weight on.

    ``skip_first`` leaves key 0 out: it is usually a sink the view shows anyway.
    """
    one = slice(query, query + 1)
    if run.signed(layer):  # a mixing matrix: the key with the largest share, either sign
        row = np.abs(np.array(run.drawn(layer, head, one, slice(None))[0], dtype=np.float64))
    else:
        row = np.array(run.window(layer, head, one, slice(None))[0], dtype=np.float64)
    if skip_first and row.size > 1:
        row[0] = -np.inf
    return int(np.argmax(np.where(np.isfinite(row), row, -np.inf)))


def strongest_sink(run: AttentionRun, layer: int, head: int, max_rows: int = 512) -> int:
    """The key with the largest sink score (mean weight from the queries after it) in one head.

    Long prompts are scored on at most ``max_rows`` evenly spaced query rows; a key needs at
    least four (or every) later sampled query to compete, so a late key seen by one glance does
    not win.
    """
    n = run.n_tokens
    picked = sink_rows(n, max_rows)
    rows = np.asarray(picked)
    sampled = run.window(layer, head, slice(0, n, picked.step), slice(None))
    # Weight from the sampled queries after each key (a causal pattern is 0 above the
    # diagonal), summed in float64 without a float64 copy: every column's sum less each sampled
    # query's weight on itself.
    sums = sampled.sum(axis=0, dtype=np.float64)
    sums[rows] -= sampled[np.arange(len(rows)), rows]
    keys = np.arange(n)
    if run.facts.causal:
        counts = len(rows) - np.searchsorted(rows, keys, side="right")
    else:
        counts = len(rows) - np.isin(keys, rows)
    with np.errstate(invalid="ignore", divide="ignore"):
        alphas = np.where(counts >= min(4, len(rows) - 1), sums / np.maximum(counts, 1), -np.inf)
    return int(np.argmax(alphas))


def pool_rows(
    chunk: Float[np.ndarray, "... band key_pos"],
    factor: int,
    size: int,
    how: Pooling = "max",
    offset: int = 0,
) -> Float[np.ndarray, "... band_pixel pixel"]:
    """Pool a band of rows with the block height of the whole pattern.

    Args:
        chunk: a band of query rows (its first row is row ``offset`` of a block of ``factor``
            rows).
        factor: query rows per pixel of the whole pattern.
        size: the most pixels across the key axis.
        how: the largest weight of each block, or its mean (NaN cells left out).
        offset: rows of the first block that lie before the band (``0 <= offset < factor``);
            left out, as NaN cells are, so a partial first or last block holds only the band's
            own rows.

    Returns:
        ``ceil((offset + band) / factor)`` rows of pixels; an all-masked block stays NaN.
    """
    n_k = chunk.shape[-1]
    fk = -(-n_k // size)
    if factor == 1 and fk == 1:
        return chunk
    n_rows = chunk.shape[-2]
    pad = np.full(
        (*chunk.shape[:-2], -(-(offset + n_rows) // factor) * factor, -(-n_k // fk) * fk),
        np.nan,
        dtype=np.float32,
    )
    pad[..., offset : offset + n_rows, :n_k] = chunk
    blocks = pad.reshape(
        (*chunk.shape[:-2], pad.shape[-2] // factor, factor, pad.shape[-1] // fk, fk)
    )
    if how == "max":  # fmax skips NaN without copying; an all-masked block stays NaN
        peaks: np.ndarray = np.fmax.reduce(np.fmax.reduce(blocks, axis=-1), axis=-2)
        return peaks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-masked blocks stay NaN
        means: np.ndarray = np.nanmean(blocks, axis=(-3, -1))
        return means
