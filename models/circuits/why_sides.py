"""One head's queries and keys as sums of the stream's parts, and the terms of its softmax.

Each side reads the stream through the block's own norm (scale frozen), its projection (the
query head's ``W_Q``, or ``W_K`` of the key/value head it shares under GQA), QK-norm where the
model has one (per-head scale frozen) and the RoPE rotation at each position: all linear once
the scales are frozen, so every part of the stream becomes one part of the query (or key), and
the projection's bias (``b_Q``, ``b_K``) and the reading norm's bias (``b_ln1.L``) join as parts
of their own. :func:`keep` runs the one pass and keeps both sides of one head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Bool, Float

from models.circuits.why_parts import (
    PartGroup,
    PositionIndex,
    StreamParts,
    stack_groups,
    through_norm,
)
from models.head import Head
from models.model.handle import ModelHandle
from models.model.norms import Norm, NormUnknown, logit_softcap, qk_norm
from models.model.softmax_terms import layer_scales, layer_windows, model_alibi_slopes, rotate
from models.model.weights import projection

SideKind = Literal["query", "key"]
Reads = Literal["query", "key", "value"]
_PROJECTION: dict[str, Literal["q", "k", "v"]] = {"query": "q", "key": "k", "value": "v"}


@dataclass(frozen=True)
class ScoreSide:
    """The query of one head (or the key it reads) at every position, as named parts.

    Attributes:
        kind: ``query`` or ``key``.
        groups: the parts projected to ``d_head``, norm and QK-norm scales folded in.
        cos, sin: ``pos rotary_dim`` RoPE tables (float64), ``None`` without RoPE.
    """

    kind: Reads
    groups: tuple[PartGroup, ...]
    cos: torch.Tensor | None = None
    sin: torch.Tensor | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for group in self.groups for name in group.names)

    def at(
        self, positions: PositionIndex, dtype: torch.dtype = torch.float64
    ) -> Float[torch.Tensor, "pos part d_head"]:
        """Every part at ``positions``, rotated as the softmax sees it."""
        out = stack_groups([group.values(positions, dtype) for group in self.groups])
        if self.cos is None or self.sin is None:
            return out
        cos, sin = self.cos[positions].to(dtype), self.sin[positions].to(dtype)
        return rotate(out[None], cos[None], sin[None])[0]


def read_side(
    model: ModelHandle,
    stream: StreamParts,
    resid_pre: Float[torch.Tensor, "pos d_model"],
    head: Head,
    kind: Reads,
    reading: Norm | None,
    rope: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> ScoreSide:
    """Head ``head``'s query (or key, or value) as parts of ``stream``.

    Args:
        model: the loaded model.
        stream: the stream entering ``head.layer`` as parts.
        resid_pre: ``pos d_model`` that stream as the model had it (the norm's input).
        head: the query head.
        kind: ``query``, or ``key`` or ``value`` (of the key/value head ``head`` reads); a
            value is never rotated.
        reading: the block's own norm in front of attention, ``None`` for post-norm models.
        rope: the layer's ``pos rotary_dim`` cos and sin tables, ``None`` without RoPE.

    Raises:
        NormUnknown: the value has a norm of its own (not handled here).
    """
    which = _PROJECTION[kind]
    index = head.index if which == "q" else model.facts.groups.kv_head(head.index)
    weight, bias = projection(model, head.layer, which, dtype=torch.float64)
    weight, bias = weight[index], bias[index]
    groups = list(stream.groups)
    read = resid_pre.to(torch.float64)
    if reading is not None:
        groups = through_norm(groups, reading, resid_pre, f"b_ln1.{head.layer}")
        read = reading.apply(read)
    groups = [group.then(weight) for group in groups]
    if bool(bias.any()):
        groups.append(PartGroup((f"b_{which.upper()}",), bias[None, None]))
    after = qk_norm(model, head.layer, which)
    if after is not None and which == "v":
        raise NormUnknown("the values have a norm of their own")
    if after is not None:
        divisor = after.divisor(read @ weight + bias)
        groups = [group.then(torch.diag(after.weight), divisor) for group in groups]
    if rope is None or which == "v":
        return ScoreSide(kind=kind, groups=tuple(groups))
    cos, sin = rope
    return ScoreSide(
        kind=kind, groups=tuple(groups), cos=cos.to(torch.float64), sin=sin.to(torch.float64)
    )


@dataclass(frozen=True)
class ScoreTerms:
    """Everything in a head's softmax besides its queries and keys.

    Attributes:
        scale: the logit multiplier.
        causal: whether a query sees only keys at or before it.
        window: sliding-window width, ``None`` for full attention.
        alibi_slope: the head's ALiBi slope, ``None`` without ALiBi.
        softcap: Gemma 2's logit cap ``c``, ``None`` without one.
    """

    scale: float
    causal: bool
    window: int | None = None
    alibi_slope: float | None = None
    softcap: float | None = None

    def position_bias(self, query: int | torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """ALiBi's ``-slope * distance`` between ``query`` and ``keys`` (positions, broadcast;
        float64; zeros without ALiBi)."""
        distance = (query - keys).to(torch.float64)
        if not self.causal:
            distance = distance.abs()
        return -(self.alibi_slope or 0.0) * distance

    def visible(self, query: int | torch.Tensor, n_pos: int) -> Bool[torch.Tensor, "... key_pos"]:
        """Which of ``n_pos`` keys query ``query`` attends to (a column of queries: a mask)."""
        keys = torch.arange(n_pos)
        distance = torch.as_tensor(query) - keys
        seen = distance >= 0 if self.causal else torch.ones_like(distance, dtype=torch.bool)
        if self.window is not None:
            seen = seen & (distance.abs() < self.window)
        return seen

    def capped(self, raw: torch.Tensor) -> torch.Tensor:
        """The logits after the soft-cap (unchanged without one)."""
        return raw if self.softcap is None else self.softcap * torch.tanh(raw / self.softcap)

    def weights(self, raw: Float[torch.Tensor, "... key_pos"], query: int) -> torch.Tensor:
        """The softmax of one query's raw logits (before any cap) over the keys it sees."""
        logits = self.capped(raw.to(torch.float64))
        seen = self.visible(query, raw.shape[-1])
        return torch.softmax(logits.masked_fill(~seen, -math.inf), dim=-1)


def score_terms(model: ModelHandle, head: Head) -> ScoreTerms:
    """The softmax terms of head ``head`` as the model's configuration sets them."""
    slopes = model_alibi_slopes(model)
    return ScoreTerms(
        scale=layer_scales(model)[0][head.layer],
        causal=model.facts.causal,
        window=layer_windows(model)[head.layer],
        alibi_slope=None if slopes is None else float(slopes[head.index]),
        softcap=logit_softcap(model),
    )
