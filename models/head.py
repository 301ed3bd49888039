"""One attention head as a value: ``Head(layer, index)``, written ``L.H`` everywhere.

The page, the CSV files, the command lines and the tests all name a head the same way: layer and
head index, both counted from zero, joined by a dot. :meth:`Head.parse` is the one parser of that
spelling and ``str(head)`` the one writer, so the two can never drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal, NamedTuple

SharingKind = Literal["MHA", "GQA", "MQA"]

_SPELLING = re.compile(r"^\s*(\d{1,6})\.(\d{1,6})\s*$")


class Head(NamedTuple):
    """A head of a model: ``layer`` and ``index`` within the layer, both zero-based.

    A named tuple, so a head unpacks as ``layer, index = head``, sorts by layer then index, and
    indexes a ``layer x head`` array directly (``scores[head]``).
    """

    layer: int
    index: int  # type: ignore[assignment]  # the field shadows tuple.index, on purpose

    def __str__(self) -> str:
        return f"{self.layer}.{self.index}"

    @classmethod
    def parse(cls, text: object) -> Head:
        """``"L.H"`` (spaces around it allowed) as a Head.

        Raises:
            ValueError: anything else (a sign, a letter, a missing part).
        """
        found = _SPELLING.match(str(text))
        if found is None:
            raise ValueError(f"{text!r} is not a head: write layer.head, such as 3.1")
        return cls(int(found.group(1)), int(found.group(2)))

    def fits(self, n_layers: int, n_heads: int) -> bool:
        """Whether this head exists in a model of ``n_layers`` x ``n_heads``."""
        return 0 <= self.layer < n_layers and 0 <= self.index < n_heads


def all_heads(n_layers: int, n_heads: int) -> Iterator[Head]:
    """Every head of a model, layer by layer."""
    for layer in range(n_layers):
        for index in range(n_heads):
            yield Head(layer, index)


class HeadGroups(NamedTuple):
    """Which key/value head each query head reads: ``n_heads`` query heads in ``n_kv_heads``
    groups of :attr:`size` consecutive heads (Hugging Face's order), each group sharing one key
    and value head. ``n_kv_heads == n_heads`` is multi-head attention, ``1`` is multi-query."""

    n_heads: int
    n_kv_heads: int

    @classmethod
    def checked(cls, n_heads: int, n_kv_heads: int) -> HeadGroups:
        """The grouping of ``n_heads`` query heads into ``n_kv_heads`` groups.

        Raises:
            ValueError: the heads do not split into equal groups.
        """
        if n_heads < 1 or n_kv_heads < 1:
            raise ValueError("Both head counts must be at least 1.")
        if n_kv_heads > n_heads:
            raise ValueError(
                f"{n_kv_heads} key/value heads is more than the {n_heads} query heads."
            )
        if n_heads % n_kv_heads:
            raise ValueError(
                f"{n_heads} query heads cannot be split evenly into {n_kv_heads} groups; "
                f"pick a divisor of {n_heads}."
            )
        return cls(n_heads, n_kv_heads)

    @property
    def kind(self) -> SharingKind:
        """``"MHA"`` when every query head has its own key/value head, ``"MQA"`` for one
        shared by all, ``"GQA"`` in between."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def size(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    def kv_head(self, head_index: int) -> int:
        """The key/value head query head ``head_index`` reads."""
        return head_index // self.size

    def query_heads(self, kv_head: int) -> range:
        """The query heads that read key/value head ``kv_head``."""
        return range(kv_head * self.size, (kv_head + 1) * self.size)

    def kv_heads(self) -> list[int]:
        """The key/value head of every query head, in order."""
        return [self.kv_head(h) for h in range(self.n_heads)]
