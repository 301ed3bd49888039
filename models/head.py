"""One attention head as a value: ``Head(layer, index)``, written ``L.H`` everywhere.

The page, the CSV files, the command lines and the tests all name a head the same way: layer and
head index, both counted from zero, joined by a dot. :meth:`Head.parse` is the one parser of that
spelling and ``str(head)`` the one writer, so the two can never drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

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
