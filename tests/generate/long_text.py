"""A prompt of a chosen token length, cut from the bundled English corpus (repeated as needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "models/heads/finding/corpora/english.txt"


def long_prompt(model: Any, n_tokens: int) -> str:
    """Text that the model's tokenizer reads as ``n_tokens`` tokens, its BOS included (give or
    take one where the decoded text joins two pieces)."""
    text = CORPUS.read_text(encoding="utf-8")
    tok = model.tokenizer
    while len(tok(text)["input_ids"]) < n_tokens:
        text = f"{text}\n\n{text}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    bos = 1 if model.facts.prepends_bos else 0
    return str(tok.decode(ids[: n_tokens - bos]))
