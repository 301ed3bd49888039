"""Which positions of prompt A stand for which positions of prompt B.

Prompts of equal length align position by position, whatever the tokens: swapping one name for
another of the same length is the usual clean / corrupted pair. Prompts of different lengths
align like a diff: on every block of tokens (or words) that the two have in common, in order.
The common prefix and suffix are taken first, then :class:`difflib.SequenceMatcher` (no junk
heuristic) finds the matching blocks of what lies between them. Its search weighs every pair of
equal items of the two middles, so its cost is priced from their count (:func:`equal_pairs`, in
linear time) and refused past :data:`MAX_EQUAL_PAIRS` (long middles made of few distinct tokens
would take minutes). Inside a matching block position
``a_start + i`` of A stands for ``b_start + i`` of B; every other position is unaligned, stated
as ranges of A and of B, and compared only as one "unaligned" bin of key positions (see
:mod:`models.capture.compare`).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Bool, Float, Int

from models.errors import UserError

Side = Literal["a", "b"]
SIDES: tuple[Side, Side] = ("a", "b")
Match = tuple[int, int, int]  # (position in A, position in B, length)
UNALIGNED_LABEL = "unaligned"
# Measured: 0.7-1.8 microseconds per pair of equal items (2,000-8,000 tokens, 2-500 distinct)
SECONDS_PER_PAIR = 2e-6
MAX_EQUAL_PAIRS = 4_000_000  # about 8 s of lining up


class NothingAligned(UserError):
    """Prompts of different lengths that have no token (or word) in common."""

    level = "warning"


class AlignmentTooCostly(UserError):
    """Prompts whose differing middles would take too long to line up."""

    level = "warning"


@dataclass(frozen=True)
class Alignment:
    """How two sequences of lengths ``n_a`` and ``n_b`` line up.

    Attributes:
        n_a: length of A (tokens or words).
        n_b: length of B.
        matches: the matching blocks ``(a_start, b_start, length)``, in order, each of positive
            length, strictly increasing on both sides (one block ``(0, 0, n)`` for equal lengths).
    """

    n_a: int
    n_b: int
    matches: tuple[Match, ...]

    def __post_init__(self) -> None:
        end_a = end_b = 0
        for a0, b0, length in self.matches:
            if length <= 0 or a0 < end_a or b0 < end_b:
                raise ValueError(f"matching blocks out of order: {self.matches}")
            end_a, end_b = a0 + length, b0 + length
        if end_a > self.n_a or end_b > self.n_b:
            raise ValueError(f"matching blocks past the ends: {self.matches}")

    @property
    def by_position(self) -> bool:
        """Equal lengths: position ``i`` of A stands for position ``i`` of B."""
        return self.n_a == self.n_b

    @property
    def n_aligned(self) -> int:
        return sum(length for _, _, length in self.matches)

    @property
    def has_bin(self) -> bool:
        """Whether the key axis has an "unaligned" bin (the lengths differ)."""
        return not self.by_position

    @property
    def bin_index(self) -> int:
        """Where the bin stands on the aligned key axis: after the aligned keys that come before
        the first unaligned position of either side (0 without a bin)."""
        if not self.has_bin:
            return 0
        return min(
            int(np.searchsorted(self.positions(side), gaps[0].start))
            for side, gaps in ((s, self.unaligned(s)) for s in SIDES)
            if gaps
        )

    @property
    def n_keys(self) -> int:
        """Length of the aligned key axis: aligned positions, plus the bin when there is one."""
        return self.n_aligned + int(self.has_bin)

    def length(self, side: Side) -> int:
        return self.n_a if side == "a" else self.n_b

    def blocks(self, side: Side) -> list[tuple[int, int, int]]:
        """Contiguous runs ``(aligned_start, position_start, length)`` of the aligned positions."""
        out, at = [], 0
        for a0, b0, length in self.matches:
            out.append((at, a0 if side == "a" else b0, length))
            at += length
        return out

    def positions(self, side: Side) -> Int[np.ndarray, " aligned"]:
        """Position in ``side`` of each aligned index, ascending."""
        runs = [np.arange(p, p + length) for _, p, length in self.blocks(side)]
        return np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)

    def unaligned(self, side: Side) -> tuple[range, ...]:
        """The runs of unaligned positions of one side (none for equal lengths)."""
        gaps, end = [], 0
        for _, p, length in [*self.blocks(side), (0, self.length(side), 0)]:
            if p > end:
                gaps.append(range(end, p))
            end = p + length
        return tuple(gaps)

    def n_unaligned(self, side: Side) -> int:
        return self.length(side) - self.n_aligned

    def bin_keys(
        self, weights: Float[np.ndarray, "... key_pos"], side: Side
    ) -> Float[np.ndarray, "... aligned_key"]:
        """Key weights of one side on the aligned key axis.

        Aligned keys keep their weight; the weights of all unaligned keys are added into one bin
        placed at :attr:`bin_index`, so a row that summed to 1 still does. ``weights`` may hold
        only the first keys (a causal row band needs no later ones): the result then holds the
        aligned keys among them and the bin (after them when it would stand later), and its
        width is the same on both sides for the same aligned query band.
        """
        stop = weights.shape[-1]
        kept = [
            weights[..., p : min(p + length, stop)]
            for _, p, length in self.blocks(side)
            if p < stop
        ]
        if not self.has_bin:
            return weights  # equal lengths: the keys are the aligned keys
        pooled = np.zeros((*weights.shape[:-1], 1), dtype=weights.dtype)
        for gap in self.unaligned(side):
            if gap.start < stop:
                pooled += weights[..., gap.start : min(gap.stop, stop)].sum(axis=-1, keepdims=True)
        aligned = _join(kept) if kept else weights[..., :0]
        at = min(self.bin_index, aligned.shape[-1])
        return np.concatenate([aligned[..., :at], pooled, aligned[..., at:]], axis=-1)

    def key_positions(self, side: Side) -> list[int | None]:
        """Position in ``side`` of each aligned key index; ``None`` for the bin."""
        pos: list[int | None] = [int(p) for p in self.positions(side)]
        if self.has_bin:
            pos.insert(self.bin_index, None)
        return pos

    def bin_position(self, side: Side) -> int:
        """A position of ``side`` for drawing the bin in that side's order: just after the
        aligned key before it (within the prompt), so key positions stay non-decreasing."""
        pos = self.positions(side)
        at = self.bin_index
        return int(min(pos[at - 1] + 1 if at > 0 else 0, max(0, self.length(side) - 1)))

    def visible(self, causal: bool) -> Bool[np.ndarray, "aligned aligned_key"]:
        """Which aligned keys an aligned query can see.

        In a causal model a query sees the aligned keys up to itself, and the bin once an
        unaligned position of A or of B lies at or before it.
        """
        n = self.n_aligned
        if not causal:
            return np.ones((n, self.n_keys), dtype=bool)
        seen = np.tril(np.ones((n, n), dtype=bool))
        if not self.has_bin:
            return seen
        bin_seen = np.zeros(n, dtype=bool)
        for side in SIDES:
            gaps = self.unaligned(side)
            if gaps:
                bin_seen |= self.positions(side) >= gaps[0].start
        return np.insert(seen, self.bin_index, bin_seen, axis=1)

    def describe(self, unit: str = "tokens") -> str:
        """One sentence for the page: how the two prompts were lined up."""
        if self.by_position:
            return (
                f"Equal lengths ({self.n_a} {unit}): position i of A is compared with "
                "position i of B."
            )
        return (
            f"{self.n_aligned} of A's {self.n_a} {unit} and of B's {self.n_b} aligned (like a "
            f"diff, on the blocks they share); unaligned: A {spans(self.unaligned('a'))}; "
            f"B {spans(self.unaligned('b'))}."
        )


def _join(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def spans(gaps: Sequence[range], most: int = 6) -> str:
    """``6–8, 45–47`` (inclusive ranges), ``none`` when empty; at most ``most`` then a count."""
    if not gaps:
        return "none"
    shown = [str(g.start) if len(g) == 1 else f"{g.start}–{g.stop - 1}" for g in gaps[:most]]
    more = f" and {len(gaps) - most} more" if len(gaps) > most else ""
    return ", ".join(shown) + more


def common_ends(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[int, int]:
    """Lengths of the common prefix and of the common suffix after it."""
    n_a, n_b = len(a), len(b)
    shortest = min(n_a, n_b)
    prefix = 0
    while prefix < shortest and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and a[n_a - 1 - suffix] == b[n_b - 1 - suffix]:
        suffix += 1
    return prefix, suffix


def equal_pairs(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Pairs ``(i, j)`` of equal items between the middles of ``a`` and ``b`` (what lies between
    their common prefix and suffix): the work of the diff's search. 0 for equal lengths, which
    align position by position."""
    if len(a) == len(b):
        return 0
    prefix, suffix = common_ends(a, b)
    in_b = Counter(b[prefix : len(b) - suffix])
    return sum(in_b[item] for item in a[prefix : len(a) - suffix])


def alignment_seconds(pairs: int) -> float:
    """Seconds lining up takes for :func:`equal_pairs` ``pairs`` (measured rate)."""
    return pairs * SECONDS_PER_PAIR


def check_cost(pairs: int, unit: str = "tokens") -> None:
    """Refuse an alignment whose search would weigh more than :data:`MAX_EQUAL_PAIRS` pairs.

    Raises:
        AlignmentTooCostly: with what to change.
    """
    if pairs <= MAX_EQUAL_PAIRS:
        return
    raise AlignmentTooCostly(
        f"Prompts A and B differ in length over a long stretch that repeats few distinct "
        f"{unit}: lining them up would weigh {pairs:,} pairs of equal {unit} (about "
        f"{alignment_seconds(pairs):.0f} s); this server lines up at most {MAX_EQUAL_PAIRS:,}. "
        "Make the prompts the same length (they then align position by position) or shorten "
        "the part where they differ."
    )


def matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[Match, ...]:
    """The common prefix, the matching blocks between (``difflib``, no junk heuristic), the
    common suffix; adjacent blocks merged."""
    n_a, n_b = len(a), len(b)
    prefix, suffix = common_ends(a, b)
    found = [(0, 0, prefix)]
    mid_a, mid_b = list(a[prefix : n_a - suffix]), list(b[prefix : n_b - suffix])
    if mid_a and mid_b:
        matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        found += [(prefix + i, prefix + j, k) for i, j, k in matcher.get_matching_blocks()]
    found.append((n_a - suffix, n_b - suffix, suffix))
    merged: list[Match] = []
    for i, j, k in found:
        if k == 0:
            continue
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + k)
        else:
            merged.append((i, j, k))
    return tuple(merged)


def align(a: Sequence[Hashable], b: Sequence[Hashable], unit: str = "tokens") -> Alignment:
    """Line up two sequences of token ids (or words written as tuples of ids).

    Raises:
        NothingAligned: different lengths and no item in common.
        AlignmentTooCostly: see :func:`check_cost`.
    """
    n_a, n_b = len(a), len(b)
    if n_a == n_b:
        return Alignment(n_a, n_b, ((0, 0, n_a),) if n_a else ())
    check_cost(equal_pairs(a, b), unit)
    matches = matching_blocks(a, b)
    if not matches:
        raise NothingAligned(
            "Prompts A and B differ in length and have no token in common, so no position of "
            "one stands for a position of the other. Make them the same length or keep part "
            "of one in the other."
        )
    return Alignment(n_a, n_b, matches)


def aligned_labels(
    alignment: Alignment, labels_a: Sequence[str], labels_b: Sequence[str], keys: bool = False
) -> list[str]:
    """Axis labels of the aligned positions: ``(i) tok`` when A and B agree there, else
    ``(i) tokA / (j) tokB``; with ``keys`` the bin appears as ``[unaligned: A ..., B ...]``.

    Labels are plain text (escape them where they become HTML).
    """
    out = []
    for i, j in zip(alignment.positions("a"), alignment.positions("b"), strict=True):
        a, b = labels_a[i], labels_b[j]
        out.append(f"({i}) {a}" if (i == j and a == b) else f"({i}) {a} / ({j}) {b}")
    if keys and alignment.has_bin:
        out.insert(
            alignment.bin_index,
            f"[{UNALIGNED_LABEL}: A {spans(alignment.unaligned('a'), 3)}; "
            f"B {spans(alignment.unaligned('b'), 3)}]",
        )
    return out
