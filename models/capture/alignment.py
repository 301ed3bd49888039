"""Which positions of prompt A stand for which positions of prompt B.

Prompts of equal length align position by position, whatever the tokens: swapping one name for
another of the same length is the usual clean / corrupted pair. Prompts of different lengths align
on their longest common prefix and longest common suffix of tokens (or words); what lies between
them, the unaligned middle, is stated (a range in A and a range in B) and compared only as one
"unaligned" bin of key positions (see :mod:`models.capture.compare`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Bool, Float, Int

from models.errors import UserError

Side = Literal["a", "b"]
UNALIGNED_LABEL = "unaligned middle"


class NothingAligned(UserError):
    """Prompts of different lengths that share neither a first nor a last token."""

    level = "warning"


@dataclass(frozen=True)
class Alignment:
    """How two sequences of lengths ``n_a`` and ``n_b`` line up.

    Attributes:
        n_a: length of A (tokens or words).
        n_b: length of B.
        prefix: length of the aligned prefix (all of it when the lengths are equal).
        suffix: length of the aligned suffix (0 when the lengths are equal).
    """

    n_a: int
    n_b: int
    prefix: int
    suffix: int

    @property
    def by_position(self) -> bool:
        """Equal lengths: position ``i`` of A stands for position ``i`` of B."""
        return self.n_a == self.n_b

    @property
    def n_aligned(self) -> int:
        return self.prefix + self.suffix

    @property
    def has_bin(self) -> bool:
        """Whether the key axis has an "unaligned" bin (the lengths differ)."""
        return not self.by_position

    @property
    def n_keys(self) -> int:
        """Length of the aligned key axis: aligned positions, plus the bin when there is one."""
        return self.n_aligned + int(self.has_bin)

    def middle(self, side: Side) -> range:
        """The unaligned positions of one side (empty for equal lengths)."""
        n = self.n_a if side == "a" else self.n_b
        return range(self.prefix, n - self.suffix)

    def positions(self, side: Side) -> Int[np.ndarray, " aligned"]:
        """Position in ``side`` of each aligned index (prefix first, then suffix)."""
        n = self.n_a if side == "a" else self.n_b
        return np.concatenate([np.arange(self.prefix), np.arange(n - self.suffix, n)])

    def blocks(self, side: Side) -> list[tuple[int, int, int]]:
        """Contiguous runs ``(aligned_start, position_start, length)`` of the aligned positions."""
        n = self.n_a if side == "a" else self.n_b
        runs = [(0, 0, self.prefix), (self.prefix, n - self.suffix, self.suffix)]
        return [run for run in runs if run[2] > 0]

    def bin_keys(
        self, weights: Float[np.ndarray, "... key_pos"], side: Side
    ) -> Float[np.ndarray, "... aligned_key"]:
        """Key weights of one side on the aligned key axis.

        Aligned keys keep their weight; the weights of the unaligned middle keys are added into
        one bin placed between the prefix and the suffix, so a row that summed to 1 still does.
        ``weights`` may hold only the first keys (a causal row band needs no later ones): the
        result then holds the aligned keys among them.
        """
        stop = weights.shape[-1]
        if not self.has_bin or stop <= self.prefix:
            return weights
        n = self.n_a if side == "a" else self.n_b
        tail = n - self.suffix
        middle = weights[..., self.prefix : min(stop, tail)].sum(axis=-1, keepdims=True)
        return np.concatenate(
            [weights[..., : self.prefix], middle, weights[..., tail:stop]], axis=-1
        )

    def key_positions(self, side: Side) -> list[int | None]:
        """Position in ``side`` of each aligned key index; ``None`` for the bin."""
        pos: list[int | None] = [int(p) for p in self.positions(side)]
        if self.has_bin:
            pos.insert(self.prefix, None)
        return pos

    def visible(self, causal: bool) -> Bool[np.ndarray, "aligned aligned_key"]:
        """Which aligned keys an aligned query can see.

        In a causal model a query sees the keys up to itself and the bin only from the suffix
        (the middle lies before the suffix and after the prefix).
        """
        q = self.positions("a")
        k = np.array([-1 if p is None else p for p in self.key_positions("a")])
        if not causal:
            return np.ones((len(q), len(k)), dtype=bool)
        seen = k[None, :] <= q[:, None]
        if self.has_bin:
            seen[:, self.prefix] = np.arange(len(q)) >= self.prefix
        return seen

    def describe(self) -> str:
        """One sentence for the page: how the two prompts were lined up."""
        if self.by_position:
            return f"Equal lengths ({self.n_a}): position i of A is compared with position i of B."
        mid_a, mid_b = self.middle("a"), self.middle("b")
        return (
            f"A has {self.n_a} and B {self.n_b}: aligned on a common prefix of "
            f"{self.prefix} and suffix of {self.suffix}; unaligned middle "
            f"{_span(mid_a)} in A and {_span(mid_b)} in B."
        )


def _span(r: range) -> str:
    return "empty" if len(r) == 0 else f"{r.start}..{r.stop - 1}"


def align(a: Sequence[Hashable], b: Sequence[Hashable]) -> Alignment:
    """Line up two sequences of token ids (or words written as tuples of ids).

    Raises:
        NothingAligned: different lengths and no common first or last item.
    """
    n_a, n_b = len(a), len(b)
    if n_a == n_b:
        return Alignment(n_a, n_b, n_a, 0)
    shortest = min(n_a, n_b)
    prefix = 0
    while prefix < shortest and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and a[n_a - 1 - suffix] == b[n_b - 1 - suffix]:
        suffix += 1
    if prefix + suffix == 0:
        raise NothingAligned(
            "Prompts A and B differ in length and share neither their first nor "
            "their last token, so no position of one stands for a position of "
            "the other. Make them the same length or share a start or an end."
        )
    return Alignment(n_a, n_b, prefix, suffix)


def aligned_labels(
    alignment: Alignment, labels_a: Sequence[str], labels_b: Sequence[str], keys: bool = False
) -> list[str]:
    """Axis labels of the aligned positions: ``(i) tok`` when A and B agree there, else
    ``(i) tokA / (j) tokB``; with ``keys`` the bin appears as ``unaligned middle``.

    Labels are plain text (escape them where they become HTML).
    """
    out = []
    for i, j in zip(alignment.positions("a"), alignment.positions("b"), strict=True):
        a, b = labels_a[i], labels_b[j]
        out.append(f"({i}) {a}" if (i == j and a == b) else f"({i}) {a} / ({j}) {b}")
    if keys and alignment.has_bin:
        out.insert(
            alignment.prefix,
            f"[{UNALIGNED_LABEL}: A {_span(alignment.middle('a'))}, "
            f"B {_span(alignment.middle('b'))}]",
        )
    return out
