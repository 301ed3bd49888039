"""Example prompts that suit the model in the sidebar: Python for the bundled model (it learned
from Python source), English for SmolLM2 and hub models. Each shows a phenomenon on purpose."""

from __future__ import annotations

from pathlib import Path

PYTHON = {
    "A function written twice (induction)": (
        "def moving_average(values, window):\n"
        "    total = sum(values[:window])\n"
        "    return total / window\n\n"
        "def moving_average(values, window):\n"
        "    total = sum(values[:window])\n"
        "    return total / window\n"
    ),
    "A small class (previous and duplicate tokens)": (
        "class Counter:\n"
        "    def __init__(self):\n"
        "        self.count = 0\n\n"
        "    def add(self, amount=1):\n"
        "        self.count += amount\n"
        "        return self.count\n"
    ),
    "Random letters, twice": "q x f k z m w p q x f k z m w p",
}

_FERRY = (
    "The ferry leaves the harbour at seven in the morning and comes back before dark. On "
    "calm days the crossing takes forty minutes; when the wind rises it can take twice as "
    "long, and the crew hands out blankets to the passengers on the open deck. "
)

CORPUS = (
    Path(__file__).resolve().parents[2] / "models" / "heads" / "finding" / "corpora" / "english.txt"
)
PASSAGE_CHARS = 4_400  # about 1,000 tokens of English prose for byte-level BPE tokenizers


def passage_twice(chars: int = PASSAGE_CHARS) -> str:
    """The bundled English passages up to about ``chars`` characters, written twice: every token
    of the second copy has an earlier copy about 1,000 tokens back, where induction heads look."""
    text = ""
    for paragraph in CORPUS.read_text(encoding="utf-8").split("\n\n"):
        if len(text) >= chars:
            break
        text += paragraph.strip() + " "
    return (text + text).strip()


ENGLISH = {
    "A sentence, repeated (induction)": (
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."
    ),
    "Names (duplicate tokens, the IOI task)": (
        "When Mary and John went to the store, John gave a drink to Mary."
    ),
    "A paragraph, twice (induction, sinks)": _FERRY * 2,
    "A passage, twice (about 2,000 tokens)": passage_twice(),
    "A chat turn (chat template)": (
        "<|im_start|>user\nWhy do transformers divide q·k by the square root of d_k?<|im_end|>\n"
        "<|im_start|>assistant\n"
    ),
    "Random letters, twice": "q x f k z m w p q x f k z m w p",
}


def examples_for(kind: str) -> dict[str, str]:
    """Example prompts for a model source kind (see :class:`models.model.spec.ModelSpec`)."""
    return PYTHON if kind == "bundled" else ENGLISH


def default_prompt(kind: str) -> str:
    return next(iter(examples_for(kind).values()))
