"""What each head does on one captured prompt: induction, previous-token and first-token sink
scores read off the run itself, without another forward pass.

Previous token and sink follow :mod:`models.heads.finding.scores` (``A[i, i - 1]`` over
``i >= 1``; ``A[t, 0]`` over ``t >= 1``). Induction is read where copying is right: the weight
query ``i`` puts on the token after the previous copy of its token, over the queries whose
previous copy was followed by the same token that follows ``i`` (a repeated bigram; in a passage
given twice, most of the second copy). Over every repeated token instead, the common words of
the first copy, whose last occurrence predicts nothing, drown the stripe: SmolLM2's head 18.7
scores 0.15 that way on the 2,001-token example and 0.52 this way.

The scores read only the entries they average (``entries`` of the run's store), so a 2,048-token
prompt on SmolLM2 costs ``3 * 270 * 2,048`` rebuilt weights, not 270 whole patterns; the
previous-token band and the sink column are read as blocks of q and k, not row by row. One prompt
is one text: the head finder's corpus scores, with their standard errors, are the measured
verdict; these marks say where to look in this prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from jaxtyping import Float

from models.cost import Cost
from models.head import Head
from models.heads.finding.scores import flag, induction_targets

if TYPE_CHECKING:
    from models.capture.run import AttentionRun
    from models.capture.store import Pairs
    from models.heads.table import Thresholds

MARKS = {"induction": "I", "previous_token": "P", "sink": "S"}
"""The letter each score's mark shows on a head's picture."""
SINK_MARK = 0.8
"""A head is marked a sink when at least this share of its attention parks on the first token.
The head finder counts a head as sinking above 0.3, and on a real model most do (120 of
SmolLM2's 270 heads on the 2,001-token example); the grid marks the heads that do little else
(2 there)."""


@dataclass(frozen=True)
class PromptScores:
    """``layer head_index`` scores of one prompt (NaN where the prompt has no query to count).

    Attributes:
        induction: mean weight on the token after the previous copy, over the queries of
            :func:`copy_targets`.
        previous_token: mean ``A[i, i - 1]`` over ``i >= 1``.
        sink: mean ``A[t, 0]`` over ``t >= 1`` (every query but the first).
        n_repeats: queries the induction score averages over (0: nothing repeats).
    """

    induction: Float[np.ndarray, "layer head_index"]
    previous_token: Float[np.ndarray, "layer head_index"]
    sink: Float[np.ndarray, "layer head_index"]
    n_repeats: int


def copy_targets(token_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(queries, keys)``: every query whose token appeared before and whose previous copy was
    followed by the token that follows the query, and the position after that copy."""
    ids = np.asarray(token_ids)
    targets = induction_targets(token_ids)
    queries = np.flatnonzero(targets[:-1] >= 0)
    queries = queries[ids[targets[queries]] == ids[queries + 1]]
    return queries, targets[queries]


def prompt_scores(run: AttentionRun) -> PromptScores:
    """Induction, previous-token and sink scores of every head on ``run``'s prompt."""
    n, facts = run.n_tokens, run.facts
    repeated, targets = copy_targets(run.token_ids)
    after = slice(1, n)  # every query but the first
    reads: dict[str, tuple[Pairs, Pairs | int]] = {
        "induction": (repeated, targets),
        "previous_token": (after, slice(0, n - 1)),  # a band: q and k read as two blocks
        "sink": (after, 0),  # a column: one key for every row
    }
    shape = (facts.n_layers, facts.n_heads)
    found = {name: np.full(shape, np.nan) for name in reads}
    for layer in range(facts.n_layers):
        for name, (rows, cols) in reads.items():
            weights = run.store.entries(layer, rows, cols).astype(np.float64)
            if weights.shape[-1]:  # no pairs (nothing repeats; a one-token prompt): NaN
                found[name][layer] = weights.mean(axis=-1)
    return PromptScores(found["induction"], found["previous_token"], found["sink"], len(repeated))


def scores_cost(run: AttentionRun) -> Cost:
    """What :func:`prompt_scores` takes. Its largest read is a layer's previous-token band
    (every query but the first, every head at once). Rebuilt from a factored store, a row of it
    holds its positions (three int64), its q copy and q times k (``d_head`` float32 each per
    head), the key head's k copy, six float32 and two bool steps per head (LSE, logits, scaled,
    shifted, exponentiated, masked) and the float64 copy that is averaged; a dense store's
    weights are gathered straight from the held patterns. Half again is for what the kernels
    and the allocator hold besides (measured on SmolLM2: 1.1 times the count at 1,000 and
    4,000 tokens)."""
    facts, n = run.facts, run.n_tokens
    if run.factored:
        per_row = 3 * 8 + facts.n_heads * (8 * facts.d_head + 6 * 4 + 2 + 8)
        per_row += facts.n_kv_heads * 4 * facts.d_head
        per_weight = 2 * facts.d_head + 8
    else:
        per_row, per_weight = 3 * 8 + facts.n_heads * (4 + 8), 1
    reads = 3 * facts.n_layers * facts.n_heads * n
    return Cost(flops=float(reads * per_weight), peak_bytes=3 * n * per_row // 2)


def head_marks(
    scores: PromptScores, thresholds: Thresholds, sink_mark: float = SINK_MARK
) -> dict[Head, str]:
    """Each marked head -> the letters of its scores above their limits (``"IP"``): the head
    finder's thresholds for induction and previous token, ``sink_mark`` for the sink.
    Unmarked heads are left out."""
    limits = {
        "induction": thresholds.induction,
        "previous_token": thresholds.previous_token,
        "sink": sink_mark,
    }
    marks: dict[Head, str] = {}
    for name, letter in MARKS.items():
        hits = np.nonzero(flag(getattr(scores, name), limits[name]))
        for layer, index in zip(*hits, strict=True):
            head = Head(int(layer), int(index))
            marks[head] = marks.get(head, "") + letter
    return marks
