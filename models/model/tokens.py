"""Turn tokenizer pieces into labels a person can read.

Byte-level BPE (GPT-2 style) stores a space as ``Ġ`` and a newline as ``Ċ``; SentencePiece stores
a space as ``▁``. Labels show whitespace with visible marks instead, so that a token that *is* a
space or a newline can still be seen and clicked.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

WHITESPACE_MARKS = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
EMPTY_MARK = "∅"


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: printable stand-in character -> raw byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def show_whitespace(text: str) -> str:
    """Replace whitespace and control characters with visible marks (U+2400 block)."""
    out = []
    for ch in text:
        if ch in WHITESPACE_MARKS:
            out.append(WHITESPACE_MARKS[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(chr(0x2400 + ord(ch)) if ord(ch) < 32 else "␡")
        else:
            out.append(ch)
    return "".join(out) or EMPTY_MARK


def readable_token(raw: str, byte_level: bool) -> str:
    """One tokenizer piece as a label.

    Args:
        raw: the piece as the tokenizer stores it (``convert_ids_to_tokens``).
        byte_level: whether the tokenizer is byte-level BPE; its pieces are then mapped back to
            bytes, and bytes that are not whole UTF-8 characters are shown as ``\\xNN``.
    """
    decoder = byte_decoder()
    if byte_level and raw and all(ch in decoder for ch in raw):
        text = bytes(decoder[ch] for ch in raw).decode("utf-8", errors="backslashreplace")
    else:
        text = raw.replace("▁", " ")
    return show_whitespace(text)


def is_byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    return type(decoder).__name__ == "ByteLevel"


def readable_tokens(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Labels for ``ids``; special tokens ([CLS], <|endoftext|>) keep their own names."""
    byte_level = is_byte_level(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    pieces = tokenizer.convert_ids_to_tokens(list(ids))
    return [
        piece if i in special else readable_token(piece, byte_level)
        for i, piece in zip(ids, pieces, strict=True)
    ]
