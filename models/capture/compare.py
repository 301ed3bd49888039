"""How far each head's pattern moved between two prompts: Jensen–Shannon divergence per head.

:data:`DIVERGENCE_RULE` is the rule the page shows. In short: the prompts are aligned (equal
lengths position by position, else like a diff on every block of tokens they have in common, see
:mod:`models.capture.alignment`); for every aligned query, A's and B's attention rows are put on
the aligned key axis (aligned keys kept, all unaligned keys added into one bin, so both rows
still sum to 1) and compared with the Jensen–Shannon divergence in bits (0: the same row, 1: no
key in common); a head's divergence is the mean over the aligned queries.

Runs that keep q, k and LSE (long prompts, low-precision models) are compared at matrix-product
speed by :mod:`models.capture.compare_fused`; runs that hold whole patterns a band of query rows
at a time (one layer's heads, at most :data:`CHUNK_CELLS` weights per prompt in memory). Rows
that are the same in A and B by construction (:func:`identical_rows`) count 0 without being read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float

from models.capture.alignment import Alignment, Side, align, equal_pairs
from models.capture.bands import layer_band
from models.capture.compare_fused import fusable, fused_divergence, unit_starts
from models.capture.words import Words, local_starts, merge_keys, merge_queries
from models.head import Head
from models.progress import Progress, quiet

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

CHUNK_CELLS = 1 << 21
LN2 = math.log(2.0)

DIVERGENCE_RULE = (
    "Divergence of a head = mean over aligned query positions of the Jensen–Shannon divergence "
    "(base 2, 0 = the same row, 1 = no key in common) between A's and B's attention rows. Prompts "
    "of equal length align position by position; otherwise like a diff, on every block of tokens "
    "the two have in common. Rows are compared on the aligned keys: an aligned key keeps its "
    "weight, and the weights on all unaligned keys are added into one 'unaligned' bin, so both "
    "rows still sum to 1. Unaligned queries are not compared. In a causal model the rows before "
    "the first difference see the same tokens in A and B: they are the same rows and count 0."
)
LINEAR_RULE = (
    "A linear-attention layer has no attention rows (its mixing matrix is signed): its heads "
    "are not compared."
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
    bits: torch.Tensor = terms.sum(dim=-1, dtype=torch.float64) / LN2
    return bits.clamp(0.0, 1.0)


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
    ``index``, ``divergence``; heads not compared (NaN: linear-attention layers) left out."""
    n_heads = divergence.shape[1]
    flat = np.asarray(divergence, dtype=np.float64).ravel()
    order = np.argsort(-flat, kind="stable")
    order = order[np.isfinite(flat[order])]
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


def unit_keys(run: AttentionRun, words: Words | None) -> list[Any]:
    """What alignment compares: token ids, or each word's tuple of token ids."""
    return list(run.token_ids) if words is None else words.keys(run.token_ids)


def align_runs(
    run_a: AttentionRun,
    run_b: AttentionRun,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> Alignment:
    """Align two runs on their tokens, or on their words when both ``Words`` are given.

    Raises:
        NothingAligned, AlignmentTooCostly: see :func:`models.capture.alignment.align`.
    """
    if (words_a is None) != (words_b is None):
        raise ValueError("give the words of both prompts, or of neither")
    unit = "tokens" if words_a is None else "words"
    return align(unit_keys(run_a, words_a), unit_keys(run_b, words_b), unit)


def alignment_pairs(
    run_a: AttentionRun,
    run_b: AttentionRun,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> int:
    """What lining the runs up will weigh (:func:`models.capture.alignment.equal_pairs`),
    counted in linear time."""
    return equal_pairs(unit_keys(run_a, words_a), unit_keys(run_b, words_b))


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
    alignment: Alignment, words: Words | None, run: AttentionRun, n_heads: int, skip: int = 0
) -> Iterator[tuple[int, int, int]]:
    """``(a_start, b_start, length)`` bands of aligned query units from aligned index ``skip``."""
    width = run.n_tokens * n_heads
    per_chunk = max(1, CHUNK_CELLS // width)
    if words is not None:  # about as many token rows as a token chunk
        per_chunk = max(1, int(per_chunk * words.n_words / max(1, words.n_tokens)))
    for (at, a0, length), (_, b0, _) in zip(
        alignment.blocks("a"), alignment.blocks("b"), strict=True
    ):
        for off in range(max(0, skip - at), length, per_chunk):
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
    sides: tuple[tuple[AttentionRun, int, Words | None, Side], ...] = (
        (run_a, a0, words_a, "a"),
        (run_b, b0, words_b, "b"),
    )
    for run, start, words, side in sides:
        stop = start + length if causal else None
        weights = unit_rows(run, layer, None, slice(start, start + length), words, stop)
        rows.append(torch.from_numpy(alignment.bin_keys(weights, side)))
    return jsd_rows(rows[0], rows[1]).numpy()


def identical_rows(
    run_a: AttentionRun,
    run_b: AttentionRun,
    alignment: Alignment,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> int:
    """How many aligned queries, from the first, have the same rows in A and B by construction.

    In a causal model a row depends only on the tokens up to its query: rows of the common start
    (same tokens at the same positions, and in word space the same words) are the same row, of
    divergence exactly 0. In a bidirectional model every row depends on every token: all rows
    are the same when the prompts are, none otherwise.
    """
    ids_a, ids_b = run_a.token_ids, run_b.token_ids
    same_words = words_a is None or words_b is None or words_a.starts == words_b.starts
    if not run_a.facts.causal:
        return alignment.n_aligned if ids_a == ids_b and same_words else 0
    if not alignment.matches or alignment.matches[0][:2] != (0, 0):
        return 0
    common = 0
    while common < min(len(ids_a), len(ids_b)) and ids_a[common] == ids_b[common]:
        common += 1
    first = alignment.matches[0][2]
    if words_a is None or words_b is None:
        return min(common, first)
    starts_a, starts_b = words_a.starts, words_b.starts
    unit = 0
    while unit < first and starts_a[unit + 1] == starts_b[unit + 1] <= common:
        unit += 1
    return unit


def head_divergence(
    run_a: AttentionRun,
    run_b: AttentionRun,
    words_a: Words | None = None,
    words_b: Words | None = None,
    progress: Progress = quiet,
) -> Comparison:
    """Every head's divergence between two runs of the same model (see :data:`DIVERGENCE_RULE`
    and, for a model with linear-attention layers, :data:`LINEAR_RULE`).

    The prompts are aligned here (the alignment is part of the result). Runs that keep q, k and
    LSE are compared by :func:`models.capture.compare_fused.fused_divergence`, at matrix-product
    speed; runs that hold their whole patterns, band by band from the stored rows.

    Args:
        run_a: prompt A's run.
        run_b: prompt B's run (same model).
        words_a, words_b: compare in word space (both or neither).
        progress: called once per layer; may raise Cancelled.

    Returns:
        A :class:`Comparison`; cost: :func:`models.capture.compare_cost.compare_cost`.

    Raises:
        NothingAligned: lengths differ and the prompts have no token (word) in common.
        AlignmentTooCostly: lining the prompts up would take too long.
    """
    alignment = align_runs(run_a, run_b, words_a, words_b)
    skip = identical_rows(run_a, run_b, alignment, words_a, words_b)
    stores = fusable(run_a.store, run_b.store)
    if stores is not None:
        starts = (unit_starts(run_a.n_tokens, words_a), unit_starts(run_b.n_tokens, words_b))
        words = words_a is not None
        totals = fused_divergence(stores, alignment, starts, words, skip, progress)
    else:
        n_layers, n_heads = run_a.facts.n_layers, run_a.facts.n_heads
        totals = np.zeros((n_layers, n_heads))
        for layer in range(n_layers):
            for band in _chunks(alignment, words_a, run_a, n_heads, skip):
                totals[layer] += band_divergence(
                    run_a, run_b, alignment, layer, band, words_a, words_b
                ).sum(axis=-1)
            progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    divergence = totals / max(1, alignment.n_aligned)
    for layer in range(run_a.facts.n_layers):
        if run_a.signed(layer):  # no softmax rows to compare: NaN, never a 0 that reads "same"
            divergence[layer] = np.nan
    return Comparison(alignment, divergence, words_a is not None)
