"""Attention rollout (Abnar & Zuidema 2020): how much each position draws on each input token.

The variant (:data:`ROLLOUT_RULE`): each layer's attention is the mean over its heads, ``A_l``;
the residual stream is modelled as half of the flow, ``Ã_l = 0.5 A_l + 0.5 I``, rows renormalised
to sum to 1; the rollout is ``R = Ã_L ⋯ Ã_1``. Row ``i`` of ``R`` (``query_pos key_pos`` like a
pattern) spreads position ``i``'s last-layer input over the input tokens.

It needs every layer's full pattern. A run whose patterns are held whole (the dense store) has
them; a long prompt held as q, k and LSE would have to rebuild all of them, which is refused with
:class:`RolloutTooLong` past a memory budget (``n² x layers x 4`` bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from jaxtyping import Float

from models.capture.store import DensePatterns
from models.capture.words import Words, merge_strip
from models.cost import ASSUMED_FLOPS, Cost
from models.errors import UserError
from models.model.facts import DENSE_LIMIT_BYTES, ModelFacts
from models.progress import Progress, quiet

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

RESIDUAL = 0.5
MATMUL_FLOPS_PER_S = 2.0e10  # 2 CPU cores, float64

ROLLOUT_RULE = (
    "Attention rollout (Abnar & Zuidema 2020), this variant: each layer's attention is the mean "
    "over its heads, mixed half and half with the identity for the residual stream "
    "(Ã = 0.5·A + 0.5·I, rows renormalised to sum to 1), multiplied through the layers from the "
    "first to the last (R = Ã_L ⋯ Ã_1). From a token: how much its last layer draws on each input "
    "token; to a token: how much each position draws on it. A linear-attention layer has no "
    "attention weights (its mixing matrix is signed, its rows do not sum to 1): it counts as "
    "the identity, the residual stream alone."
)


class RolloutTooLong(UserError):
    """Rollout would need every full pattern of a long prompt."""

    level = "warning"


def rollout_bytes(facts: ModelFacts, n_tokens: int) -> int:
    """Memory of every layer's full (head-averaged) pattern: ``n² x layers x 4`` bytes."""
    return n_tokens * n_tokens * facts.n_layers * 4


def longest_rollout(facts: ModelFacts, budget: int = DENSE_LIMIT_BYTES) -> int:
    """The most tokens a q/k/LSE-held run may have for rollout within ``budget``."""
    return int((budget / (facts.n_layers * 4)) ** 0.5)


def check_rollout(run: AttentionRun, budget: int = DENSE_LIMIT_BYTES) -> None:
    """Raise :class:`RolloutTooLong` unless the run holds its patterns or they fit ``budget``."""
    if isinstance(run.store, DensePatterns):
        return
    need = rollout_bytes(run.facts, run.n_tokens)
    if need > budget:
        raise RolloutTooLong(
            f"Attention rollout needs every layer's full pattern: {run.n_tokens:,} tokens x "
            f"{run.facts.n_layers} layers would take {need / 1024**2:,.0f} MB, over the "
            f"{budget / 1024**2:,.0f} MB allowed. It is available up to "
            f"{longest_rollout(run.facts, budget):,} tokens on this model: use a shorter prompt."
        )


def mixing(run: AttentionRun, layer: int) -> Float[np.ndarray, "query_pos key_pos"]:
    """``Ã_l``: the head mean of one layer mixed with the identity, rows renormalised."""
    # the head mean accumulates in float64 without a float64 copy of every head
    mixed: np.ndarray = run.layer_patterns(layer).mean(axis=0, dtype=np.float64)
    mixed *= 1.0 - RESIDUAL
    mixed.flat[:: run.n_tokens + 1] += RESIDUAL
    mixed /= mixed.sum(axis=-1, keepdims=True)
    return mixed


def attention_rollout(
    run: AttentionRun, budget: int = DENSE_LIMIT_BYTES, progress: Progress = quiet
) -> Float[np.ndarray, "query_pos key_pos"]:
    """The whole rollout ``R = Ã_L ⋯ Ã_1`` (cost: :func:`rollout_cost` with ``full``).

    Raises:
        RolloutTooLong: see :func:`check_rollout`.
    """
    check_rollout(run, budget)
    n_layers = run.facts.n_layers
    out = np.eye(run.n_tokens)
    for layer in range(n_layers):
        out = mixing(run, layer) @ out
        progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return out


def rollout_weights(
    run: AttentionRun,
    span: int | slice,
    direction: Literal["from", "to"],
    words: Words | None = None,
    budget: int = DENSE_LIMIT_BYTES,
    progress: Progress = quiet,
) -> Float[np.ndarray, " pos"]:
    """The rollout from a token (its row) or to it (its column), for the token strip.

    A span (of tokens, or of words when ``words`` is given) follows :data:`spans.SPAN_RULE`:
    from a span is the mean of its rows (each word the mean of its pieces first), to a span the
    sum of its columns; with ``words`` the result has one weight per word (to a word: summed over
    its pieces; from a word: averaged). A vector times each layer's matrix: ``n²`` per layer,
    never ``n³``. NaN marks positions a causal model cannot reach (keys after the span; queries
    before it).

    Raises:
        RolloutTooLong: see :func:`check_rollout`.
    """
    check_rollout(run, budget)
    n, n_layers = run.n_tokens, run.facts.n_layers
    units = slice(span, span + 1) if isinstance(span, int) else span
    tokens = units if words is None else words.tokens_of(units)
    start, stop, _ = tokens.indices(n)
    vector = np.zeros(n)
    if direction == "to":
        vector[start:stop] = 1.0
    elif words is None:
        vector[start:stop] = 1.0 / (stop - start)
    else:  # each word's pieces share its weight; the words share 1
        counts = words.counts[units]
        vector[start:stop] = np.repeat(1.0 / (counts * len(counts)), counts)
    order = range(n_layers - 1, -1, -1) if direction == "from" else range(n_layers)
    for step, layer in enumerate(order):
        # one layer's matrix held at a time: the last one is let go before the next is built
        vector = vector @ mixing(run, layer) if direction == "from" else mixing(run, layer) @ vector
        progress((step + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    if run.facts.causal and direction == "from":
        vector[stop:] = np.nan
    elif run.facts.causal:
        vector[:start] = np.nan
    if words is None:
        return vector
    return merge_strip(vector, words, "keys" if direction == "from" else "queries")


def rollout_cost(
    facts: ModelFacts, n_tokens: int, full: bool = False, factored: bool = False
) -> Cost:
    """Cost of :func:`rollout_weights` (``full=False``) or :func:`attention_rollout`."""
    per_layer = 2.0 * n_tokens ** (3 if full else 2)
    rebuild = facts.n_heads * n_tokens**2 * (2 * facts.d_head + 8) if factored else 0.0
    flops = facts.n_layers * (per_layer + rebuild)
    # a rebuilt layer's float32 scores and three quarters again for the heap's slack (measured
    # 1.45-1.95x on SmolLM2 at 1,000 tokens); below, the float64 head mean and its row sums
    layer_bytes = 7 * facts.n_heads * n_tokens**2 if factored else 0
    return Cost(
        flops=float(flops),
        # float64 products run at MATMUL_FLOPS_PER_S, below the assumed float32 rate
        overhead_s=max(0.0, flops / MATMUL_FLOPS_PER_S - flops / ASSUMED_FLOPS["cpu"]),
        peak_bytes=int(layer_bytes + 3 * n_tokens**2 * 8),
    )
