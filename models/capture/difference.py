"""One head of a two-prompt comparison: A, B and A − B on aligned positions, and where it moved.

Rows are aligned queries (see :mod:`models.capture.alignment`), columns the aligned key axis:
the aligned keys, with the unaligned bin at index ``alignment.bin_index`` when the lengths differ.
Only the rows asked for are read from each run's store, so a detail window of a long prompt
costs what the window costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from jaxtyping import Float

from models.capture.alignment import Alignment, Side
from models.capture.compare import jsd_rows, unit_rows
from models.capture.words import Words

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

AlignedWindow = Float[np.ndarray, "aligned aligned_key"]


@dataclass(frozen=True)
class DifferenceOverview:
    """The picture (a PNG data URI) and the strongest |A − B| cell, in prompt-A tokens."""

    src: str
    query: int
    key: int
    top: float


def aligned_rows(
    run: AttentionRun,
    alignment: Alignment,
    side: Side,
    layer: int,
    head: int,
    rows: slice,
    words: Words | None = None,
) -> Float[np.ndarray, "aligned aligned_key"]:
    """One head's rows ``rows`` (aligned query indices) on the aligned key axis."""
    start, stop, _ = rows.indices(alignment.n_aligned)
    parts = []
    for at, pos, length in alignment.blocks(side):
        lo, hi = max(start, at), min(stop, at + length)
        if lo < hi:
            units = slice(pos + lo - at, pos + hi - at)
            parts.append(alignment.bin_keys(unit_rows(run, layer, head, units, words), side))
    if not parts:
        return np.zeros((0, alignment.n_keys))
    return np.concatenate(parts, axis=0)


def difference_window(
    run_a: AttentionRun,
    run_b: AttentionRun,
    alignment: Alignment,
    layer: int,
    head: int,
    rows: slice,
    cols: slice,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> tuple[AlignedWindow, AlignedWindow, AlignedWindow]:
    """One head's A, B and A − B on aligned queries ``rows`` x aligned keys ``cols``.

    Keys are on the aligned key axis (the unaligned bin at index ``alignment.bin_index`` when
    the lengths differ); cells a causal query cannot see are NaN in all three.

    Returns:
        ``(a, b, a - b)``, each ``len(rows) x len(cols)`` float64.
    """
    a = aligned_rows(run_a, alignment, "a", layer, head, rows, words_a)[:, cols].astype(float)
    b = aligned_rows(run_b, alignment, "b", layer, head, rows, words_b)[:, cols].astype(float)
    seen = alignment.visible(run_a.facts.causal)[rows, cols]
    a, b = np.where(seen, a, np.nan), np.where(seen, b, np.nan)
    return a, b, a - b


def query_divergence(
    run_a: AttentionRun,
    run_b: AttentionRun,
    alignment: Alignment,
    layer: int,
    head: int,
    words_a: Words | None = None,
    words_b: Words | None = None,
) -> Float[np.ndarray, " aligned"]:
    """One head's JSD at each aligned query (where in the prompt its attention moved)."""
    every = slice(None)
    p = aligned_rows(run_a, alignment, "a", layer, head, every, words_a)
    q = aligned_rows(run_b, alignment, "b", layer, head, every, words_b)
    return jsd_rows(torch.from_numpy(p), torch.from_numpy(q)).numpy()
