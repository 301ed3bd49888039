"""A band of query rows of every head of a layer: the fast path for whole-prompt analyses.

Comparing two 2,048-token prompts reads every row of every head once. The store's own
``layer_window`` rebuilds any window for any caller (ALiBi, sliding windows, padding masks, each
with its own full-size mask); for a band of rows of a plain causal or bidirectional layer held as
q, k and LSE, :func:`layer_band` does the same in one batched matmul that subtracts the LSE as it
goes (``baddbmm``), one in-place ``exp`` and a mask over the band's diagonal block only.

Like nanoGPT's flash / manual pair, the plain path stays beside it and checks it: every band's
first and last rows are also read through ``layer_window``, and a band that disagrees (a store
this function does not understand) is read through ``layer_window`` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from jaxtyping import Float

from models.capture.store import FactoredPatterns

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

CHECK_TOLERANCE = 1e-5


def rebuilt_band(
    store: FactoredPatterns, layer: int, rows: slice, n_keys: int
) -> Float[np.ndarray, "head_index band key_pos"]:
    """``exp(q k^T * scale - lse)`` for query rows ``rows`` and keys ``0..n_keys - 1``, masked
    to 0 above the diagonal when causal (float32)."""
    q = torch.from_numpy(np.array(store.q[layer, :, rows], dtype=np.float32))
    k = torch.from_numpy(np.array(store.k[layer, :, :n_keys], dtype=np.float32))
    lse = torch.from_numpy(np.array(store.lse[layer, :, rows], dtype=np.float32))
    n_heads, n_rows, d_head = q.shape
    n_kv = k.shape[0]
    lse = torch.where(torch.isfinite(lse), lse, torch.inf)  # a row that sees nothing stays 0
    scores = torch.baddbmm(
        -lse.reshape(n_kv, -1, 1),
        (q * store.scales[layer]).reshape(n_kv, -1, d_head),
        k.transpose(1, 2),
    )
    weights = scores.view(n_heads, n_rows, n_keys).exp_()
    first = rows.start or 0
    if store.causal and first + 1 < n_keys:
        later = torch.arange(first, n_keys)[None, :] > torch.arange(first, first + n_rows)[:, None]
        weights[:, :, first:].masked_fill_(later, 0.0)
    return weights.numpy()


def layer_band(
    run: AttentionRun, layer: int, rows: slice, keys: slice
) -> Float[np.ndarray, "head_index band key"]:
    """Every head's rows ``rows`` x keys ``keys`` of one layer as a new float32 array.

    ``keys`` must start at 0 for the fast path (a band reads its keys from the first one);
    anything else, and any dense store, is read through the store.
    """
    store = run.store
    first, stop, _ = rows.indices(run.n_tokens)
    k0, k1, _ = keys.indices(run.n_tokens)
    if not isinstance(store, FactoredPatterns) or k0 != 0 or stop <= first:
        return np.array(store.layer_window(layer, rows, keys), dtype=np.float32)
    band = rebuilt_band(store, layer, slice(first, stop), k1)
    step = max(1, stop - 1 - first)  # the band's first and last rows
    plain = store.layer_window(layer, slice(first, stop, step), keys)
    if not np.abs(band[:, ::step] - plain).max() <= CHECK_TOLERANCE:
        return np.array(store.layer_window(layer, rows, keys), dtype=np.float32)
    return band
