"""Which tokens of a captured prompt form one word (the rule is :data:`words.WORD_RULE`).

Each piece is turned into the text it covers with the whitespace just before it: from the
tokenizer's character offsets when it has them (fast tokenizers) and its encoding of the prompt
is what the model saw, else from the piece's own marks (``Ġ`` and ``▁`` are a space, a WordPiece
piece without ``##`` follows a space). One rule over those texts then finds the words, so the
three tokenizer families (byte-level BPE, SentencePiece, WordPiece) split the same way:

- a special token is a word of its own;
- a piece whose text starts with whitespace starts a word; a single space on its own joins the
  word that follows (SmolLM2 cuts `` 3`` into ``Ġ`` + ``3``);
- a piece starts a word where letters or digits meet punctuation or whitespace;
- a piece that covers the same character as the one before (bytes of one emoji) stays with it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Literal

from models.capture.words import Words
from models.model.tokens import byte_decoder, is_byte_level, show_whitespace

WordMarks = Literal["byte_level", "sentencepiece", "wordpiece"]
SPLIT_CHAR = "\x80"  # stands for part of a character cut between byte-level pieces


def family(tokenizer: Any, pieces: Sequence[str] = ()) -> WordMarks:
    """Which piece marks a tokenizer uses: from its backend model, else from the pieces."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if type(getattr(backend, "model", None)).__name__ == "WordPiece" or any(
        p.startswith("##") for p in pieces
    ):
        return "wordpiece"
    if tokenizer is not None and is_byte_level(tokenizer):
        return "byte_level"
    return "sentencepiece" if any("▁" in p for p in pieces) else "byte_level"


def piece_text(piece: str, kind: WordMarks, first: bool = False) -> str:
    """The text a piece stands for, with a leading space where its marks say so."""
    if kind == "wordpiece":
        return piece[2:] if piece.startswith("##") else ("" if first else " ") + piece
    if kind == "sentencepiece":
        return piece.replace("▁", " ")
    decoder = byte_decoder()
    if piece and all(ch in decoder for ch in piece):
        return bytes(decoder[ch] for ch in piece).decode("utf-8", errors="ignore") or SPLIT_CHAR
    return piece


def char_class(ch: str) -> str:
    """``s`` whitespace, ``w`` letter / digit / mark / part of a cut character, ``p`` other."""
    if ch.isspace():
        return "s"
    if ch == SPLIT_CHAR or unicodedata.category(ch)[0] in "LNM":
        return "w"
    return "p"


def word_starts(texts: Sequence[str], special: Sequence[bool]) -> list[int]:
    """Word boundaries (``n_words + 1``) from each piece's text (see the module docstring)."""
    starts = [0]
    current = ""
    for i, text in enumerate(texts):
        if i > 0:
            if special[i] or special[i - 1]:
                new = True
            elif not text:  # the same character as the piece before
                new = False
            else:
                new = text[0].isspace() or (
                    current != " " and char_class(text[0]) != char_class(current[-1])
                )
            if new:
                starts.append(i)
                current = ""
        current += text
    starts.append(len(texts))
    return starts


def offset_texts(
    tokenizer: Any, prompt: str, ids: list[int], special: list[bool]
) -> list[tuple[str, int, int] | None] | None:
    """Per position ``(text with the whitespace before it, start, end)`` from character offsets,
    ``None`` for special tokens; ``None`` overall when the offsets cannot be matched to ``ids``.

    The prompt is encoded again without special tokens and found in ``ids`` after at most a few
    leading special tokens; anything after it must be special (a closing [SEP]).
    """
    if not getattr(tokenizer, "is_fast", False):
        return None
    enc = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)
    content, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    n = len(ids)
    for lead in range(min(4, n) + 1):
        if not all(special[:lead]):
            return None
        size = 0
        while lead + size < n and size < len(content) and ids[lead + size] == content[size]:
            size += 1
        if size and all(special[lead + size :]):
            break
    else:
        return None
    out: list[tuple[str, int, int] | None] = []
    end = 0
    for pos in range(n):
        j = pos - lead
        if not 0 <= j < size:
            out.append(None)
            continue
        start, stop = offsets[j]
        out.append(
            None if special[pos] else (prompt[end:stop] if start >= end else "", start, stop)
        )
        end = max(end, stop)
    return out


def split_words(
    tokenizer: Any, prompt: str, token_ids: Sequence[int], tokens: Sequence[str] | None = None
) -> Words:
    """The words of a captured prompt.

    Args:
        tokenizer: the model's tokenizer (fast ones give character offsets).
        prompt: the text the ids were made from.
        token_ids: the ids the model saw (special tokens included, maybe cut to the context).
        tokens: readable token labels (``AttentionRun.tokens``) for the special tokens' words.

    Returns:
        :class:`Words`, from offsets when they match the ids, else from piece marks.
    """
    ids = [int(i) for i in token_ids]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = [i in special_ids for i in ids]
    pieces = [str(p) for p in tokenizer.convert_ids_to_tokens(ids)]
    labels = list(tokens) if tokens is not None else pieces
    kind = family(tokenizer, pieces)
    found = offset_texts(tokenizer, prompt, ids, special)
    if found is not None:
        starts = word_starts(["" if f is None else f[0] for f in found], special)
        words = []
        for a, b in pairwise(starts):
            covered = [f for f in found[a:b] if f is not None]
            words.append(
                text_label(prompt[covered[0][1] : max(f[2] for f in covered)])
                if covered
                else labels[a]
            )
        return Words(tuple(starts), tuple(words), "offsets")
    texts = [piece_text(p, kind, first=i == 0 or special[i - 1]) for i, p in enumerate(pieces)]
    starts = word_starts(texts, special)
    return Words(
        tuple(starts),
        tuple(
            labels[a] if special[a] else text_label(joined_text(pieces[a:b], kind))
            for a, b in pairwise(starts)
        ),
        "markers",
    )


def text_label(text: str) -> str:
    """A word's label: its text without surrounding whitespace (whitespace words shown)."""
    return show_whitespace(text.strip() or text)


def joined_text(pieces: Sequence[str], kind: WordMarks) -> str:
    """The text of consecutive pieces (byte-level bytes decoded together)."""
    decoder = byte_decoder()
    raw = "".join(pieces)
    if kind == "byte_level" and raw and all(ch in decoder for ch in raw):
        return bytes(decoder[ch] for ch in raw).decode("utf-8", errors="backslashreplace")
    return "".join(piece_text(p, kind, first=True) for p in pieces)
