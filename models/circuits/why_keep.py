"""One pass that keeps what splitting a head's scores needs: the stream's parts, both sides of
the head, its softmax terms and its own queries and keys (to check the parts against).

:func:`keep_cost` prices the pass before it runs; :func:`keep` runs it. After that, a cell's
split (:mod:`models.circuits.why`), a whole row or one pair over the prompt
(:mod:`models.circuits.why_rows`) are arithmetic on what was kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float

from models.circuits.cost import FLOAT, LAYER_OVERHEAD_S, PassPlan
from models.circuits.why_parts import StreamParts, layout, stream_parts
from models.circuits.why_sides import ScoreSide, ScoreTerms, read_side, score_terms
from models.cost import Cost, device_of
from models.errors import UserError
from models.head import Head
from models.model.forward import tokenize
from models.model.handle import ModelHandle
from models.model.norms import NormUnknown, block_norm
from models.model.stream import StreamUnavailable, capture_stream
from models.model.tokens import readable_tokens
from models.model.weights import pre_norm
from models.progress import Progress, quiet
from models.shapes import TokenIds

MAX_GAP = {torch.float32: 1e-4, torch.float64: 1e-4}  # relative; low precision: LOW_PRECISION_GAP
LOW_PRECISION_GAP = 3e-2
SAMPLE = 32  # positions the rebuilt stream is checked at (queries and keys: every position)
POSITION_BLOCK = 128  # positions a side's parts are computed at at once
MATRIX_COPIES = 3  # float64 matrices per earlier layer held at once while the sides are read


class WhyUnavailable(UserError):
    """This model computes something the split cannot follow; the text says what."""

    level = "warning"


@dataclass(frozen=True)
class KeptHead:
    """What one pass kept for splitting head ``head``'s scores on one prompt.

    Attributes:
        head: the head.
        token_ids, tokens: the prompt as the model saw it (position 0 first, BOS included).
        stream: the stream entering the head's layer, as parts.
        query, key: the head's two sides as parts.
        terms: the rest of its softmax.
        q, k: ``pos d_head`` the model's own query and key of the head (float32), as its
            softmax saw them.
        query_parts, key_parts: ``pos part d_head`` both sides' parts at every position
            (float32), for rows and maps; a single cell is recomputed in float64.
        resid_pre: ``pos d_model`` the stream entering the layer (float32).
        stream_gap, query_gap, key_gap: largest ``|sum of parts - model's own|`` of the stream,
            queries and keys over the prompt, relative to the largest ``|model's own|``.
    """

    head: Head
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    stream: StreamParts
    query: ScoreSide
    key: ScoreSide
    terms: ScoreTerms
    q: Float[torch.Tensor, "pos d_head"]
    k: Float[torch.Tensor, "pos d_head"]
    query_parts: Float[torch.Tensor, "pos part d_head"]
    key_parts: Float[torch.Tensor, "pos part d_head"]
    resid_pre: Float[torch.Tensor, "pos d_model"]
    stream_gap: float
    query_gap: float
    key_gap: float

    @property
    def n_pos(self) -> int:
        return len(self.token_ids)

    def raw_row(self, query: int) -> Float[torch.Tensor, " key_pos"]:
        """The model's own logits of ``query`` against every key, before any cap (float64)."""
        q = self.q[query].to(torch.float64)
        keys = torch.arange(self.n_pos)
        dots = self.k.to(torch.float64) @ q * self.terms.scale
        return dots + self.terms.position_bias(query, keys)


def _every_position(side: ScoreSide, n_pos: int) -> Float[torch.Tensor, "pos part d_head"]:
    """``side.at`` every position in float32, :data:`POSITION_BLOCK` positions at a time: the
    projection and rotation's temporaries are a block's size, not the prompt's."""
    first = side.at(slice(0, min(n_pos, POSITION_BLOCK)), torch.float32)
    out = torch.empty((n_pos, *first.shape[1:]), dtype=torch.float32)
    out[: first.shape[0]] = first
    for start in range(POSITION_BLOCK, n_pos, POSITION_BLOCK):
        block = slice(start, min(n_pos, start + POSITION_BLOCK))
        out[block] = side.at(block, torch.float32)
    return out


def _gap(parts: torch.Tensor, own: torch.Tensor) -> float:
    own = own.to(torch.float64)
    return float((parts - own).abs().max() / own.abs().max().clamp_min(1e-30))


def _tolerance(model: ModelHandle) -> float:
    return MAX_GAP.get(model.spec.torch_dtype, LOW_PRECISION_GAP)


def keep(model: ModelHandle, ids: TokenIds, head: Head, progress: Progress = quiet) -> KeptHead:
    """One pass over ``ids`` (``1 pos``) keeping the split of head ``head``'s scores.

    Raises:
        ValueError: ``head`` is not a head of the model.
        WhyUnavailable: the bridge hides an activation, a norm is of an unknown kind, or the
            parts do not add up to the model's own stream, queries or keys.
    """
    facts = model.facts
    if not head.fits(facts.n_layers, facts.n_heads):
        raise ValueError(f"{head} is not a head of {facts.name}")
    progress(0.0, f"one pass keeping the parts of the stream entering layer {head.layer}")
    try:
        plan = layout(model, head.layer)
        acts = capture_stream(
            model,
            ids,
            head.layer,
            plan.norm_sites(),
            embed_norm=plan.embed_norm is not None,
            type_embed=plan.type_embed,
        )
        reading = block_norm(model, head.layer, "ln1") if pre_norm(model) else None
    except (StreamUnavailable, NormUnknown) as err:
        raise WhyUnavailable(f"Why here is not available for {facts.name}: {err}.") from err
    progress(0.6, f"the parts of head {head}'s queries and keys")
    stream = stream_parts(model, acts, plan)
    rope = None if acts.cos is None or acts.sin is None else (acts.cos, acts.sin)
    query = read_side(model, stream, acts.resid_pre, head, "query", reading, rope)
    key = read_side(model, stream, acts.resid_pre, head, "key", reading, rope)
    kv = facts.groups.kv_head(head.index)
    q, k = acts.q[:, head.index], acts.k[:, kv]
    query_parts, key_parts = _every_position(query, acts.n_pos), _every_position(key, acts.n_pos)
    sample = torch.unique(torch.linspace(0, acts.n_pos - 1, min(acts.n_pos, SAMPLE)).long())
    kept = KeptHead(
        head=head,
        token_ids=tuple(int(t) for t in ids[0]),
        tokens=tuple(readable_tokens(model.tokenizer, [int(t) for t in ids[0]])),
        stream=stream,
        query=query,
        key=key,
        terms=score_terms(model, head),
        q=q,
        k=k,
        query_parts=query_parts,
        key_parts=key_parts,
        resid_pre=acts.resid_pre,
        stream_gap=_gap(stream.values(sample).sum(1), acts.resid_pre[sample]),
        query_gap=_gap(query_parts.sum(1), q),
        key_gap=_gap(key_parts.sum(1), k),
    )
    worst = max(kept.stream_gap, kept.query_gap, kept.key_gap)
    if not worst <= _tolerance(model):
        raise WhyUnavailable(
            f"Why here is not available for {facts.name}: the parts of head {head}'s "
            f"{'stream' if worst == kept.stream_gap else 'queries or keys'} miss the model's "
            f"own by {worst:.2g} of their size, so this model adds something the split does "
            "not follow."
        )
    progress(1.0, "done")
    return kept


def keep_prompt(
    model: ModelHandle, prompt: str, head: Head, progress: Progress = quiet
) -> KeptHead:
    """:func:`keep` on ``prompt`` tokenised as the explorer does (cut to the context)."""
    ids, _ = tokenize(model, prompt)
    return keep(model, ids, head, progress)


def keep_cost(model: ModelHandle, n_tokens: int, layer: int) -> PassPlan:
    """Cost of :func:`keep` for a head of ``layer`` on ``n_tokens``: one forward pass, then
    every part of both sides at every position (``2 n d_src d_head`` per part and side).

    Peak memory: the pass's activations, the kept ones (each earlier layer's ``z`` and MLP
    output), both sides' parts at every position (float32), and the float64 matrices each
    earlier layer's parts are read through (its ``W_O``, the norm's ``d_model x d_model``
    matrix and their products: :data:`MATRIX_COPIES` of each at once, a constant that
    dominates short prompts: on SmolLM2's last layer about 330 MiB of the 395 MiB measured at
    250 tokens).
    """
    f = model.facts
    device = device_of(model.spec.device)
    n_parts = 6 + layer * (f.n_heads + 4)  # embeddings and biases; per layer heads, MLP, biases
    kept = FLOAT * n_tokens * (layer * (f.n_heads * f.d_head + f.d_model) + 3 * f.d_model)
    sides = 2 * FLOAT * n_tokens * n_parts * f.d_head
    matrices = MATRIX_COPIES * 8 * layer * f.d_model * (f.n_heads * f.d_head + f.d_model)
    flops = f.forward_flops(n_tokens) + 2 * 2.0 * n_tokens * n_parts * f.d_model * f.d_head
    overhead = f.n_layers * LAYER_OVERHEAD_S[device]
    peak = kept + sides + matrices + f.activation_bytes(n_tokens)
    return PassPlan(1.0, 0.0, Cost(flops, int(peak), overhead, device))
