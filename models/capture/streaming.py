"""Capture a long prompt at the speed of the model's own fused attention, in its own dtype.

The model runs once through its plain Hugging Face modules with SDPA attention
(:mod:`models.model.plain`), in the dtype it was loaded in (bfloat16 runs bfloat16 SDPA). As each
layer's attention runs, its q and k (rotated, as the softmax sees them) are kept, upcast to
float32, and everything shown later is computed from them in float32:

- the log-sum-exp of every row (so any window of any head rebuilds exactly later): on the CPU
  the fused kernel returns it beside its output (float32 statistics even for bfloat16 inputs),
  elsewhere it is computed here;
- each head's 64-pixel thumbnail, max-pooled (:mod:`models.capture.overview`) over 8 evenly
  spaced rows of each pixel (every row while a pixel has at most 8); the larger overview of
  the head a page shows is made from the kept q, k and LSE when it is shown
  (:meth:`models.capture.store.FactoredPatterns.head_overview`);
- a self-check: a few rows of ``softmax(q k^T * scale) v`` against SDPA's own output, which
  proves that the kept q, k, scale and mask are what the model used. The allowed difference is
  derived from the dtype (see :func:`allowed_error`), so a bfloat16 pass passes on its merits;
- each head's value norms ``||v_j W_O^h||`` for value-weighted views.

If a layer never calls back, its mask is not plain causal / full, or the check fails, the store
is None and :func:`stream` says why; the caller reports the fallback to the bridge.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float

from models.capture.overview import (
    THUMB,
    Arithmetic,
    layer_overview,
    overview_factor,
    row_stride,
    thumb_factor,
)
from models.capture.store import FactoredPatterns, SdpaCheck, read_only
from models.model.facts import STREAM_ROWS
from models.model.handle import ModelHandle
from models.model.plain import LayerAttention, run_plain
from models.model.weights import output_projection
from models.progress import Progress, quiet
from models.shapes import TokenIds

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
EXP_SLACK = 2e-4  # relative: the CPU kernel's fast exp for half types, float32 accumulation
ABS_SLACK = 1e-5


def pool_factor(n: int, size: int = THUMB) -> int:
    """Positions per thumbnail pixel edge (a whole number of overview pixels)."""
    return thumb_factor(n, size)


def sample_rows(n: int) -> list[int]:
    return sorted({0, n // 3, (2 * n) // 3, n - 1})


class LayerSummary:
    """Collects, layer by layer, what the factored store keeps (see the module docstring)."""

    def __init__(
        self,
        model: ModelHandle,
        n_tokens: int,
        progress: Progress,
        arithmetic: Arithmetic = "float32",
    ) -> None:
        self.model, self.n_layers, self.n = model, model.facts.n_layers, n_tokens
        self.arithmetic = arithmetic
        self.factor = thumb_factor(n_tokens)  # positions per thumbnail pixel edge
        self.stride = row_stride(self.factor)
        self.arrays: dict[str, np.ndarray] = {}
        self.seen = [False] * self.n_layers
        self.scales = [1.0] * self.n_layers
        self.causal = False
        self.dtype = torch.float32
        self.worst = SdpaCheck(
            dtype="float32", error=0.0, ratio=0.0, lse_error=0.0, rows=tuple(sample_rows(n_tokens))
        )
        self.unsupported: str | None = None
        self.relative = [0.0] * self.n_layers
        self.progress = progress

    def _allocate(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """The store's arrays, filled in place layer by layer (no stacking copy at the end)."""
        if self.arrays:
            return
        n_layers, (n_heads, n, d), n_kv = self.n_layers, q.shape, k.shape[0]
        thumb = math.ceil(n / self.factor)
        shapes = {
            "q": (n_heads, n, d),
            "k": (n_kv, n, k.shape[2]),
            "lse": (n_heads, n),
            "norms": (n_heads, n),
            "pooled": (n_heads, thumb, thumb),
        }
        # torch allocates the memory (numpy's own allocator asks for transparent huge pages,
        # which a fresh store of hundreds of megabytes waits on: 0.06-0.26 s for q alone at
        # 2,048 tokens on a 2-core virtual machine, against 0.04 s in plain pages)
        self.arrays = {
            name: torch.empty((n_layers, *shape), dtype=torch.float32).numpy()
            for name, shape in shapes.items()
        }

    def __call__(self, att: LayerAttention) -> None:
        if att.mask is not None or att.window is not None:
            self.unsupported = "the model uses a custom attention mask or a sliding window"
        if self.unsupported:
            return
        layer, query, key = att.layer, att.query[0].detach(), att.key[0].detach()
        self._allocate(query, key)
        a = self.arrays
        q = torch.from_numpy(a["q"][layer]).copy_(query)  # float32 on the CPU, in the store
        k = torch.from_numpy(a["k"][layer]).copy_(key)
        if query.device.type != "cpu":  # compute where the model runs
            q, k = query.to(torch.float32), key.to(torch.float32)
        lse = (
            layer_lse(q, k, att.scale, att.causal)
            if att.lse is None
            else att.lse[0].detach().to(torch.float32)
        )
        a["lse"][layer] = lse.cpu().numpy()
        v = att.value[0].detach().to(torch.float32)
        check = check_rows(q, k, v, att.output[0].detach(), lse, att.scale, att.causal, query.dtype)
        a["norms"][layer] = value_norms(v, value_factor(self.model, layer)).cpu().numpy()
        if self.arithmetic == "model":  # products in the model's dtype (see layer_overview)
            q, k = query, key
        pooled = layer_overview(
            q, k, lse, att.scale, att.causal, self.factor, self.arithmetic, self.stride
        )
        torch.from_numpy(a["pooled"][layer]).copy_(pooled)
        self.seen[layer], self.scales[layer], self.causal = True, att.scale, att.causal
        self.dtype, self.relative[layer] = query.dtype, check.relative
        if check.ratio >= self.worst.ratio:
            self.worst = check
        self.progress((layer + 1) / self.n_layers, f"layer {layer + 1} of {self.n_layers}")

    def failure(self) -> str | None:
        """Why this pass cannot be used, or None."""
        if self.unsupported:
            return self.unsupported
        if not all(self.seen):
            return "some attention layers did not run through the fused kernel"
        if not self.worst.ratio <= 1.0:
            return (
                f"the kept q and k did not reproduce the fused kernel's output within "
                f"{self.worst.dtype} rounding (largest difference {self.worst.error:.2g}, "
                f"{self.worst.ratio:.1f} times what that rounding allows)"
            )
        return None

    def store(self) -> FactoredPatterns | None:
        """The factored store, or None when :meth:`failure` has a reason."""
        if self.failure() is not None:
            return None
        a = {name: read_only(array) for name, array in self.arrays.items()}
        return FactoredPatterns(
            q=a["q"],
            k=a["k"],
            lse=a["lse"],
            scales=tuple(self.scales),
            causal=bool(self.causal),
            pooled=a["pooled"],
            pool_factor=self.factor,
            value_norms=a["norms"],
            overview_factor=overview_factor(self.n),
            overview_arithmetic=self.arithmetic if self.dtype != torch.float32 else "float32",
            check=self.worst,
            layer_errors=tuple(self.relative),
        )


def value_factor(model: ModelHandle, layer: int) -> Float[torch.Tensor, "head_index d_head d"]:
    """``R^T`` of ``W_O^T = Q R`` (QR in float64, kept as float32) for every head of ``layer``:
    ``||v W_O|| = ||v R^T||``. Computed once per model (the weights never change)."""
    factors = model.memo.setdefault("capture_value_factors", {})
    if layer not in factors:
        w_o = output_projection(model, layer)[0]
        r = torch.linalg.qr(w_o.transpose(1, 2), mode="r")[1]
        factors[layer] = r.transpose(1, 2).to(torch.float32)
    factor: torch.Tensor = factors[layer]
    return factor


def value_norms(
    v: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    factor: Float[torch.Tensor, "head_index d_head d"],
) -> Float[torch.Tensor, "head_index key_pos"]:
    """``||v_j W_O^h||`` of one layer from :func:`value_factor`, in float32 without a
    ``pos x d_model`` buffer: a ``d_head x d_head`` product whose squares are all positive, so
    float32 loses nothing to cancellation."""
    n_kv, n, _ = v.shape
    group, d_head, d = factor.shape[0] // n_kv, factor.shape[1], factor.shape[2]
    # each key head's values times the factors of its query heads side by side: one product
    # per key head, no copy of v for each query head
    side = factor.to(v.device).reshape(n_kv, group, d_head, d).permute(0, 2, 1, 3)
    projected = torch.bmm(v, side.reshape(n_kv, d_head, group * d)).view(n_kv, n, group, d)
    norms: torch.Tensor = torch.linalg.vector_norm(projected, dim=-1)
    return norms.permute(0, 2, 1).reshape(-1, n)


def _scores(
    q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor, n_keys: int, scale: float, causal: bool
) -> torch.Tensor:
    """``head_index len(rows) n_keys`` float32 logits of the given rows, later keys at -inf."""
    n_kv, n_rows = k.shape[0], len(rows)
    picked = q[:, rows].to(torch.float32).reshape(n_kv, -1, q.shape[-1])
    keys = k[:, :n_keys].to(torch.float32).transpose(-1, -2)
    scores = (torch.bmm(picked, keys) * scale).reshape(q.shape[0], n_rows, n_keys)
    if causal:
        later = torch.arange(n_keys, device=q.device)[None, :] > rows[:, None]
        scores.masked_fill_(later, float("-inf"))
    return scores


def layer_lse(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    scale: float,
    causal: bool,
) -> Float[torch.Tensor, "head_index query_pos"]:
    """Float32 log-sum-exp of every row of ``q k^T * scale``, a block of rows at a time."""
    n = q.shape[1]
    parts = []
    for r0 in range(0, n, STREAM_ROWS):
        rows = torch.arange(r0, min(r0 + STREAM_ROWS, n), device=q.device)
        parts.append(
            torch.logsumexp(
                _scores(q, k, rows, int(rows[-1]) + 1 if causal else n, scale, causal), dim=-1
            )
        )
    return torch.cat(parts, dim=-1)


def allowed_error(
    out: Float[torch.Tensor, "head_index row d_head"],
    spread: Float[torch.Tensor, "head_index row d_head"],
    dtype: torch.dtype,
) -> Float[torch.Tensor, "head_index row d_head"]:
    """How far SDPA's output may lie from ``sum_j w_j v_j`` computed in float32.

    A fused kernel in a dtype with unit roundoff ``u`` rounds each (unnormalised) weight before
    multiplying it with ``v`` (relative error ``u`` per term: at most ``u * sum_j w_j |v_j|``) and
    rounds its result (``u * |out|``). Its float32 statistics add a relative ``EXP_SLACK`` (a
    fast exponential for half types, the order of float32 sums), and ``ABS_SLACK`` covers
    outputs near zero. bfloat16: ``u = 2^-8``; float16: ``2^-11``; float32: ``2^-24``.
    """
    u = UNIT_ROUNDOFF.get(dtype, 2.0**-8)
    return u * out.abs() + (u + EXP_SLACK) * spread + ABS_SLACK


def check_rows(
    q: Float[torch.Tensor, "head_index query_pos d_head"],
    k: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    v: Float[torch.Tensor, "kv_head_index key_pos d_head"],
    out: Float[torch.Tensor, "head_index query_pos d_head"],
    lse: Float[torch.Tensor, "head_index query_pos"],
    scale: float,
    causal: bool,
    dtype: torch.dtype,
) -> SdpaCheck:
    """``exp(q k^T * scale - lse) v`` against SDPA's ``out`` on a few rows, in float32.

    Args:
        q: ``head_index query_pos d_head``; k, v: ``kv_head_index key_pos d_head`` (float32).
        out: ``head_index query_pos d_head`` SDPA's output in the model's dtype.
        lse: ``head_index query_pos`` float32, as kept.
        dtype: the dtype the kernel ran in (sets the allowed rounding).
    """
    n, n_kv = q.shape[1], k.shape[0]
    rows = torch.tensor(sample_rows(n), device=q.device)
    scores = _scores(q, k, rows, n, scale, causal)
    # query head h = kv * group + j: one product per key head over its group's rows
    weights = (scores - lse[:, rows, None]).exp().reshape(n_kv, -1, n)
    got = torch.bmm(weights, v).reshape(q.shape[0], len(rows), -1)
    spread = torch.bmm(weights, v.abs()).reshape(q.shape[0], len(rows), -1)
    want = out[:, rows].to(torch.float32)
    error = (got - want).abs()
    ratio = error / allowed_error(want, spread, dtype)
    lse_error = (torch.logsumexp(scores, dim=-1) - lse[:, rows]).abs()
    size = float(torch.linalg.vector_norm(want))
    return SdpaCheck(
        dtype=str(dtype).removeprefix("torch."),
        error=float(error.max()),
        ratio=float(ratio.max()),
        lse_error=float(lse_error.max()),
        rows=tuple(int(r) for r in rows),
        relative=float(torch.linalg.vector_norm(got - want)) / size if size > 0 else 0.0,
    )


def stream(
    model: ModelHandle,
    ids: TokenIds,
    progress: Progress = quiet,
    overview_arithmetic: Arithmetic = "float32",
) -> tuple[FactoredPatterns | None, str | None]:
    """q, k, LSE, thumbnails and value norms of every layer in one fused pass.

    Args:
        model: the loaded model (any dtype; statistics are computed in float32).
        ids: ``1 pos`` token ids.
        progress: called after each layer; may raise Cancelled.
        overview_arithmetic: ``float32`` (thumbnails from upcast q and k) or ``model`` (the
            thumbnails' logit products in the model's dtype, with a stated bound: see
            :func:`models.capture.overview.layer_overview`).

    Returns:
        ``(store, None)``, or ``(None, why)`` when this model's attention cannot be read this
        way (the caller falls back and says so).
    """
    summary = LayerSummary(model, int(ids.shape[1]), progress, overview_arithmetic)
    run_plain(model, ids, summary)
    return summary.store(), summary.failure()


def capture_streaming(
    model: ModelHandle, ids: TokenIds, progress: Progress = quiet
) -> FactoredPatterns | None:
    """:func:`stream` without the reason: the store, or None."""
    return stream(model, ids, progress)[0]


def capture_bytes(model: ModelHandle, n_tokens: int) -> int:
    """Bytes the store of a streaming capture of ``n_tokens`` holds (q, k as float32, LSE, value
    norms, thumbnails), for memory budgets."""
    facts = model.facts
    per_head = n_tokens * (facts.d_head + 2) * 4
    heads = facts.n_layers * facts.n_heads
    return (
        heads * (per_head + THUMB * THUMB * 4)
        + facts.n_layers * facts.n_kv_heads * n_tokens * facts.d_head * 4
    )
