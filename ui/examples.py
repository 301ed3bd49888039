"""Example prompts that suit the model in the sidebar: Python for the bundled model (it learned
from Python source), English for SmolLM2 and hub models. Each shows a phenomenon on purpose."""

from __future__ import annotations

PYTHON = {
    "A function written twice (induction)": (
        "def moving_average(values, window):\n"
        "    total = sum(values[:window])\n"
        "    return total / window\n\n"
        "def moving_average(values, window):\n"
        "    total = sum(values[:window])\n"
        "    return total / window\n"),
    "A small class (previous and duplicate tokens)": (
        "class Counter:\n"
        "    def __init__(self):\n"
        "        self.count = 0\n\n"
        "    def add(self, amount=1):\n"
        "        self.count += amount\n"
        "        return self.count\n"),
    "Random letters, twice": "q x f k z m w p q x f k z m w p",
}

_FERRY = ("The ferry leaves the harbour at seven in the morning and comes back before dark. On "
          "calm days the crossing takes forty minutes; when the wind rises it can take twice as "
          "long, and the crew hands out blankets to the passengers on the open deck. ")

ENGLISH = {
    "A sentence, repeated (induction)": (
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy "
        "dog."),
    "Names (duplicate tokens, the IOI task)": (
        "When Mary and John went to the store, John gave a drink to Mary."),
    "A paragraph, twice (induction, sinks)": _FERRY * 2,
    "A chat turn (chat template)": (
        "<|im_start|>user\nWhy do transformers divide q·k by the square root of d_k?<|im_end|>\n"
        "<|im_start|>assistant\n"),
    "Random letters, twice": "q x f k z m w p q x f k z m w p",
}


def examples_for(kind: str) -> dict[str, str]:
    """Example prompts for a model source kind (see :class:`models.model.spec.ModelSpec`)."""
    return PYTHON if kind == "bundled" else ENGLISH


def default_prompt(kind: str) -> str:
    return next(iter(examples_for(kind).values()))
