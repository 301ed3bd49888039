"""How far a run in bfloat16 (or float16) lies from float32, measured on the prompt itself.

The first ``n_rows`` tokens of the prompt go through the same model once more, in float32
arithmetic on the same weights (:func:`models.model.plain.run_plain_float32`: each module
upcasts its own weights while it runs). In a causal model a query's pattern depends only on the
tokens up to it, so the float32 patterns of those rows over the prefix are the float32 patterns
of the same rows over the whole prompt, and every head's rows ``< n_rows`` can be compared cell
by cell with what the run shows. What this measures: the arithmetic of the low-precision pass
(activations, q and k rounded through every layer). What it does not: the rounding of the
weights themselves when the checkpoint was stored in float32 and loaded in bfloat16.

Cost: one float32 forward pass over ``n_rows`` tokens (:func:`difference_flops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from models.capture.run import AttentionRun
from models.cost import Cost
from models.model.handle import ModelHandle
from models.model.plain import LayerAttention, run_plain_float32
from models.progress import Progress, quiet

ROWS = 128
FLOAT32_SLACK = 1e-5  # the float32 reference's own rounding (rows computed over a prefix)


@dataclass(frozen=True)
class PatternDifference:
    """The largest difference between a run's patterns and float32, on the rows measured.

    Attributes:
        dtype: the dtype the run's model ran in.
        largest: ``max |run pattern - float32 pattern|`` over every layer, head, query row
            ``< n_rows`` and key (attention weights, 0 to 1).
        bound: ``largest`` plus the float32 reference's own rounding: an upper bound of the
            difference on those rows.
        where: ``(layer, head, query, key)`` of the largest difference.
        n_rows: how many leading query rows were compared (every key they see).
        reference: what the run was compared with, in words for the page.
    """

    dtype: str
    largest: float
    bound: float
    where: tuple[int, int, int, int]
    n_rows: int
    reference: str = "float32 arithmetic on the same weights"


def difference_rows(run: AttentionRun, n_rows: int = ROWS) -> int:
    """How many leading rows :func:`pattern_difference` compares (0: cannot be measured:
    a bidirectional model's rows depend on the whole prompt, and only short ones are redone)."""
    if run.facts.causal:
        return min(n_rows, run.n_tokens)
    return run.n_tokens if run.n_tokens <= 4 * n_rows else 0


def difference_flops(run: AttentionRun, n_rows: int = ROWS) -> float:
    """Floating-point operations of :func:`pattern_difference` (one float32 pass)."""
    return run.facts.forward_flops(max(1, difference_rows(run, n_rows)))


def difference_cost(run: AttentionRun, n_rows: int = ROWS) -> Cost:
    """The cost of :func:`pattern_difference` on ``run``.

    Memory: the float32 pass over the first rows (:meth:`ModelFacts.activation_bytes`), the
    module it runs upcast to float32 (bounded by a whole layer's share of the parameters, 4
    bytes each), and one layer's comparison: the float32 reference and the run's rows, both in
    float64, and their difference (``head_index rows rows`` each, 32 bytes a cell in all).
    """
    facts = run.facts
    rows = max(1, difference_rows(run, n_rows))
    upcast = 4 * facts.n_params // max(1, facts.n_layers)
    compared = 32 * facts.n_heads * rows * rows
    return Cost(
        flops=difference_flops(run, n_rows),
        peak_bytes=facts.activation_bytes(rows) + upcast + compared,
    )


def pattern_difference(
    model: ModelHandle, run: AttentionRun, n_rows: int = ROWS, progress: Progress = quiet
) -> PatternDifference | None:
    """Measure the run's largest pattern difference from float32 on its first rows.

    Args:
        model: the model the run was captured on.
        run: the captured run (any path, any dtype).
        n_rows: leading query rows to compare (at most the prompt's length).
        progress: called after each layer; may raise Cancelled.

    Returns:
        The measured difference, or None when it cannot be measured cheaply (a bidirectional
        model on a prompt longer than ``4 * n_rows`` tokens).
    """
    rows = difference_rows(run, n_rows)
    if rows == 0:
        return None
    n_layers = run.facts.n_layers
    best: list[Any] = [0.0, (0, 0, 0, 0)]
    window = slice(0, rows)

    def compare(att: LayerAttention) -> None:
        q, k = att.query[0].to(torch.float32).cpu(), att.key[0].to(torch.float32).cpu()
        reference = _patterns(q, k, att.scale, att.causal)
        shown = torch.from_numpy(run.store.layer_window(att.layer, window, window).copy())
        gap = (shown.to(torch.float64) - reference.to(torch.float64)).abs()
        top = float(gap.max())
        if top >= best[0]:
            flat = int(gap.argmax())
            head, rest = divmod(flat, rows * rows)
            best[0], best[1] = top, (att.layer, head, *divmod(rest, rows))
        progress((att.layer + 1) / n_layers, f"float32 check: layer {att.layer + 1} of {n_layers}")

    ids = torch.tensor([run.token_ids[:rows]])
    run_plain_float32(model, ids, compare)
    return PatternDifference(
        dtype=run.dtype, largest=best[0], bound=best[0] + FLOAT32_SLACK, where=best[1], n_rows=rows
    )


def _patterns(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """``head_index query_pos key_pos`` float32 softmax of one layer's (short) prefix."""
    keys = k.repeat_interleave(q.shape[0] // k.shape[0], dim=0)
    scores = (q @ keys.transpose(-1, -2)) * scale
    if causal:
        n = q.shape[1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1)
