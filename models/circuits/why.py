"""Why here: one attention score split exactly into (query-side part, key-side part) pairs.

With every norm's scale frozen at its value on the prompt, head ``L.H``'s query at ``i`` and
key at ``j`` are sums of parts (:mod:`models.circuits.why_sides`), so its logit before the
softmax is exactly::

    s(i, j) = scale * sum_a sum_b  q_a(i) . k_b(j)  (+ ALiBi's -m |i - j|)

one number per pair of a query-side part ``a`` and a key-side part ``b``. Soft-capped models
(Gemma 2) cap that raw logit afterwards (``c tanh(s / c)``): the split is of the raw logit, and
the cap is its own step. "Exact" means: removing part ``a`` from the query (scales frozen)
changes the score by exactly its row sum, removing ``b`` from the key by its column sum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.why_keep import KeptHead
from models.errors import UserError
from models.head import Head

ALIBI = "alibi"
_WORDS = {
    "embed": "the token embedding",
    "pos_embed": "the position embedding",
    "type_embed": "the token type embedding",
    "b_ln_embed": "the embedding norm's bias",
    "b_Q": "the query bias",
    "b_K": "the key bias",
    ALIBI: "ALiBi's distance penalty",
}
_LAYERED = {
    "mlp": "MLP {}'s output",
    "b_O": "layer {}'s attention output bias",
    "b_ln1": "the bias of layer {}'s first norm",
    "b_ln2": "the bias of layer {}'s second norm",
    "b_ln1_post": "the bias of layer {}'s attention output norm",
}
_HEAD = re.compile(r"^\d+\.\d+$")


class CellError(UserError):
    """The query or key is not a cell the head computes (out of range, or never seen)."""

    level = "info"


def part_head(name: str) -> Head | None:
    """The head a part is the output of (``"1.2"`` -> ``Head(1, 2)``), ``None`` for others."""
    return Head.parse(name) if _HEAD.match(name) else None


def part_words(name: str) -> str:
    """A part in words: ``"1.2"`` -> ``"head 1.2's output"``, ``"mlp.3"`` -> ``"MLP 3's
    output"``."""
    if name in _WORDS:
        return _WORDS[name]
    if part_head(name) is not None:
        return f"head {name}'s output"
    kind, _, layer = name.rpartition(".")
    return _LAYERED[kind].format(layer) if kind in _LAYERED else name


def part_group(name: str) -> str:
    """The group a part is drawn in (:data:`viz.circuits_figures.GROUP_COLOURS`): embeddings,
    heads, MLPs, or biases (norm, attention and query/key biases; ALiBi's penalty)."""
    if name in ("embed", "pos_embed", "type_embed"):
        return "embeddings"
    if part_head(name) is not None:
        return "heads"
    return "MLPs" if name.rpartition(".")[0] == "mlp" else "biases"


@dataclass(frozen=True)
class PartPair:
    """One (query-side part, key-side part) pair and its share of the logit."""

    query_part: str
    key_part: str
    value: float

    def words(self) -> str:
        """``"head 1.2's output at the key × the token embedding at the query: +1.9"``."""
        if self.query_part == ALIBI:
            return f"{part_words(ALIBI)}: {self.value:+.3g}"
        return (
            f"{part_words(self.key_part)} at the key × {part_words(self.query_part)} at the "
            f"query: {self.value:+.3g}"
        )


@dataclass(frozen=True)
class WhySplit:
    """Head ``head``'s logit at query ``query`` and key ``key``, split into pairs.

    Attributes:
        head, query, key: the cell (positions as the explorer shows them).
        query_token, key_token: their readable tokens.
        query_parts, key_parts: the part names of each side.
        pairs: ``query_part key_part`` shares of the raw logit (float64).
        position_bias: ALiBi's part ``-m |i - j|``, ``None`` without ALiBi.
        score: the model's own raw logit (from its own query and key; before any cap).
        softcap: the cap ``c``, ``None`` when the model has none.
        weight: the model's own attention weight on the key.
        row_scale: the largest ``|raw logit|`` among the keys this query sees.
    """

    head: Head
    query: int
    key: int
    query_token: str
    key_token: str
    query_parts: tuple[str, ...]
    key_parts: tuple[str, ...]
    pairs: np.ndarray
    position_bias: float | None
    score: float
    softcap: float | None
    weight: float
    row_scale: float

    @property
    def total(self) -> float:
        """The sum of every pair (and ALiBi's part): the raw logit rebuilt from its parts."""
        return float(self.pairs.sum() + (self.position_bias or 0.0))

    @property
    def difference(self) -> float:
        """:attr:`total` minus the model's own :attr:`score` (float rounding)."""
        return self.total - self.score

    def capped(self, raw: float) -> float:
        """``raw`` after the soft-cap (unchanged without one)."""
        return raw if self.softcap is None else float(self.softcap * np.tanh(raw / self.softcap))

    @property
    def query_totals(self) -> np.ndarray:
        """``query_part``: each query-side part's share (the pairs' row sums)."""
        shares: np.ndarray = self.pairs.sum(axis=1)
        return shares

    @property
    def key_totals(self) -> np.ndarray:
        """``key_part``: each key-side part's share (the pairs' column sums)."""
        shares: np.ndarray = self.pairs.sum(axis=0)
        return shares

    def rows(self) -> list[PartPair]:
        """Every pair in order (query part, then key part), ALiBi's part last."""
        out = [
            PartPair(a, b, float(self.pairs[i, j]))
            for i, a in enumerate(self.query_parts)
            for j, b in enumerate(self.key_parts)
        ]
        if self.position_bias is not None:
            out.append(PartPair(ALIBI, ALIBI, self.position_bias))
        return out

    def top_pairs(self, k: int = 5) -> list[PartPair]:
        """The ``k`` pairs with the largest ``|share|``."""
        return sorted(self.rows(), key=lambda pair: -abs(pair.value))[:k]


def check_cell(kept: KeptHead, query: int, key: int) -> None:
    """Raise :class:`CellError` unless head ``kept.head`` computes a weight at the cell."""
    n = kept.n_pos
    for name, pos in (("query", query), ("key", key)):
        if not 0 <= pos < n:
            raise CellError(f"The {name} position {pos} is outside the prompt (0 to {n - 1}).")
    if not bool(kept.terms.visible(query, n)[key]):
        raise CellError(
            f"Query {query} never sees key {key} (a causal model looks only back, a sliding "
            "window only near): there is no weight to explain."
        )


def split(kept: KeptHead, query: int, key: int) -> WhySplit:
    """Split head ``kept.head``'s logit at (``query``, ``key``) into pairs (float64 products
    of the kept float32 parts: a cell is a lookup and one small product, however long the
    prompt).

    Raises:
        CellError: a position outside the prompt, or a key the query never sees.
    """
    check_cell(kept, query, key)
    q_parts = kept.query_parts[query].to(torch.float64)
    k_parts = kept.key_parts[key].to(torch.float64)
    pairs = (q_parts @ k_parts.T * kept.terms.scale).numpy()
    raw = kept.raw_row(query)
    seen = kept.terms.visible(query, kept.n_pos)
    bias = None
    if kept.terms.alibi_slope is not None:
        bias = float(kept.terms.position_bias(query, torch.tensor([key]))[0])
    return WhySplit(
        head=kept.head,
        query=query,
        key=key,
        query_token=kept.tokens[query],
        key_token=kept.tokens[key],
        query_parts=kept.query.names,
        key_parts=kept.key.names,
        pairs=pairs,
        position_bias=bias,
        score=float(raw[key]),
        softcap=kept.terms.softcap,
        weight=float(kept.terms.weights(raw, query)[key]),
        row_scale=float(raw[seen].abs().max()),
    )
