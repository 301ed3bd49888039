"""Value-weighted attention (Kobayashi et al. 2020): how much a head moves from each key.

A head's output at query ``i`` is ``sum_j A[i, j] v_j W_O^h``. The weight ``A[i, j]`` says where
it looks; ``W[i, j] = A[i, j] * n_j / T_i`` with ``n_j = ||v_j W_O^h||`` (how much the head
writes when it reads key ``j``) and ``T_i = sum_j A[i, j] * n_j`` says how much of what it
writes comes from key ``j``, each row still summing to 1. A sink key the head looks at but
writes almost nothing from fades out.

- :func:`value_norms` -- ``n_j`` of every head through the bridge's ``hook_v`` (the streaming
  capture computes the same norms in its own pass);
- :func:`value_weighted` -- ``W`` of a given pattern;
- :func:`value_weighting` -- every window, row or column of ``W`` needs the row totals ``T``, so
  this computes them once for every head of a run (a band of rows at a time), together with
  max-pooled thumbnails of ``W``; afterwards any view of ``W`` costs what the same view of
  ``A`` costs.

On GQA/MQA models query head ``h`` reads key/value head ``h // (n_heads / n_kv_heads)``, as
Hugging Face's ``repeat_kv`` lays them out.

The variants (:mod:`models.model.variants`):

- a gated head (Qwen3-Next, Qwen3.5) writes ``g_i ⊙ sum_j A[i, j] v_j`` before ``W_O``, with a
  gate ``g_i`` per query and dimension, so what it writes from key ``j`` at query ``i`` is
  ``N[i, j] = ||(g_i ⊙ v_j) W_O^h||``: a norm per pair, not per key. :func:`gated_norms` computes
  it exactly for every gated layer (``n² · d_head²`` multiply-adds a head, as ``d_head``
  matrix products) and ``W = A * N / T`` with ``T_i = sum_j A[i, j] N[i, j]``;
- a latent-attention layer (DeepSeek-V2/V3) is weighted with its own values (``d_v`` wide);
- a linear-attention layer has no softmax pattern to weight: its norms are 0 and every view
  shows its signed mixing matrix unweighted;
- a learned sink has no value: it moves nothing, so the weighted rows are over the keys only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from jaxtyping import Float

from models.capture.views import pool_rows
from models.cost import Cost
from models.model.allocator import MMAP_THRESHOLD
from models.model.facts import ModelFacts
from models.model.forward import run_hooks, v_hook
from models.model.handle import ModelHandle
from models.model.variants import layer_variants
from models.model.weights import output_projection
from models.progress import Progress, quiet
from models.shapes import TokenIds

NormStack = Float[np.ndarray, "layer head_index key_pos"]
# A band of rows read at once: every head's float32 rows, larger than the C allocator's mmap
# threshold, so each band's arrays are mapped for themselves and unmapped when freed, leaving
# no holes in the heap for the next band to grow past.
BAND_BYTES = 2 * MMAP_THRESHOLD

if TYPE_CHECKING:
    from models.capture.run import AttentionRun


def layer_values(
    model: ModelHandle, ids: TokenIds, layers: list[int] | None = None
) -> dict[int, Float[torch.Tensor, "pos head_index d_head"]]:
    """Each of ``layers``' values (:func:`values_of`) from one pass over ``ids``; every layer
    with a softmax pattern when None."""
    if layers is None:
        variants = layer_variants(model)
        layers = [layer for layer in range(model.facts.n_layers) if variants[layer].softmax]
    acts = run_hooks(model, ids, [v_hook(layer) for layer in layers])
    return {layer: values_of(model, layer, acts[v_hook(layer)]) for layer in layers}


def value_norms(
    model: ModelHandle,
    ids: TokenIds,
    values: dict[int, torch.Tensor] | None = None,
) -> NormStack:
    """``||v_j W_O^h||`` for every layer, query head and key position of ``ids``.

    Args:
        model: the loaded model.
        ids: ``1 pos`` token ids.
        values: :func:`layer_values` of ``ids`` when already read (else one pass reads them).

    Returns:
        ``layer head_index key_pos`` float32 (``v`` includes the value bias; ``b_O`` is not part
        of any one key's share and is left out).
    """
    facts = model.facts
    values = layer_values(model, ids) if values is None else values
    out = np.zeros((facts.n_layers, facts.n_heads, int(ids.shape[1])), np.float32)
    for layer, v in values.items():
        # ||v W_O||^2 = v (W_O W_O^T) v^T: d_head x d_head per head instead of a d_model vector
        # per position, so long prompts need no pos x head x d_model buffer
        gram = output_gram(model, layer)
        squared = torch.einsum("phd,hde,phe->hp", v, gram, v)
        out[layer] = squared.clamp_min(0.0).sqrt().to(torch.float32).numpy()
    return out


def values_of(
    model: ModelHandle, layer: int, hooked: Float[torch.Tensor, "batch ..."]
) -> Float[torch.Tensor, "pos head_index d_head"]:
    """A layer's values from its ``hook_v``, one per query head, float64: the bridge lays a
    latent-attention layer's out head first (``batch kv_head pos d_v``), the others position
    first (``batch pos kv_head d_head``)."""
    v = hooked[0].to("cpu", torch.float64)
    if layer_variants(model)[layer].latent is not None:
        v = v.transpose(0, 1)
    group = model.facts.n_heads // v.shape[1]
    return v.repeat_interleave(group, dim=1)


def output_gram(model: ModelHandle, layer: int) -> Float[torch.Tensor, "head_index d_head d_head"]:
    """``W_O^h (W_O^h)^T`` of every head of ``layer``, float64."""
    w_o, _ = output_projection(model, layer)  # head_index d_head d_model
    return w_o @ w_o.transpose(1, 2)


PairNorms = Float[np.ndarray, "head_index query_pos key_pos"]


def gated_norms(
    model: ModelHandle,
    ids: TokenIds,
    gates: dict[int, np.ndarray],
    values: dict[int, torch.Tensor] | None = None,
) -> dict[int, PairNorms]:
    """``N[i, j] = ||(g_i ⊙ v_j) W_O^h||`` of every head of every gated layer.

    With ``W_O W_O^T = F F^T`` (``F = U sqrt(Λ)`` from its eigenvectors), ``N[i, j]^2 =
    sum_k ((g_i ⊙ F[:, k]) · v_j)^2``: one ``n x n`` matrix product per column ``k`` of ``F``,
    so no ``n x n x d_head`` buffer is made.

    Args:
        model: the loaded model.
        ids: ``1 pos`` token ids.
        gates: layer -> ``head_index query_pos d_head`` ``sigmoid(g)`` (the run's extras).
        values: :func:`layer_values` of ``ids`` when already read (else one pass reads them).

    Returns:
        layer -> ``head_index query_pos key_pos`` float32 norms (``b_O`` left out).
    """
    if not gates:
        return {}
    values = layer_values(model, ids, list(gates)) if values is None else values
    found = {}
    for layer, gate in gates.items():
        v = values[layer]  # pos head_index d_head
        eigen, basis = torch.linalg.eigh(output_gram(model, layer))  # float64
        factor = (basis * eigen.clamp_min(0.0).sqrt()[:, None, :]).float()  # head d_head d_head
        g = torch.tensor(np.asarray(gate), dtype=torch.float32)  # head_index query_pos d_head
        v = v.float()
        n = v.shape[0]
        pairs = np.empty((g.shape[0], g.shape[1], n), np.float32)
        for head in range(g.shape[0]):
            vh = v[:, head].T.contiguous()  # d_head key_pos
            squared = torch.zeros(g.shape[1], n)
            for k in range(factor.shape[-1]):
                part = (g[head] * factor[head, :, k]) @ vh  # float32 at the matmul's rate
                squared.addcmul_(part, part)  # d_head positive terms: 1e-6 relative at worst
            pairs[head] = squared.sqrt_().numpy()
        found[layer] = pairs
    return found


def value_weighted(
    pattern: Float[np.ndarray, "*head query_pos key_pos"],
    norms: Float[np.ndarray, "*head key_pos"],
) -> Float[np.ndarray, "*head query_pos key_pos"]:
    """``A[i, j] * norm[j]``, renormalised so each row sums to 1 (rows of zeros stay zero).

    Args:
        pattern: ``... query_pos key_pos`` attention weights.
        norms: ``... key_pos`` value norms, broadcast against ``pattern``'s leading axes.

    Returns:
        Same shape as ``pattern``, float32.
    """
    weighted = np.asarray(pattern, dtype=np.float64) * np.asarray(norms, np.float64)[..., None, :]
    total = weighted.sum(axis=-1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, weighted / safe, 0.0).astype(np.float32)


@dataclass(frozen=True)
class ValueWeighting:
    """What value-weighted views of one run need.

    Attributes:
        norms: ``layer head_index key_pos`` value norms ``||v_j W_O^h||``.
        totals: ``layer head_index query_pos`` row totals ``sum_j A[i, j] * n_j``.
        pooled: ``layer head_index pixel pixel`` max-pooled value-weighted patterns.
        overview: ``layer head_index pixel pixel`` float16 value-weighted overviews at
            ``overview_factor`` positions a pixel (made in the same pass), or None.
        overview_factor: positions per pixel edge of ``overview``.
        pairs: layer -> ``head_index query_pos key_pos`` ``||(g_i ⊙ v_j) W_O^h||`` of a gated
            layer (:func:`gated_norms`), used there in place of ``norms``.
    """

    norms: NormStack
    totals: Float[np.ndarray, "layer head_index query_pos"]
    pooled: Float[np.ndarray, "layer head_index pixel pixel"]
    overview: Float[np.ndarray, "layer head_index pixel pixel"] | None = None
    overview_factor: int = 1
    pairs: dict[int, PairNorms] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.overview is None else self.overview.nbytes
        extra += sum(pair.nbytes for pair in self.pairs.values())
        return int(self.norms.nbytes + self.totals.nbytes + self.pooled.nbytes + extra)

    def scale(
        self, layer: int, head: int, rows: slice, cols: slice
    ) -> Float[np.ndarray, "query_pos key_pos"]:
        """``n_j / T_i`` for a window: multiply the attention window by it.

        Args:
            layer: the head's layer.
            head: the head's index in its layer.
            rows: the window's query positions.
            cols: the window's key positions.

        Returns:
            ``len(rows) x len(cols)`` factors (0 where a row's total is 0).
        """
        totals = self.totals[layer, head, rows]
        safe = np.where(totals > 0, totals, np.inf)
        pair = self.pairs.get(layer)
        if pair is not None:
            found: np.ndarray = pair[head, rows, cols] / safe[:, None]
            return found
        return self.norms[layer, head, cols][None, :] / safe[:, None]


def weighting_band(n_tokens: int, size: int, n_heads: int) -> int:
    """Query rows :func:`value_weighting` reads at a time: whole blocks of the thumbnails'
    pooling, enough that every head's float32 rows fill :data:`BAND_BYTES` (or the whole
    prompt)."""
    factor = -(-n_tokens // size)
    rows = max(1, BAND_BYTES // (4 * n_heads * n_tokens))
    return factor * -(-rows // factor)


def value_weighting(
    run: AttentionRun,
    norms: NormStack,
    size: int = 64,
    progress: Progress = quiet,
    overview: int = 256,
    pairs: dict[int, PairNorms] | None = None,
) -> ValueWeighting:
    """Row totals and thumbnails of the value-weighted pattern of every head.

    Args:
        run: the captured run.
        norms: ``layer head_index key_pos`` from :func:`value_norms`
            or the streaming capture.
        size: thumbnail size in pixels (max-pooled).
        progress: called once per layer.
        overview: size in pixels of the per-head overviews made in the same pass (0: none).
        pairs: the gated layers' norms per pair (:func:`gated_norms`), used there instead of
            ``norms``.
    """
    pairs = pairs or {}
    n, n_layers = run.n_tokens, run.facts.n_layers
    factor = -(-n // size)
    big = -(-n // overview) if overview else 0
    band = weighting_band(n, size, run.facts.n_heads)
    totals, pooled, overviews = [], [], []
    for layer in range(n_layers):
        layer_totals, parts = [], []
        if big:  # a band may end inside an overview block: its pixels are merged by fmax
            big_pixels = -(-n // big)
            layer_big = np.full((run.facts.n_heads, big_pixels, big_pixels), np.nan, np.float16)
        for start in range(0, n, band):
            rows = slice(start, min(start + band, n))
            # in place: one float64 copy of the band at a time
            weighted = run.store.layer_window(layer, rows, slice(None)).astype(np.float64)
            pair = pairs.get(layer)
            weighted *= norms[layer][:, None, :] if pair is None else pair[:, rows]
            row_totals = weighted.sum(axis=-1)
            layer_totals.append(row_totals)
            weighted /= np.where(row_totals > 0, row_totals, np.inf)[..., None]
            shown = weighted.astype(np.float32)
            del weighted
            if run.facts.causal:
                above = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                shown[:, above] = np.nan
            parts.append(pool_rows(shown, factor, size))
            if big:
                part = pool_rows(shown, big, overview, offset=start % big).astype(np.float16)
                at = slice(start // big, start // big + part.shape[-2])
                layer_big[:, at] = np.fmax(layer_big[:, at], part)
        totals.append(np.concatenate(layer_totals, axis=-1))
        pooled.append(np.concatenate(parts, axis=-2))
        if big:
            overviews.append(layer_big)
        progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return ValueWeighting(
        norms=np.asarray(norms, np.float32),
        totals=np.stack(totals),
        pooled=np.stack(pooled),
        overview=np.stack(overviews) if big else None,
        overview_factor=big or 1,
        pairs={layer: np.asarray(pair, np.float32) for layer, pair in pairs.items()},
    )


def weighting_cost(run: AttentionRun, size: int = 64, overview: int = 256) -> Cost:
    """The cost of :func:`value_weighting` of ``run`` (after :func:`value_norms` when the
    capture kept no norms).

    Memory: a band of every head's rows (:func:`weighting_band`) at 12 bytes a cell (the rows
    read in float32 and their float64 copy; later the float64 copy and the float32 rows shown;
    then those and each picture's padded float32 copy), and what it keeps, twice (each layer's
    parts, then their stack): float32 norms, float64 row totals, float32 thumbnails and
    float16 overviews of every head. Before it, when the capture kept no norms, the pass that
    computes them. The sum is doubled for what the heap holds beyond the arrays counted
    (measured, not all explained: smaller arrays such as the causal mask's index arrays change
    size from band to band and likely leave holes); on SmolLM2 at 2,000 tokens the weighting
    measured 477 MiB against 283 MiB counted.

    A gated layer adds :func:`gated_norms`: ``n² · d_head²`` multiply-adds a head and its float32
    norms per pair (kept), with three float32 ``n x n`` working arrays and the float64 values.
    """
    facts, n = run.facts, run.n_tokens
    heads = facts.n_layers * facts.n_heads
    band = min(n, weighting_band(n, size, facts.n_heads))
    working = 12 * facts.n_heads * band * n
    thumb = -(-n // -(-n // size))  # pixels a side
    big = -(-n // -(-n // overview)) if overview else 0
    kept = 2 * heads * (4 * n + 8 * n + 4 * thumb * thumb + 2 * big * big)
    peak = 2 * (working + kept)
    if getattr(run.store, "value_norms", None) is None:
        peak = max(peak, norms_bytes(facts, n))
    gated = len(run.extras.gates) if run.extras is not None else 0
    flops = facts.forward_flops(n)
    if gated:
        # gated_norms: d_head products of n x d_head by d_head x n per head, each squared and
        # added in float64; it keeps float32 norms per pair, which the pass then reads
        flops += gated * facts.n_heads * (2 * n * n * facts.d_head * facts.d_head)
        pair_bytes = gated * facts.n_heads * n * n * 4
        peak += pair_bytes + 3 * 4 * n * n + norms_bytes(facts, n)
    return Cost(flops=flops, peak_bytes=peak)


def norms_bytes(facts: ModelFacts, n_tokens: int) -> int:
    """Memory :func:`value_norms` adds: a forward pass that keeps every layer's ``v`` (float32),
    then per layer ``v`` in float64 and repeated for every query head, the einsum's
    ``pos head d_head`` product, and each layer's float64 norms with their float32 stack."""
    n, d = n_tokens, facts.d_head
    kept_v = 4 * facts.n_layers * n * facts.n_kv_heads * d
    per_layer = 8 * n * d * (facts.n_kv_heads + 2 * facts.n_heads)
    norms = (8 + 8 + 4) * facts.n_layers * facts.n_heads * n
    return facts.activation_bytes(n) + kept_v + per_layer + norms
