"""Every head's divergence between two factored runs at matrix-product speed.

No row is rebuilt on its own and no pattern is kept. For a band of aligned queries of one layer
and a chunk of keys, one matrix product per prompt gives every head's ``log p = q k^T * scale -
lse`` at once (the row's LSE rides along as one more column of q, against a column of -1 in k),
and the Jensen–Shannon divergence of each pair of rows is summed on the spot:

    2 ln 2 * JSD = sum over keys of  p log p + q log q - 2 m log m,   m = (p + q) / 2,

with ``p = exp(log p)``: two products, two exponentials and one logarithm per weight, in float32
(each key's term is at least 0, so the row sums lose nothing to cancellation), rows added in
float64. A chunk holds about :data:`CHUNK_CELLS` logits per prompt, so every pass over it stays
in the processor's caches; nothing of the size of a head's ``n x n`` pattern is ever held.

Chunks are ranges of aligned keys, and each prompt reads the tokens that lie between the first
tokens of those keys, so chunk by chunk the two prompts cover the same aligned keys. Where every
token of a chunk is a unit of its own and aligned (tokens, away from the differing part), the
logits are already on the aligned axis. Elsewhere the weights are added into their aligned unit
(a word's pieces) or into the one "unaligned" bin, and in word space a band's query rows are
first averaged into words by one small product; the logarithms are then taken of the merged
weights. A causal band reads keys only up to its last query and masks those after each query.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int

from models.capture.alignment import Alignment, Side
from models.capture.store import FactoredPatterns
from models.capture.words import Words
from models.progress import Progress, quiet

BAND_COLUMNS = 384  # query rows of one key head's query heads in a band: the products' width
CHUNK_CELLS = 1 << 18  # logits of one prompt's chunk (1 MiB in float32): stays in the caches
# Log-weights are raised to LOG_FLOOR (weights to e^-64 = 1.6e-28), masked keys set to it: an
# exponential or a logarithm that underflows into subnormal numbers runs 15-30 times slower, and
# what such a weight adds to a row's divergence is below 1e-24 bits per key.
LOG_FLOOR = -64.0
WEIGHT_FLOOR = math.exp(LOG_FLOOR)
LN2 = math.log(2.0)


@dataclass(frozen=True)
class SideUnits:
    """One prompt's units (tokens or words) on the aligned axis.

    Attributes:
        starts: ``n_units + 1`` token boundaries of the units.
        units: the unit of each aligned index, ascending.
        gaps: the runs of tokens of unaligned units, ascending.
    """

    starts: Int[np.ndarray, " boundary"]
    units: Int[np.ndarray, " aligned"]
    gaps: tuple[tuple[int, int], ...]

    def tokens(self, first: int, stop: int) -> tuple[int, int]:
        """Tokens of aligned units ``[first, stop)`` (contiguous inside a matching block)."""
        return int(self.starts[self.units[first]]), int(self.starts[self.units[stop - 1] + 1])


def side_units(alignment: Alignment, side: Side, starts: Int[np.ndarray, " boundary"]) -> SideUnits:
    """The :class:`SideUnits` of one side of an alignment of units with token ``starts``."""
    gaps = tuple((int(starts[g.start]), int(starts[g.stop])) for g in alignment.unaligned(side))
    return SideUnits(starts, alignment.positions(side).astype(np.int64), gaps)


def unit_starts(n_tokens: int, words: Words | None) -> Int[np.ndarray, " boundary"]:
    return np.arange(n_tokens + 1) if words is None else words.bounds


@dataclass(frozen=True)
class Band:
    """Aligned queries ``[first, stop)`` inside one matching block."""

    first: int
    stop: int


def bands(alignment: Alignment, a: SideUnits, rows: int, skip: int) -> Iterator[Band]:
    """Bands of whole units of about ``rows`` query tokens of A (at least one unit), from
    aligned index ``skip`` on."""
    for at, _, length in alignment.blocks("a"):
        i = max(at, skip)
        while i < at + length:
            t0 = a.tokens(i, i + 1)[0]
            last = int(np.searchsorted(a.starts, t0 + rows, side="right")) - 1  # unit past them
            stop = min(at + length, max(i + 1, i + last - int(a.units[i])))
            yield Band(i, stop)
            i = stop


@dataclass(frozen=True)
class LayerSide:
    """One prompt's layer, ready for the products: ``[q * scale, lse]`` and ``[k, -1]``."""

    queries: Float[torch.Tensor, "head_index query_pos d_plus_one"]
    keys: Float[torch.Tensor, "kv_head_index key_pos d_plus_one"]


def layer_side(store: FactoredPatterns, layer: int) -> LayerSide:
    """Copies of the layer's q (scaled, with each row's LSE) and k (with -1) in float32."""
    q, k = store.q[layer], store.k[layer]
    n_heads, n, d = q.shape
    queries = np.empty((n_heads, n, d + 1), dtype=np.float32)
    np.multiply(q, np.float32(store.scales[layer]), out=queries[..., :d])
    queries[..., d] = store.lse[layer]
    keys = np.empty((k.shape[0], k.shape[1], d + 1), dtype=np.float32)
    keys[..., :d] = k
    keys[..., d] = -1.0
    return LayerSide(torch.from_numpy(queries), torch.from_numpy(keys))


@dataclass(frozen=True)
class QueryUnits:
    """Which unit (word) of a band each of its query tokens belongs to, and ``1 / pieces`` of
    each unit: averaging rows is adding them into their unit, then scaling."""

    unit: Int[torch.Tensor, " query_pos"]
    scale: Float[torch.Tensor, " unit"]


def query_units(side: SideUnits, band: Band) -> QueryUnits:
    u0, u1 = int(side.units[band.first]), int(side.units[band.stop - 1]) + 1
    counts = np.diff(side.starts[u0 : u1 + 1])
    unit = np.repeat(np.arange(len(counts)), counts)
    return QueryUnits(torch.from_numpy(unit), torch.from_numpy((1.0 / counts).astype(np.float32)))


def _mask_later(logits: torch.Tensor, keys: tuple[int, int], queries: tuple[int, int]) -> None:
    """Lower to :data:`LOG_FLOOR` the logits of keys after their query (``logits``:
    ``kv_head key (group query)`` of keys ``keys`` and query tokens ``queries``)."""
    (k0, k1), (q0, q1) = keys, queries
    first = max(k0, q0 + 1)  # keys before this one are seen by every query of the band
    if first >= k1:
        return
    later = torch.arange(first, k1)[:, None] > torch.arange(q0, q1)[None, :]
    tail = logits[:, first - k0 :]
    tail.view(tail.shape[0], tail.shape[1], -1, q1 - q0).masked_fill_(
        later[None, :, None], LOG_FLOOR
    )


def in_units(weights: torch.Tensor, queries: QueryUnits | None, group: int) -> torch.Tensor:
    """``kv_head key (group unit)``: each unit's rows averaged (word space), or ``weights``."""
    if queries is None or queries.scale.shape[0] == queries.unit.shape[0]:
        return weights  # one token a unit
    n_kv, n_keys = weights.shape[:2]
    n_queries, n_units = queries.unit.shape[0], queries.scale.shape[0]
    out = torch.zeros(n_kv * n_keys * group, n_units)
    out.index_add_(1, queries.unit, weights.reshape(-1, n_queries)).mul_(queries.scale)
    return out.view(n_kv, n_keys, group * n_units)


def key_units(
    weights: torch.Tensor, side: SideUnits, keys: tuple[int, int]
) -> Float[torch.Tensor, "kv_head unit column"]:
    """Weights of the aligned units ``keys`` (a range inside one matching block): their pieces'
    columns added."""
    u0, u1 = int(side.units[keys[0]]), int(side.units[keys[1] - 1]) + 1
    bounds = side.starts[u0 : u1 + 1]
    if u1 - u0 == weights.shape[1]:
        return weights  # one token a unit
    into = torch.from_numpy(np.repeat(np.arange(u1 - u0), np.diff(bounds)))
    out = torch.zeros(weights.shape[0], u1 - u0, weights.shape[2])
    return out.index_add_(1, into, weights)


def pair_terms(
    p: torch.Tensor, q: torch.Tensor, log_p: torch.Tensor, log_q: torch.Tensor
) -> torch.Tensor:
    """``sum_key p log p + q log q - 2 m log m`` over dimension 1, ``m = (p + q) / 2``, for
    weights at least :data:`WEIGHT_FLOOR` (every argument is overwritten)."""
    log_p.mul_(p).addcmul_(q, log_q)
    m = torch.lerp(p, q, 0.5, out=log_q)
    return log_p.addcmul_(m, torch.log(m, out=p), value=-2.0).sum(dim=1)


def logs_of(weights: torch.Tensor) -> torch.Tensor:
    """``log w`` of weights raised to :data:`WEIGHT_FLOOR` (in place: ``w`` is raised too)."""
    return weights.clamp_min_(WEIGHT_FLOOR).log()


@dataclass(frozen=True)
class Pass:
    """What every band of one layer reads: both prompts' layer and units, and the options."""

    layers: tuple[LayerSide, LayerSide]
    sides: tuple[SideUnits, SideUnits]
    alignment: Alignment
    causal: bool
    words: bool
    chunk_keys: int

    @property
    def group(self) -> int:
        return self.layers[0].queries.shape[0] // self.layers[0].keys.shape[0]

    def key_chunks(self, band: Band) -> Iterator[tuple[int, int]]:
        """Ranges of aligned keys a band reads, each inside one matching block."""
        limit = band.stop if self.causal else self.alignment.n_aligned
        for at, _, length in self.alignment.blocks("a"):
            for j0 in range(at, min(at + length, limit), self.chunk_keys):
                yield j0, min(j0 + self.chunk_keys, at + length, limit)


@dataclass(frozen=True)
class BandRows:
    """One prompt's queries of a band: the product's right side, their tokens, and (in word
    space) the weights that average them into words."""

    rows: Float[torch.Tensor, "kv_head d_plus_one column"]
    tokens: tuple[int, int]
    units: QueryUnits | None


def band_rows(work: Pass, which: int, band: Band) -> BandRows:
    layer, side = work.layers[which], work.sides[which]
    t0, t1 = side.tokens(band.first, band.stop)
    width = layer.queries.shape[2]
    picked = layer.queries[:, t0:t1].reshape(-1, work.group * (t1 - t0), width)
    units = query_units(side, band) if work.words else None
    return BandRows(picked.transpose(1, 2), (t0, t1), units)


def chunk_logits(work: Pass, which: int, rows: BandRows, keys: tuple[int, int]) -> torch.Tensor:
    """``kv_head key (group query)`` log-weights of key tokens ``keys`` for a band's queries,
    masked after each query, raised to :data:`LOG_FLOOR`."""
    logits = torch.bmm(work.layers[which].keys[:, keys[0] : keys[1]], rows.rows)
    if work.causal:
        _mask_later(logits, keys, rows.tokens)
    return logits.clamp_min_(LOG_FLOOR)


def band_jsd(work: Pass, band: Band) -> Float[torch.Tensor, "head_index band"]:
    """JSD in bits of every head's rows at a band of aligned queries (units)."""
    group, n_heads = work.group, work.layers[0].queries.shape[0]
    rows = [band_rows(work, i, band) for i in (0, 1)]
    width = group * (band.stop - band.first)
    terms = torch.zeros(n_heads // group, width)
    for keys in work.key_chunks(band):
        spans = [side.tokens(*keys) for side in work.sides]
        logs = [chunk_logits(work, i, rows[i], spans[i]) for i in (0, 1)]
        if not work.words:  # one token a unit: the logits are on the aligned axis
            terms += pair_terms(logs[0].exp(), logs[1].exp(), logs[0], logs[1])
            continue
        p, q = (
            in_units(key_units(logs[i].exp_(), work.sides[i], keys), rows[i].units, group)
            for i in (0, 1)
        )
        terms += pair_terms(p, q, logs_of(p), logs_of(q))
    if work.alignment.has_bin:  # the unaligned bin: one more key
        p, q = (unaligned_share(work, i, rows[i]) for i in (0, 1))
        terms += pair_terms(p, q, logs_of(p), logs_of(q))
    return terms.div_(2 * LN2).clamp_(0.0, 1.0).reshape(n_heads, -1)


def unaligned_share(work: Pass, which: int, rows: BandRows) -> torch.Tensor:
    """``kv_head 1 column``: the weight of every unaligned token a band's queries see."""
    n_kv = work.layers[which].keys.shape[0]
    total = torch.zeros(n_kv, 1, work.group * (rows.tokens[1] - rows.tokens[0]))
    for start, stop in work.sides[which].gaps:
        if work.causal and start >= rows.tokens[0]:  # after the band's queries
            break
        for k0 in range(start, stop, work.chunk_keys):
            keys = (k0, min(k0 + work.chunk_keys, stop))
            total += chunk_logits(work, which, rows, keys).exp_().sum(dim=1, keepdim=True)
    return in_units(total, rows.units, work.group)


def fusable(store_a: object, store_b: object) -> tuple[FactoredPatterns, FactoredPatterns] | None:
    """Both stores, when both keep q, k and finite LSE of the same kind of mask (what a fused
    pass reads); else None."""
    if not (isinstance(store_a, FactoredPatterns) and isinstance(store_b, FactoredPatterns)):
        return None
    if store_a.causal != store_b.causal:
        return None
    if not (np.isfinite(store_a.lse).all() and np.isfinite(store_b.lse).all()):
        return None
    return store_a, store_b


def fused_divergence(
    stores: tuple[FactoredPatterns, FactoredPatterns],
    alignment: Alignment,
    starts: tuple[np.ndarray, np.ndarray],
    words: bool,
    skip: int = 0,
    progress: Progress = quiet,
) -> Float[np.ndarray, "layer head_index"]:
    """Every head's JSD summed over the aligned queries from aligned index ``skip`` on.

    Args:
        stores: A's and B's q, k and LSE (see :func:`fusable`).
        alignment: how their units line up.
        starts: each prompt's ``n_units + 1`` token boundaries of its units.
        words: units are words (rows averaged, keys added) rather than tokens.
        skip: aligned queries before this index count 0 (rows known to be identical).
        progress: called once per layer; may raise Cancelled.
    """
    sides = (side_units(alignment, "a", starts[0]), side_units(alignment, "b", starts[1]))
    n_layers, n_heads = stores[0].q.shape[:2]
    group = n_heads // stores[0].k.shape[1]
    rows = max(8, BAND_COLUMNS // group)
    plan = list(bands(alignment, sides[0], rows, skip))
    totals = np.zeros((n_layers, n_heads))
    with torch.no_grad():
        for layer in range(n_layers):
            work = Pass(
                layers=(layer_side(stores[0], layer), layer_side(stores[1], layer)),
                sides=sides,
                alignment=alignment,
                causal=stores[0].causal,
                words=words,
                chunk_keys=max(1, CHUNK_CELLS // (n_heads * rows)),
            )
            for band in plan:
                totals[layer] += band_jsd(work, band).sum(dim=1, dtype=torch.float64).numpy()
            progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return totals
