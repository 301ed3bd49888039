"""What the explorer reads from a captured run: token colours and pooled thumbnails."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

Scope = Literal["head", "layer", "all"]


def scoped_weights(run: "AttentionRun", scope: Scope, layer: int, head: int, token: int,
                   direction: Literal["from", "to"]) -> np.ndarray:
    """Weights to colour the prompt with, reading only row (or column) ``token`` of each head.

    ``from``: how much ``token`` attends to each key; ``to``: how much each query attends to
    ``token``. Means over a layer or over all heads are plain averages of the heads' weights.
    NaN marks positions the query cannot see.
    """
    one = slice(token, token + 1)
    rows, cols = (one, slice(None)) if direction == "from" else (slice(None), one)
    if scope == "head":
        weights = run.window(layer, head, rows, cols).astype(np.float64)
    elif scope == "layer":
        weights = run.store.layer_window(layer, rows, cols).astype(np.float64).mean(axis=0)
    else:
        total = sum(run.store.layer_window(li, rows, cols).astype(np.float64).sum(axis=0)
                    for li in range(run.facts.n_layers))
        weights = total / (run.facts.n_layers * run.facts.n_heads)
    weights = weights.reshape(-1)
    if run.facts.causal:
        if direction == "from":
            weights[token + 1:] = np.nan
        else:
            weights[:token] = np.nan
    return weights


def pool(pattern: np.ndarray, size: int) -> np.ndarray:
    """Average-pool ``... query_pos key_pos`` to at most ``size`` x ``size``; NaN cells (masked)
    are left out of each average, and all-masked blocks stay NaN."""
    return pool_rows(pattern, -(-pattern.shape[-2] // size), size)


def pooled_layer(run: "AttentionRun", layer: int, size: int) -> np.ndarray:
    """``head_index q_pixel k_pixel`` thumbnails of one layer, masked cells NaN.

    A streaming capture already holds max-pooled thumbnails (at its own resolution, about
    ``size`` pixels); otherwise rows are rebuilt a band at a time (bands aligned to the pooling
    blocks), so a long prompt never holds a whole layer.
    """
    pooled = getattr(run.store, "pooled", None)
    if pooled is not None:
        return pooled[layer]
    n = run.n_tokens
    factor = -(-n // size)
    band = factor * max(1, 256 // factor)
    parts = []
    for start in range(0, n, band):
        rows = slice(start, min(start + band, n))
        chunk = run.store.layer_window(layer, rows, slice(None)).astype(np.float32, copy=True)
        if run.facts.causal:
            above = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
            chunk[:, above] = np.nan
        parts.append(pool_rows(chunk, factor, size))
    return np.concatenate(parts, axis=1)


def pool_rows(chunk: np.ndarray, factor: int, size: int) -> np.ndarray:
    """Pool a band of rows with the block height of the whole pattern."""
    n_k = chunk.shape[-1]
    fk = -(-n_k // size)
    if factor == 1 and fk == 1:
        return chunk
    n_rows = chunk.shape[-2]
    pad = np.full(chunk.shape[:-2] + (-(-n_rows // factor) * factor, -(-n_k // fk) * fk), np.nan,
                  dtype=np.float32)
    pad[..., :n_rows, :n_k] = chunk
    blocks = pad.reshape(chunk.shape[:-2] + (pad.shape[-2] // factor, factor,
                                             pad.shape[-1] // fk, fk))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-masked blocks stay NaN
        return np.nanmean(blocks, axis=(-3, -1))
