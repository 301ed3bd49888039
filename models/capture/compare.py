"""How far each head's pattern moved between two prompts: Jensen–Shannon divergence per head.

:data:`DIVERGENCE_RULE` is the rule the page shows. In short: the prompts are aligned (equal
lengths position by position, else like a diff on every block of tokens they have in common, see
:mod:`models.capture.alignment`); for every aligned query, A's and B's attention rows are put on
the aligned key axis (aligned keys kept, all unaligned keys added into one bin, so both rows
still sum to 1) and compared with the Jensen–Shannon divergence in bits (0: the same row, 1: no
key in common); a head's divergence is the mean over the aligned queries.

Long prompts are compared a band of query rows at a time (one layer's heads, at most
:data:`CHUNK_CELLS` weights per prompt in memory), reading rows from the run's store: a q/k/LSE
store rebuilds them, never a whole ``n x n`` pattern for all heads at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float

from models.capture.alignment import Alignment, align
from models.capture.bands import layer_band
from models.capture.words import Words, local_starts, merge_keys, merge_queries
from models.cost import ASSUMED_FLOPS, Cost
from models.head import Head
from models.progress import Progress, quiet

if TYPE_CHECKING:
    from models.capture.run import AttentionRun
    from models.model.facts import ModelFacts

CHUNK_CELLS = 1 << 21
# Measured by benchmarks/compare_prompts.py (SmolLM2, 2,041 x 2,043 tokens, q/k/LSE store):
# 98 CPU seconds, 134 MB above the runs; about 30 % binning and divergence, 70 % rebuilding.
CELL_BYTES = 32  # per weight of one prompt's band, with its copies and the other prompt's band
CELLS_PER_CPU_S = 3.7e7  # binning + divergence, per CPU second
REBUILD_FLOPS_PER_CPU_S = 2.3e9  # rebuilding rows from q, k and LSE, per CPU second
CORES = 1.5  # what 2 CPU cores give this mix of threaded torch and single-threaded NumPy
LN2 = math.log(2.0)

DIVERGENCE_RULE = (
    "Divergence of a head = mean over aligned query positions of the Jensen–Shannon divergence "
    "(base 2, 0 = the same row, 1 = no key in common) between A's and B's attention rows. Prompts "
    "of equal length align position by position; otherwise like a diff, on every block of tokens "
    "the two have in common. Rows are compared on the aligned keys: an aligned key keeps its "
    "weight, and the weights on all unaligned keys are added into one 'unaligned' bin, so both "
    "rows still sum to 1. Unaligned queries are not compared. In a causal model the rows before "
    "the first difference see the same tokens in A and B, so they add (almost) nothing."
)


def jensen_shannon(
    p: Float[np.ndarray, "*batch key"], q: Float[np.ndarray, "*batch key"]
) -> Float[np.ndarray, "*batch"]:
    """Jensen–Shannon divergence in bits of rows ``p`` and ``q`` (each summing to 1)."""
    out = jsd_rows(
        torch.as_tensor(np.asarray(p, dtype=np.float64)),
        torch.as_tensor(np.asarray(q, dtype=np.float64)),
    )
    return out.numpy()


def jsd_rows(
    p: Float[torch.Tensor, "*batch key"], q: Float[torch.Tensor, "*batch key"]
) -> Float[torch.Tensor, "*batch"]:
    """``½ KL(p‖m) + ½ KL(q‖m)``, ``m = (p + q) / 2``, as ``Σ ½ p log p + ½ q log q − m log m``
    (exactly 0 where ``p == q``), in bits, clipped to [0, 1] against rounding.

    Terms are computed in the rows' dtype (float32 for whole heads: each term's rounding error is
    ~1e-7 of a weight, far below the 4 digits shown) and summed in float64."""
    m = (p + q).mul_(0.5)
    terms = torch.special.xlogy(p, p).add_(torch.special.xlogy(q, q)).mul_(0.5)
    terms.sub_(torch.special.xlogy(m, m))
    return (terms.sum(dim=-1, dtype=torch.float64) / LN2).clamp(0.0, 1.0)


@dataclass(frozen=True)
class Comparison:
    """What two runs were compared on and every head's divergence.

    Attributes:
        alignment: how the positions (tokens, or words when ``words``) lined up.
        divergence: ``layer head_index`` mean JSD in bits.
        words: whether rows were merged into words first.
    """

    alignment: Alignment
    divergence: np.ndarray
    words: bool = False

    def ranking(self) -> pd.DataFrame:
        """Heads from the largest divergence to the smallest: ``head, layer, index,
        divergence`` (ties keep layer-then-head order)."""
        return ranking_table(self.divergence)


def ranking_table(divergence: Float[np.ndarray, "layer head_index"]) -> pd.DataFrame:
    """Heads sorted by divergence, largest first: columns ``head`` (``L.H``), ``layer``,
    ``index``, ``divergence``."""
    n_heads = divergence.shape[1]
    flat = np.asarray(divergence, dtype=np.float64).ravel()
    order = np.argsort(-flat, kind="stable")
    heads = [Head(int(i) // n_heads, int(i) % n_heads) for i in order]
    return pd.DataFrame(
        {
            "head": [str(h) for h in heads],
            "layer": [h.layer for h in heads],
            "index": [h.index for h in heads],
            "divergence": flat[order],
        }
    )


def divergence_csv(divergence: Float[np.ndarray, "layer head_index"]) -> str:
    """``layer,head,divergence`` for every head in layer-then-head order (numbers only)."""
    n_layers, n_heads = divergence.shape
    lines = ["layer,head,divergence"]
    lines += [
        f"{h.layer},{h.index},{float(divergence[h]):.6g}"
        for h in (Head(li, hi) for li in range(n_layers) for hi in range(n_heads))
    ]
    return "\n".join(lines) + "\n"


def unit_keys(run: AttentionRun, words: Words | None) -> list:
    """What alignment compares: token ids, or each word's tuple of token ids."""
    return list(run.token_ids) if words is None else words.keys(run.token_ids)


def align_runs(
    run_a: AttentionRun,
    run_b: AttentionRun,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> Alignment:
    """Align two runs on their tokens, or on their words when both ``Words`` are given."""
    if (words_a is None) != (words_b is None):
        raise ValueError("give the words of both prompts, or of neither")
    return align(unit_keys(run_a, words_a), unit_keys(run_b, words_b))


def unit_rows(
    run: AttentionRun,
    layer: int,
    head: int | None,
    units: slice,
    words: Words | None,
    key_stop: int | None = None,
) -> Float[np.ndarray, "*head query key"]:
    """Rows of ``units`` (tokens, or words when given) over the first ``key_stop`` key units
    (all by default), one head or all heads of the layer."""
    rows = units if words is None else words.tokens_of(units)
    keys = slice(0, key_stop) if words is None else words.tokens_of(slice(0, key_stop))
    window = (
        layer_band(run, layer, rows, keys) if head is None else run.window(layer, head, rows, keys)
    )
    if words is None:
        return np.array(window, dtype=np.float32, copy=head is not None)
    by_key = merge_keys(window, local_starts(words, slice(0, key_stop)), np.float32)
    return merge_queries(by_key, local_starts(words, units), np.float32)


def _chunks(
    alignment: Alignment, words: Words | None, run: AttentionRun, n_heads: int
) -> Iterator[tuple[int, int, int]]:
    """``(a_start, b_start, length)`` bands of aligned query units."""
    width = run.n_tokens * n_heads
    per_chunk = max(1, CHUNK_CELLS // width)
    if words is not None:  # about as many token rows as a token chunk
        per_chunk = max(1, int(per_chunk * words.n_words / max(1, words.n_tokens)))
    for (_, a0, length), (_, b0, _) in zip(
        alignment.blocks("a"), alignment.blocks("b"), strict=True
    ):
        for off in range(0, length, per_chunk):
            yield a0 + off, b0 + off, min(per_chunk, length - off)


def band_divergence(
    run_a: AttentionRun,
    run_b: AttentionRun,
    alignment: Alignment,
    layer: int,
    band: tuple[int, int, int],
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> Float[np.ndarray, "head_index band"]:
    """JSD of every head of a layer at a band ``(a_start, b_start, length)`` of aligned queries.

    A causal band reads only the keys up to its last query (later weights are 0 on both sides).
    """
    a0, b0, length = band
    causal = run_a.facts.causal
    rows = []
    for run, start, words, side in ((run_a, a0, words_a, "a"), (run_b, b0, words_b, "b")):
        stop = start + length if causal else None
        weights = unit_rows(run, layer, None, slice(start, start + length), words, stop)
        rows.append(torch.from_numpy(alignment.bin_keys(weights, side)))  # type: ignore[arg-type]
    return jsd_rows(rows[0], rows[1]).numpy()


def head_divergence(
    run_a: AttentionRun,
    run_b: AttentionRun,
    words_a: Words | None = None,
    words_b: Words | None = None,
    progress: Progress = quiet,
) -> Comparison:
    """Every head's divergence between two runs of the same model (see :data:`DIVERGENCE_RULE`).

    Args:
        run_a: prompt A's run.
        run_b: prompt B's run (same model).
        words_a, words_b: compare in word space (both or neither).
        progress: called once per layer; may raise Cancelled.

    Returns:
        A :class:`Comparison`; cost: :func:`compare_cost`.

    Raises:
        NothingAligned: lengths differ and the prompts have no token (word) in common.
    """
    alignment = align_runs(run_a, run_b, words_a, words_b)
    n_layers, n_heads = run_a.facts.n_layers, run_a.facts.n_heads
    totals = np.zeros((n_layers, n_heads))
    for layer in range(n_layers):
        for band in _chunks(alignment, words_a, run_a, n_heads):
            totals[layer] += band_divergence(
                run_a, run_b, alignment, layer, band, words_a, words_b
            ).sum(axis=-1)
        progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return Comparison(alignment, totals / max(1, alignment.n_aligned), words_a is not None)


def compare_cost(facts: ModelFacts, n_a: int, n_b: int, factored: bool) -> Cost:
    """Cost of :func:`head_divergence` for prompts of ``n_a`` and ``n_b`` tokens.

    Every aligned row of every head is read once per prompt, only up to its band's last key in
    a causal model (rebuilt from q and k when ``factored``: ``2 d_head + 8`` operations per
    weight), then binned and compared (about 12 operations per weight). Seconds are for 2 idle
    CPU cores, from measured rates (a busy server takes longer); the peak is one band of rows
    per prompt with its copies (SmolLM2 at 2,048 tokens: about a minute and 134 MB).
    """
    heads = facts.n_layers * facts.n_heads
    longest = max(n_a, n_b, 1)
    cells = heads * min(n_a, n_b) * (n_a + n_b) * (0.5 if facts.causal else 1.0)
    rebuild = cells * (2 * facts.d_head + 8) if factored else 0.0
    seconds = (cells / CELLS_PER_CPU_S + rebuild / REBUILD_FLOPS_PER_CPU_S) / CORES
    rows = min(longest, max(1, CHUNK_CELLS // (facts.n_heads * longest)))
    band = facts.n_heads * rows * longest
    flops = float(rebuild + 12 * cells)
    return Cost(
        flops=flops,
        peak_bytes=int(2 * band * CELL_BYTES),
        overhead_s=max(0.0, seconds - flops / ASSUMED_FLOPS["cpu"]),  # NumPy, not matmuls
    )
