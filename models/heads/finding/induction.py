"""Repeated random tokens and the scores measured on them.

The sequence is ``[start, r_1..r_L, r_1..r_L, end]``: ``start`` and ``end`` are the special
tokens the model's tokenizer wraps text in (BOS for the bundled GPT-2, [CLS] ... [SEP] for BERT,
nothing for a model that adds none), ``r`` are drawn uniformly from the ordinary vocabulary
with a fixed seed. An induction head at query ``q`` in the second span looks at the token that
followed ``q``'s earlier copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from models.errors import UserError
from models.model.forward import every_layer, pattern_hook, run_hooks
from models.heads.scores import (current_token_score, duplicate_token_score, induction_score,
                                 previous_token_score)
from models.model.loading import LoadedModel

DEFAULT_SEQ_LEN = 50
DEFAULT_BATCH = 8
DEFAULT_SEED = 0
MAX_BATCH = 64
# Placeholder pieces that are in the vocabulary but never in real text: [unused7], <pad>, <|x|>.
_PLACEHOLDER = re.compile(r"^(\[[^\]]+\]|<\|?[^<>]*\|?>)$")


class ScoreError(UserError, ValueError):
    """A measurement cannot be made; ``str(err)`` is a message for the user."""


@dataclass(frozen=True)
class RepeatedTokens:
    """A batch of ``[start, r, r, end]`` sequences.

    Attributes:
        ids: ``batch pos`` token ids.
        prefix_len: how many special tokens come before the first span.
        seq_len: L, the span length.
        n_vocab_drawn: how many ordinary token ids the spans were drawn from.
    """

    ids: torch.Tensor
    prefix_len: int
    seq_len: int
    n_vocab_drawn: int


@dataclass(frozen=True)
class RepeatedScores:
    """Scores on repeated random tokens, ``layer head_index``, averaged over the batch.

    ``induction_per_sequence`` is ``batch layer head_index``: the induction score of each
    sequence, whose mean over the batch is ``induction``.
    """

    induction: np.ndarray
    previous_token: np.ndarray
    duplicate_token: np.ndarray
    current_token: np.ndarray
    seq_len: int
    batch: int
    seed: int
    n_vocab_drawn: int
    induction_per_sequence: np.ndarray | None = None


def ordinary_token_ids(tokenizer, d_vocab: int) -> list[int]:
    """Ids of vocabulary entries that stand for text: no special or placeholder tokens.

    Args:
        tokenizer: a Hugging Face tokenizer.
        d_vocab: the model's vocabulary size (ids at or above it have no embedding).
    """
    n = min(len(tokenizer), d_vocab)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
    return [i for i, piece in enumerate(pieces)
            if i not in special and piece is not None and not _PLACEHOLDER.match(piece)]


def special_frame(model: LoadedModel) -> tuple[list[int], list[int]]:
    """The special tokens the model puts before and after a text (e.g. ``[101]``, ``[102]``)."""
    probe = "hello world"
    full = [int(i) for i in model.bridge.to_tokens(probe)[0]]
    plain = list(model.tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    return [], []


def repeated_tokens(model: LoadedModel, seq_len: int = DEFAULT_SEQ_LEN,
                    batch: int = DEFAULT_BATCH, seed: int = DEFAULT_SEED) -> RepeatedTokens:
    """Seeded ``[start, r_1..r_L, r_1..r_L, end]`` sequences for ``model``.

    Raises:
        ScoreError: for a span or batch out of range, or a sequence longer than the context.
    """
    if seq_len < 2:
        raise ScoreError("The repeated span needs at least 2 tokens.")
    if not 1 <= batch <= MAX_BATCH:
        raise ScoreError(f"The batch size must be between 1 and {MAX_BATCH}.")
    prefix, suffix = special_frame(model)
    total = len(prefix) + 2 * seq_len + len(suffix)
    if total > model.facts.n_ctx:
        longest = (model.facts.n_ctx - len(prefix) - len(suffix)) // 2
        raise ScoreError(f"{model.facts.name} reads at most {model.facts.n_ctx} tokens, so the "
                         f"repeated span can be at most {longest} tokens long.")
    ordinary = torch.tensor(ordinary_token_ids(model.tokenizer, int(model.bridge.cfg.d_vocab)))
    if len(ordinary) < 2:
        raise ScoreError("The vocabulary has no ordinary tokens to draw from.")
    gen = torch.Generator().manual_seed(seed)
    span = ordinary[torch.randint(len(ordinary), (batch, seq_len), generator=gen)]
    parts = [torch.tensor([prefix] * batch, dtype=torch.long).reshape(batch, len(prefix)),
             span, span,
             torch.tensor([suffix] * batch, dtype=torch.long).reshape(batch, len(suffix))]
    return RepeatedTokens(ids=torch.cat(parts, dim=1), prefix_len=len(prefix), seq_len=seq_len,
                          n_vocab_drawn=len(ordinary))


def repeated_patterns(model: LoadedModel, tokens: RepeatedTokens) -> np.ndarray:
    """``batch layer head_index query_pos key_pos`` patterns of the repeated sequences."""
    names = every_layer(pattern_hook, model.facts.n_layers)
    acts = run_hooks(model, tokens.ids, names)
    return np.stack([acts[name].numpy() for name in names], axis=1)


def scores_on_repeated(patterns: np.ndarray, tokens: RepeatedTokens) -> dict[str, np.ndarray]:
    """Induction, previous-, duplicate- and current-token scores, averaged over the batch.

    Args:
        patterns: ``batch layer head_index query_pos key_pos``.
        tokens: the sequences the patterns were computed on.

    Returns:
        Score name -> ``layer head_index`` array, and ``induction_per_sequence``
        (``batch layer head_index``).
    """
    ids = tokens.ids.numpy()
    duplicate = np.stack([duplicate_token_score(patterns[b], ids[b])
                          for b in range(patterns.shape[0])])
    induction = induction_score(patterns, tokens.seq_len, tokens.prefix_len)
    return {
        "induction": induction.mean(axis=0),
        "induction_per_sequence": induction,
        "previous_token": previous_token_score(patterns).mean(axis=0),
        "duplicate_token": duplicate.mean(axis=0),
        "current_token": current_token_score(patterns).mean(axis=0),
    }


def measure_repeated(model: LoadedModel, seq_len: int = DEFAULT_SEQ_LEN,
                     batch: int = DEFAULT_BATCH, seed: int = DEFAULT_SEED) -> RepeatedScores:
    """Run the repeated random tokens through ``model`` and score every head.

    Args:
        model: a loaded model (the forward pass takes its lock).
        seq_len: L, the span length.
        batch: how many random sequences to average over.
        seed: seed of the token draw.

    Raises:
        ScoreError: for settings the model cannot run.
    """
    tokens = repeated_tokens(model, seq_len, batch, seed)
    scores = scores_on_repeated(repeated_patterns(model, tokens), tokens)
    return RepeatedScores(seq_len=seq_len, batch=batch, seed=seed,
                          n_vocab_drawn=tokens.n_vocab_drawn, **scores)
