"""Words instead of sub-word tokens: attention between words, read from token patterns.

Byte-level BPE (GPT-2, SmolLM2: ``Ġstr`` + ``ength``), SentencePiece (``▁str`` + ``ength``) and
WordPiece (``str`` + ``##ength``) cut words into pieces; :mod:`models.capture.word_split` finds
which pieces form a word (:data:`WORD_RULE`), and this module merges attention accordingly: the
columns of a word's pieces are added (attention *to* a word), the rows of a word's pieces are
averaged (attention *from* a word), so every row still sums to 1 and a causal pattern stays
causal between words. Windows of long prompts read only the pieces of the words they show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

import numpy as np
from jaxtyping import Float, Int

if TYPE_CHECKING:
    from models.capture.run import AttentionRun

WordSource = Literal["offsets", "markers"]

WORD_RULE = (
    "Words follow the text as the tokenizer's character offsets place each piece in it (or, "
    "without offsets, the pieces' marks: Ġ or ▁ is a space, a WordPiece ## piece continues a "
    "word). A word starts at whitespace (a single space joins the word after it) and where "
    "letters or digits meet punctuation; each special token ([CLS], [SEP], a BOS token) is a word "
    "of its own, and pieces of one character stay together. Attention to a word is the sum over "
    "its pieces, so a row still sums to 1; attention from a word is the mean of its pieces' rows."
)


@dataclass(frozen=True)
class Words:
    """Pieces grouped into words (each word a contiguous run of token positions).

    Attributes:
        starts: ``n_words + 1`` boundaries: word ``w`` holds tokens ``starts[w]:starts[w + 1]``.
        labels: the text of each word (special tokens keep their token label).
        source: ``offsets`` (the tokenizer's character offsets) or ``markers`` (piece marks).
    """

    starts: tuple[int, ...]
    labels: tuple[str, ...]
    source: WordSource

    @property
    def n_words(self) -> int:
        return len(self.starts) - 1

    @property
    def n_tokens(self) -> int:
        return self.starts[-1]

    @property
    def bounds(self) -> Int[np.ndarray, " boundary"]:
        return np.asarray(self.starts, dtype=np.int64)

    @property
    def counts(self) -> Int[np.ndarray, " word"]:
        return np.diff(self.bounds)

    def word_of(self, token: int) -> int:
        """The word holding token position ``token``."""
        return int(np.searchsorted(self.bounds, token, side="right") - 1)

    def tokens_of(self, words: slice) -> slice:
        """The token positions of a run of words."""
        first, stop, _ = words.indices(self.n_words)
        return slice(self.starts[first], self.starts[max(first, stop)])

    def covering(self, tokens: slice) -> slice:
        """The words that overlap a run of token positions (e.g. a heatmap window)."""
        start, stop, _ = tokens.indices(self.n_tokens)
        if stop <= start:
            return slice(self.word_of(start), self.word_of(start))
        return slice(self.word_of(start), self.word_of(stop - 1) + 1)

    def keys(self, token_ids: Sequence[int]) -> list[tuple[int, ...]]:
        """Each word as the tuple of its token ids (what word-level alignment compares)."""
        return [tuple(token_ids[a:b]) for a, b in pairwise(self.starts)]

    def axis_labels(self) -> list[str]:
        """``(w) word`` labels that stay distinct when a word repeats."""
        return [f"({i}) {label}" for i, label in enumerate(self.labels)]


# --- merging ----------------------------------------------------------------------------------


def unit_range(tokens: range, words: Words | None) -> range:
    """Token positions as the units shown: themselves, or the words that overlap them."""
    if words is None:
        return tokens
    found = words.covering(slice(tokens.start, tokens.stop))
    return range(found.start, found.stop)


def merge_keys(
    weights: Float[np.ndarray, "... key_pos"], starts: Sequence[int], dtype: type = np.float64
) -> Float[np.ndarray, "... key_word"]:
    """Sum the key columns of each word's pieces (``starts`` as in :attr:`Words.starts`, relative
    to the first column of ``weights``), in ``dtype``."""
    return np.add.reduceat(np.asarray(weights, dtype=dtype), np.asarray(starts[:-1]), axis=-1)


def merge_queries(
    weights: Float[np.ndarray, "... query_pos key"], starts: Sequence[int], dtype: type = np.float64
) -> Float[np.ndarray, "... query_word key"]:
    """Average the query rows of each word's pieces, in ``dtype``."""
    bounds = np.asarray(starts)
    summed = np.add.reduceat(np.asarray(weights, dtype=dtype), bounds[:-1], axis=-2)
    return summed / np.diff(bounds).astype(dtype)[:, None]


def merge_pattern(
    pattern: Float[np.ndarray, "... query_pos key_pos"], words: Words
) -> Float[np.ndarray, "... query_word key_word"]:
    """A whole pattern (or a stack of them) in word space: to = sum, from = mean."""
    return merge_queries(merge_keys(pattern, words.starts), words.starts)


def local_starts(words: Words, span: slice) -> list[int]:
    """Boundaries of the words ``span`` relative to their first token."""
    first, stop, _ = span.indices(words.n_words)
    base = words.starts[first]
    return [s - base for s in words.starts[first : max(first, stop) + 1]]


def word_window(
    run: AttentionRun, words: Words, layer: int, head: int, rows: slice, cols: slice
) -> Float[np.ndarray, "query_word key_word"]:
    """Words ``rows`` x words ``cols`` of one head, read from the run's window of their pieces
    (a long prompt rebuilds only that window; a linear layer: its mixing matrix)."""
    window = run.drawn(layer, head, words.tokens_of(rows), words.tokens_of(cols))
    return merge_queries(merge_keys(window, local_starts(words, cols)), local_starts(words, rows))


def merge_strip(
    weights: Float[np.ndarray, " pos"], words: Words, axis: Literal["keys", "queries"]
) -> Float[np.ndarray, " word"]:
    """One weight per token to one per word: summed over key pieces, averaged over query pieces.

    NaN (a position the query cannot see) counts as 0; a word whose pieces are all NaN is NaN.
    """
    values = np.asarray(weights, dtype=np.float64)
    seen = np.isfinite(values)
    bounds = words.bounds[:-1]
    merged = np.add.reduceat(np.where(seen, values, 0.0), bounds)
    if axis == "queries":
        merged = merged / words.counts
    merged[np.add.reduceat(seen.astype(np.int64), bounds) == 0] = np.nan
    return merged
