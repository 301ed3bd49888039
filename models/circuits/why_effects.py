"""What removing one part does, to the score and to the attention weights.

- Scales frozen (the split's own convention): removing query-side part ``a`` changes the logit
  by exactly minus its row sum, key-side part ``b`` by minus its column sum. A query-side part
  is removed at the query only; a key-side part at every key, since it is there for all of them.
- Scales free: the same removal fed to the model's own norm, so the norm's scale (and QK-norm's)
  is recomputed; one pass resumed at the head's layer, every part a row of the batch. The gap
  between the two columns is what freezing the scales assumes away.
- From scores to weights: with scales frozen, the query's whole row of logits with the part
  removed, the softmax recomputed (not linearised): the weight on the key before and after, and
  the keys that gain. A part can raise this key's logit and still lose it weight, when it
  raises other keys' logits more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.circuits.why import WhySplit
from models.circuits.why_keep import KeptHead
from models.circuits.why_sides import SideKind
from models.cost import Cost, device_of
from models.model.forward import model_device
from models.model.handle import ModelHandle
from models.model.norms import block_norm
from models.model.stream import qk_with_reading
from models.model.weights import input_norm, parameter_dtype

GAINERS = 3
FLOAT = 4
# pos x d_model float32 arrays per copy of the prompt at the resumed pass's peak: SmolLM2's last
# layer measured 15 (77 MiB at 400 tokens, 199 MiB at 1,000, with 6 copies)
WIDTHS_PER_COPY = 20


@dataclass(frozen=True)
class PartEffect:
    """Removing one part from one side of a cell.

    Attributes:
        part: the part's name.
        side: ``query`` (removed at the query) or ``key`` (removed at every key).
        frozen: change of the raw logit with every scale frozen (minus its row or column sum).
        free: the change with the norm scales recomputed, ``None`` where no input of the
            projection carries the part (``b_Q``, ``b_K``) or it was not computed.
        weight: the model's weight on the key.
        weight_removed: that weight with the part removed, scales frozen.
        gainers: ``(key, weight change)`` of the keys whose weight rises most.
    """

    part: str
    side: SideKind
    frozen: float
    free: float | None
    weight: float
    weight_removed: float
    gainers: tuple[tuple[int, float], ...]

    @property
    def weight_change(self) -> float:
        return self.weight_removed - self.weight


def top_parts(cell: WhySplit, k: int = 5) -> list[tuple[str, SideKind]]:
    """The ``k`` parts, of either side, whose totals are largest in size."""
    query = zip(cell.query_parts, cell.query_totals, strict=True)
    key = zip(cell.key_parts, cell.key_totals, strict=True)
    found: list[tuple[float, str, SideKind]] = [(abs(float(v)), n, "query") for n, v in query]
    found += [(abs(float(v)), n, "key") for n, v in key]
    found.sort(key=lambda item: -item[0])
    return [(name, side) for _, name, side in found[:k]]


def removed_row(kept: KeptHead, query: int, part: str, side: SideKind) -> torch.Tensor:
    """``key_pos`` raw logits of ``query`` with ``part`` removed from ``side``, scales frozen
    (float64)."""
    raw = kept.raw_row(query)
    scale = kept.terms.scale
    if side == "query":
        share = kept.query_parts[query, kept.query.names.index(part)].to(torch.float64)
        return raw - scale * (kept.k.to(torch.float64) @ share)
    share = kept.key_parts[:, kept.key.names.index(part)].to(torch.float64)
    return raw - scale * (share @ kept.q[query].to(torch.float64))


def weight_effect(kept: KeptHead, cell: WhySplit, part: str, side: SideKind) -> PartEffect:
    """Removing ``part`` from ``side`` of ``cell``, scales frozen (``free`` left ``None``)."""
    totals = cell.query_totals if side == "query" else cell.key_totals
    names = cell.query_parts if side == "query" else cell.key_parts
    before = kept.terms.weights(kept.raw_row(cell.query), cell.query)
    after = kept.terms.weights(removed_row(kept, cell.query, part, side), cell.query)
    change = after - before
    order = torch.argsort(change, descending=True)[:GAINERS]
    return PartEffect(
        part=part,
        side=side,
        frozen=-float(totals[names.index(part)]),
        free=None,
        weight=float(before[cell.key]),
        weight_removed=float(after[cell.key]),
        gainers=tuple((int(k), float(change[k])) for k in order if change[k] > 0),
    )


def free_changes(
    model: ModelHandle, kept: KeptHead, cell: WhySplit, parts: list[tuple[str, SideKind]]
) -> list[float | None]:
    """The logit's change when each part is removed with the norm scales free: one pass resumed
    at the head's layer, one batch row per part (``None`` for ``b_Q``/``b_K``)."""
    layer, n = kept.head.layer, kept.n_pos
    read = input_norm(model, layer)
    resid = kept.resid_pre
    device, dtype = model_device(model), parameter_dtype(model)
    with torch.no_grad():
        clean = read(resid.to(device, dtype)).to("cpu", torch.float32)
    copies = 1 + len(parts)
    q_read, k_read = clean.repeat(copies, 1, 1), clean.repeat(copies, 1, 1)
    reading = block_norm(model, layer, "ln1")
    for row, (part, side) in enumerate(parts, start=1):
        where = torch.tensor([cell.query]) if side == "query" else torch.arange(n)
        target = q_read if side == "query" else k_read
        if part == f"b_ln1.{layer}" and reading is not None and reading.bias is not None:
            target[row, where] = clean[where] - reading.bias.to(torch.float32)
        elif part not in ("b_Q", "b_K"):
            values = kept.stream.part(part, where).to(torch.float32)
            with torch.no_grad():
                redone = read((resid[where] - values).to(device, dtype))
            target[row, where] = redone.to("cpu", torch.float32)
    ids = torch.tensor([kept.token_ids])
    q, k = qk_with_reading(model, ids, layer, resid, q_read, k_read)
    kv = model.facts.groups.kv_head(kept.head.index)
    dots = (q[:, cell.query, kept.head.index].double() * k[:, cell.key, kv].double()).sum(-1)
    raw = dots * kept.terms.scale
    return [
        None if part in ("b_Q", "b_K") else float(raw[row] - raw[0])
        for row, (part, _) in enumerate(parts, start=1)
    ]


def part_effects_cost(model: ModelHandle, kept: KeptHead, k: int = 5) -> Cost:
    """Cost of :func:`part_effects`: one layer's norm and query/key projections on ``1 + k``
    copies of the prompt (the weights' changes are lookups in the kept parts).

    Memory: :data:`WIDTHS_PER_COPY` ``pos x d_model`` float32 arrays per copy (the query and
    key projections' inputs, and the resumed pass's embeddings, resumed stream, norm, q, k, v,
    RoPE's temporaries and the captured copies)."""
    n, width, d_head = kept.n_pos, model.facts.d_model, model.facts.d_head
    copies = 1 + k
    flops = copies * 2.0 * n * width * d_head * 4
    peak = FLOAT * n * width * WIDTHS_PER_COPY * copies
    return Cost(flops, int(peak), 0.05, device_of(model.spec.device))


def part_effects(
    model: ModelHandle, kept: KeptHead, cell: WhySplit, k: int = 5
) -> list[PartEffect]:
    """The ``k`` largest parts of ``cell``: score change frozen and free, weight change."""
    parts = top_parts(cell, k)
    free = free_changes(model, kept, cell, parts)
    return [
        PartEffect(**{**weight_effect(kept, cell, part, side).__dict__, "free": change})
        for (part, side), change in zip(parts, free, strict=True)
    ]
