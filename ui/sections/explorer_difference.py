"""Where two prompts' patterns differ, for one head: its whole |A − B|, max-pooled.

On a long prompt the detail window shows 160 positions of 2,000; this picture of the whole
difference is the overview that picks the window (click or drag, as over a head's pattern), and
its strongest cell is where "Jump to where A and B differ most" goes. Pixels are prompt A's token
positions (a word drawn at its first token), so the window outlined is the view's own. It is
computed a band of aligned query rows at a time, reading only those rows from each run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.attention.pattern import MASK_BYTES
from models.capture.alignment import Alignment
from models.capture.difference import DifferenceOverview, aligned_rows
from models.capture.run import AttentionRun
from models.capture.words import Words
from models.cost import Cost, with_slack
from models.head import Head
from models.progress import Progress
from ui.runtime import server
from ui.runtime.job_keys import CompareKey, DifferenceOverviewKey, RunKey
from ui.runtime.jobs import Work
from viz.thumbnails import PIXEL_BYTES, data_uri, pooled_png

BAND = 128  # aligned query rows read at a time


@dataclass(frozen=True)
class Pair:
    """Prompt A's and prompt B's runs, words (word view) and how they line up."""

    run_a: AttentionRun
    run_b: AttentionRun
    key_a: RunKey
    alignment: Alignment
    words_a: Words | None
    words_b: Words | None

    def names(self, side: str) -> list[str]:
        words, run = (self.words_a, self.run_a) if side == "a" else (self.words_b, self.run_b)
        return list(words.labels) if words is not None else list(run.tokens)

    def query_axis(self) -> list[float]:
        return [float(p) for p in self.alignment.positions("a")]

    def key_axis(self) -> list[float]:
        """Prompt-A unit of each aligned key; the unaligned bin stands just after the aligned
        key before it (ascending, as the window mapping needs)."""
        at = self.alignment.bin_position("a")
        return [float(at if p is None else p) for p in self.alignment.key_positions("a")]


def token_axes(pair: Pair) -> tuple[np.ndarray, np.ndarray]:
    """Prompt A's token position of every aligned query and aligned key (the unaligned bin just
    after the aligned key before it; a word at its first token)."""
    queries = np.asarray(pair.query_axis(), dtype=np.int64)
    keys = np.asarray(pair.key_axis(), dtype=np.int64)
    if pair.words_a is not None:
        starts = np.asarray(pair.words_a.starts, dtype=np.int64)
        queries, keys = starts[queries], starts[keys]
    return queries, keys


def groups(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For non-decreasing pixel indices: where each run of one pixel starts, and its pixel."""
    starts = np.flatnonzero(np.diff(pixels, prepend=-1))
    return starts, pixels[starts]


def pooled_grid(
    pair: Pair, head: Head, size: int, progress: Progress
) -> tuple[np.ndarray, tuple[float, int, int]]:
    """|A − B| of ``head`` max-pooled to at most ``size`` pixels a side (pixel ``p`` holds
    prompt-A tokens ``p * factor`` to ``(p + 1) * factor - 1``, ``factor = ceil(n / size)``),
    and the strongest cell as ``(value, query token, key token)``."""
    n = pair.run_a.n_tokens
    factor = -(-n // size)
    m = -(-n // factor)
    q_tok, k_tok = token_axes(pair)
    k_starts, k_pix = groups(k_tok // factor)
    grid = np.zeros((m, m), dtype=np.float32)
    best = (0.0, int(q_tok[-1]) if len(q_tok) else 0, 0)
    total = len(q_tok)
    for r0 in range(0, total, BAND):
        rows = slice(r0, min(r0 + BAND, total))
        found = [
            aligned_rows(
                pair.run_a, pair.alignment, "a", head.layer, head.index, rows, pair.words_a
            ),
            aligned_rows(
                pair.run_b, pair.alignment, "b", head.layer, head.index, rows, pair.words_b
            ),
        ]
        diff = np.abs(found[0].astype(np.float32) - found[1].astype(np.float32))
        at = np.unravel_index(int(np.argmax(diff)), diff.shape)
        if diff[at] > best[0]:
            best = (float(diff[at]), int(q_tok[r0 + at[0]]), int(k_tok[at[1]]))
        by_key = np.maximum.reduceat(diff, k_starts, axis=1)
        q_starts, q_pix = groups(q_tok[rows] // factor)
        pooled = np.maximum.reduceat(by_key, q_starts, axis=0)
        block = np.ix_(q_pix, k_pix)
        grid[block] = np.maximum(grid[block], pooled)
        progress(rows.stop / max(1, total), f"rows {rows.stop:,} of {total:,}")
    return grid, best


def pooled_difference(pair: Pair, head: Head, size: int, progress: Progress) -> DifferenceOverview:
    """The overview picture of :func:`pooled_grid` and its strongest cell."""
    grid, (top, query, key) = pooled_grid(pair, head, size, progress)
    return DifferenceOverview(data_uri(pooled_png(grid, size, normalise=True)), query, key, top)


# Bytes a cell of a band (one aligned query row by one key of the longer prompt), every array
# the band makes counted as if none were freed: for each prompt, its rows rebuilt in float32
# with their masks (4 + MASK_BYTES), their float32 copy, the aligned keys joined and the
# unaligned bin added (4 each); then both sides' float32 copies, A - B and its absolute value
# (4 each).
BAND_CELL_BYTES = 2 * (4 + MASK_BYTES + 4 + 4 + 4) + 4 * 4


def cost(pair: Pair, size: int) -> Cost:
    """Both prompts' whole rows of one head (rebuilt from q and k on a long prompt), a band of
    :data:`BAND` aligned query rows at a time, pooled into a picture of ``size`` pixels; with
    slack, as the count is of every array the band makes and sits near the measured peak."""
    facts, n_a, n_b = pair.run_a.facts, pair.run_a.n_tokens, pair.run_b.n_tokens
    cells = pair.alignment.n_aligned * (n_a + n_b)
    per_cell = 2 * facts.d_head + 8 if pair.run_a.factored else 4
    band = min(BAND, pair.alignment.n_aligned) * (max(n_a, n_b) + 1)
    pixels = min(size, n_a) ** 2
    return Cost(
        flops=float(cells * per_cell),
        peak_bytes=with_slack(BAND_CELL_BYTES * band + PIXEL_BYTES * pixels),
    )


def work(pair: Pair, head: Head, size: int) -> Work[DifferenceOverview]:
    return lambda progress: pooled_difference(pair, head, size, progress)


def key_for(compare: CompareKey, head: Head) -> DifferenceOverviewKey:
    return DifferenceOverviewKey(compare, head)


def stored(compare: CompareKey, head: Head) -> DifferenceOverview | None:
    return server.current().results.get(DifferenceOverviewKey(compare, head))
