"""Capture a long prompt at the speed of the model's own fused attention.

The model runs once through its plain Hugging Face modules with SDPA attention
(:mod:`models.model.plain`). As each layer's attention runs, its q and k (rotated, as the softmax
sees them) are kept, and one chunked pass over ``q k^T`` computes, a block of query rows at a
time and never the whole ``n x n`` matrix:

- the log-sum-exp of every row (so any window of any head rebuilds exactly later): on the CPU
  the fused kernel returns it beside its output at no extra cost, elsewhere it is computed,
- each head's max-pooled thumbnail (a thin diagonal or a single sink column survives pooling),
- a self-check: a few rows of ``softmax(q k^T * scale) v`` against SDPA's own output, which proves
  that the kept q, k, scale and mask are what the model used,
- each head's value norms ``||v_j W_O^h||`` for value-weighted views.

If a layer never calls back or the check fails, the caller falls back to the bridge.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from models.capture.store import FactoredPatterns, read_only
from models.model.weights import output_projection
from models.model.loading import LoadedModel
from models.model.plain import LayerAttention, run_plain
from models.progress import Progress, quiet

THUMB = 64
CHUNK_ROWS = 256
ROWS_PER_BLOCK = 4
CHECK_TOLERANCE = 1e-4


def pool_factor(n: int, size: int = THUMB) -> int:
    """Block edge that max-pools ``n`` positions into at most ``size`` pixels."""
    return max(1, math.ceil(n / size))


def sample_rows(n: int) -> list[int]:
    return sorted({0, n // 3, (2 * n) // 3, n - 1})


class LayerSummary:
    """Collects, layer by layer, what the factored store keeps (see the module docstring)."""

    def __init__(self, model: LoadedModel, n_tokens: int, progress: Progress) -> None:
        n_layers = model.facts.n_layers
        self.model, self.n_layers, self.n = model, n_layers, n_tokens
        self.factor = pool_factor(n_tokens)
        self.q: list = [None] * n_layers
        self.k: list = [None] * n_layers
        self.lse: list = [None] * n_layers
        self.pooled: list = [None] * n_layers
        self.norms: list = [None] * n_layers
        self.scales: list = [None] * n_layers
        self.causal: bool | None = None
        self.worst = 0.0
        self.unsupported: str | None = None
        self.progress = progress

    def __call__(self, att: LayerAttention) -> None:
        if att.mask is not None or att.window is not None:
            self.unsupported = "a custom attention mask or sliding window"
            return
        q = att.query[0].detach().to("cpu", torch.float32).contiguous()
        k = att.key[0].detach().to("cpu", torch.float32).contiguous()
        lse = (layer_lse(q, k, att.scale, att.causal) if att.lse is None
               else att.lse[0].detach().to("cpu", torch.float32))
        out = att.output[0].detach().to("cpu", torch.float32)
        v = att.value[0].detach().to("cpu", torch.float32)
        error = output_error(q, k, v, out, lse, att.scale, att.causal)
        layer = att.layer
        self.norms[layer] = value_norms(v, output_projection(self.model, layer)[0],
                                        q.shape[0])
        self.q[layer], self.k[layer], self.lse[layer] = q, k, lse
        self.pooled[layer] = pooled_weights(q, k, lse, att.scale, att.causal, self.factor)
        self.scales[layer], self.causal = att.scale, att.causal
        self.worst = max(self.worst, error)
        self.progress((layer + 1) / self.n_layers, f"layer {layer + 1} of {self.n_layers}")

    def store(self) -> FactoredPatterns | None:
        """The factored store, or None when a layer was missed or failed its check."""
        if self.unsupported or any(x is None for x in self.lse) or not (
                self.worst <= CHECK_TOLERANCE):
            return None
        return FactoredPatterns(
            q=read_only(torch.stack(self.q).numpy()), k=read_only(torch.stack(self.k).numpy()),
            lse=read_only(torch.stack(self.lse).numpy()), scales=tuple(self.scales),
            causal=bool(self.causal), pooled=read_only(np.stack(self.pooled)),
            pool_factor=self.factor, value_norms=read_only(np.stack(self.norms)))


def value_norms(v: torch.Tensor, w_o: torch.Tensor, n_heads: int) -> np.ndarray:
    """``head_index key_pos`` ``||v_j W_O^h||`` from one layer's ``kv_head key_pos d_head`` v and
    ``head_index d_head d_model`` W_O, through each head's ``W_O W_O^T`` (no pos x d_model
    buffer)."""
    heads = v.to(torch.float64).repeat_interleave(n_heads // v.shape[0], dim=0)
    gram = w_o @ w_o.transpose(1, 2)
    squared = torch.einsum("hpd,hde,hpe->hp", heads, gram, heads)
    return squared.clamp_min(0.0).sqrt().to(torch.float32).numpy()


def _scores(q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor, n_keys: int, scale: float,
            causal: bool) -> torch.Tensor:
    """``head_index len(rows) n_keys`` logits of the given query rows, later keys at -inf."""
    n_kv = k.shape[0]
    picked = q[:, rows].unflatten(0, (n_kv, -1)) * scale
    scores = torch.matmul(picked, k[:, None, :n_keys].transpose(-1, -2)).flatten(0, 1)
    if causal:
        scores.masked_fill_(torch.arange(n_keys)[None, :] > rows[:, None], float("-inf"))
    return scores


def layer_lse(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """``head_index query_pos`` log-sum-exp of every row, a block of rows at a time."""
    n = q.shape[1]
    parts = []
    for r0 in range(0, n, CHUNK_ROWS):
        rows = torch.arange(r0, min(r0 + CHUNK_ROWS, n))
        parts.append(torch.logsumexp(_scores(q, k, rows, int(rows[-1]) + 1 if causal else n,
                                             scale, causal), dim=-1))
    return torch.cat(parts, dim=-1)


def output_error(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 lse: torch.Tensor, scale: float, causal: bool) -> float:
    """``max |exp(q k^T * scale - lse) v - out|`` over a few rows: are q, k, scale, mask and
    LSE what the model used?"""
    n = q.shape[1]
    rows = torch.tensor(sample_rows(n))
    weights = (_scores(q, k, rows, n, scale, causal) - lse[:, rows, None]).exp()
    n_kv = k.shape[0]
    got = torch.matmul(weights.unflatten(0, (n_kv, -1)), v[:, None]).flatten(0, 1)
    return float((got - out[:, rows]).abs().max())


def pooled_weights(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float,
                   causal: bool, factor: int) -> np.ndarray:
    """``head_index pixel pixel`` max-pooled weights of a layer, NaN where wholly masked.

    Each block's maximum is taken over every key and over :data:`ROWS_PER_BLOCK` evenly spaced
    query rows of the block: a diagonal, an offset stripe or a sink column lights every row, so
    the picture is the same as over all rows at a fraction of the cost.
    """
    n_heads, n, _ = q.shape
    n_kv = k.shape[0]
    pixels = math.ceil(n / factor)
    stride = max(1, factor // ROWS_PER_BLOCK)
    per_block = math.ceil(factor / stride)
    blocks_per_chunk = max(1, CHUNK_ROWS // per_block)
    scaled_q = q * scale
    pooled = torch.zeros(n_heads, pixels, pixels)
    for b0 in range(0, pixels, blocks_per_chunk):
        b1 = min(b0 + blocks_per_chunk, pixels)
        r0, r1 = b0 * factor, min(b1 * factor, n)
        rows = torch.arange(r0, r1).unflatten(0, (-1, factor))[:, :: stride].flatten() \
            if (r1 - r0) % factor == 0 else torch.arange(r0, r1)[(torch.arange(r0, r1) - r0)
                                                              % factor % stride == 0]
        n_keys = r1 if causal else n
        picked = scaled_q[:, rows].unflatten(0, (n_kv, -1))
        weights = torch.matmul(picked, k[:, None, :n_keys].transpose(-1, -2)).flatten(0, 1)
        weights.sub_(lse[:, rows, None])
        if causal:  # only keys from r0 on can lie after a query of this chunk
            later = torch.arange(r0, n_keys)[None, :] > rows[:, None]
            weights[..., r0:].masked_fill_(later, float("-inf"))
        weights.exp_()
        weights = torch.nn.functional.pad(weights, (0, -n_keys % factor))
        by_key = weights.unflatten(2, (-1, factor)).amax(dim=3)
        block_of_row = (rows - r0) // factor
        counts = torch.bincount(block_of_row, minlength=b1 - b0).tolist()
        for offset, part in enumerate(torch.split(by_key, counts, dim=1)):
            pooled[:, b0 + offset, : by_key.shape[2]] = part.amax(dim=1)
    pooled = pooled.numpy()
    if causal:
        start = np.arange(pixels) * factor
        pooled[:, start[:, None] + factor - 1 < start[None, :]] = np.nan  # wholly above diagonal
    return pooled


def capture_streaming(model: LoadedModel, ids: torch.Tensor,
                      progress: Progress = quiet) -> FactoredPatterns | None:
    """q, k, LSE and thumbnails of every layer for ``ids`` ``(1, pos)`` in one fused pass.

    Returns:
        The factored store, or None when this model's attention cannot be read this way.
    """
    summary = LayerSummary(model, int(ids.shape[1]), progress)
    run_plain(model, ids, summary)
    return summary.store()
