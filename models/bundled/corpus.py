"""The bundled model's training text and tokenizer recipe, shared by its training script and by
the app (which rebuilds the model's held-out split as its bundled corpus).

The text is the ``.py`` sources of the running Python's standard library (present on every
machine with Python), read in sorted path order with test suites skipped; the tokenizer is a
byte-level BPE trained on it.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

BOS = "<|endoftext|>"


def read_corpus(max_chars: int) -> str:
    """Standard-library Python source, sorted by path, test packages skipped."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    total = 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if "site-packages" in rel or "test" in rel or "tests" in rel or "idle_test" in rel:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "\n".join(parts)[:max_chars]


def train_tokenizer(text: str, vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of ``vocab_size`` pieces trained on ``text``, its one special
    token :data:`BOS` serving as BOS, EOS and UNK."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    chunks = (text[i : i + 100_000] for i in range(0, len(text), 100_000))
    tok.train_from_iterator(chunks, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=BOS, unk_token=BOS, model_max_length=10**6
    )
