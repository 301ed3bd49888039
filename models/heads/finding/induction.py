"""Repeated random tokens and the scores measured on them.

The sequence is ``[start, r_1..r_L, r_1..r_L, end]``: ``start`` and ``end`` are the special
tokens the model's tokenizer wraps text in (BOS for the bundled GPT-2, [CLS] ... [SEP] for BERT,
nothing for a model that adds none), ``r`` are drawn uniformly from the ordinary vocabulary
with a fixed seed. An induction head at query ``q`` in the second span looks at the token that
followed ``q``'s earlier copy.

Memory: every layer's patterns of one sequence are ``layer x head_index x n^2`` floats (1 GB for
SmolLM2 at ``L = 500``), so the batch runs in chunks of sequences and each layer's patterns are
scored inside the forward pass, as the layer produces them, then dropped. The peak grows with
the chunk and one layer, not with the batch or the depth (:func:`repeated_peak_bytes`); the
scores are the same whatever the chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int

from models.cost import Cost, device_of
from models.errors import UserError
from models.heads.cost import forward_peak_bytes, layer_pattern_bytes
from models.heads.finding.scores import (
    current_token_score,
    duplicate_token_score,
    induction_score,
    previous_token_score,
)
from models.model.facts import ModelFacts
from models.model.forward import pattern_hook, run_with_hooks
from models.model.handle import ModelHandle
from models.model.weights import bridge_tokens, vocab_size
from models.progress import Progress, quiet

DEFAULT_SEQ_LEN = 50
DEFAULT_BATCH = 8
DEFAULT_SEED = 0
MAX_BATCH = 64
CHUNK_BYTES = 512 * 2**20  # working set one chunk of sequences may take by default
MAX_SPECIAL = 3  # special tokens a frame adds at most ([CLS] ... [SEP], BOS, ...)
SCORED_PER_SECOND = 2e8  # pattern entries the numpy scoring reads per second, per pass
SCORING_PASSES = 6  # times the scoring reads a layer's patterns (copy, gathers, duplicates)
REPEATED_SCORES = ("induction", "previous_token", "duplicate_token", "current_token")
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

    ids: Int[torch.Tensor, "batch pos"]
    prefix_len: int
    seq_len: int
    n_vocab_drawn: int


@dataclass(frozen=True)
class RepeatedScores:
    """Scores on repeated random tokens, ``layer head_index``, averaged over the batch.

    ``induction_per_sequence`` is ``batch layer head_index``: the induction score of each
    sequence, whose mean over the batch is ``induction``.
    """

    induction: Float[np.ndarray, "layer head_index"]
    previous_token: Float[np.ndarray, "layer head_index"]
    duplicate_token: Float[np.ndarray, "layer head_index"]
    current_token: Float[np.ndarray, "layer head_index"]
    seq_len: int
    batch: int
    seed: int
    n_vocab_drawn: int
    induction_per_sequence: Float[np.ndarray, "batch layer head_index"] | None = None


def ordinary_token_ids(tokenizer: Any, d_vocab: int) -> list[int]:
    """Ids of vocabulary entries that stand for text: no special or placeholder tokens.

    Args:
        tokenizer: a Hugging Face tokenizer.
        d_vocab: the model's vocabulary size (ids at or above it have no embedding).
    """
    n = min(len(tokenizer), d_vocab)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
    return [
        i
        for i, piece in enumerate(pieces)
        if i not in special and piece is not None and not _PLACEHOLDER.match(piece)
    ]


def special_frame(model: ModelHandle) -> tuple[list[int], list[int]]:
    """The special tokens the model puts before and after a text (e.g. ``[101]``, ``[102]``)."""
    probe = "hello world"
    full = bridge_tokens(model, probe)
    plain = list(model.tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    return [], []


def repeated_tokens(
    model: ModelHandle,
    seq_len: int = DEFAULT_SEQ_LEN,
    batch: int = DEFAULT_BATCH,
    seed: int = DEFAULT_SEED,
) -> RepeatedTokens:
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
        raise ScoreError(
            f"{model.facts.name} reads at most {model.facts.n_ctx} tokens, so the "
            f"repeated span can be at most {longest} tokens long."
        )
    ordinary = torch.tensor(ordinary_token_ids(model.tokenizer, vocab_size(model)))
    if len(ordinary) < 2:
        raise ScoreError("The vocabulary has no ordinary tokens to draw from.")
    gen = torch.Generator().manual_seed(seed)
    span = ordinary[torch.randint(len(ordinary), (batch, seq_len), generator=gen)]
    parts = [
        torch.tensor([prefix] * batch, dtype=torch.long).reshape(batch, len(prefix)),
        span,
        span,
        torch.tensor([suffix] * batch, dtype=torch.long).reshape(batch, len(suffix)),
    ]
    return RepeatedTokens(
        ids=torch.cat(parts, dim=1),
        prefix_len=len(prefix),
        seq_len=seq_len,
        n_vocab_drawn=len(ordinary),
    )


# --- cost -----------------------------------------------------------------------------------


def repeated_positions(seq_len: int, n_special: int = MAX_SPECIAL) -> int:
    """Tokens of one ``[start, r, r, end]`` sequence (``n_special``: the frame's size)."""
    return 2 * seq_len + n_special


def sequence_bytes(facts: ModelFacts, vocab: int, n_tokens: int) -> int:
    """Working set one sequence adds to a chunk: its forward pass and the scoring of one layer
    (the layer's patterns copied to the CPU, and the duplicate-token rows they are masked to)."""
    scoring = 2 * layer_pattern_bytes(facts, n_tokens) + n_tokens * n_tokens
    return forward_peak_bytes(facts, vocab, n_tokens) + scoring


def default_chunk(facts: ModelFacts, vocab: int, seq_len: int, budget: int = CHUNK_BYTES) -> int:
    """The most sequences one chunk holds within ``budget`` bytes (at least one)."""
    per_sequence = sequence_bytes(facts, vocab, repeated_positions(seq_len))
    return max(1, min(MAX_BATCH, budget // per_sequence))


def repeated_peak_bytes(
    facts: ModelFacts, vocab: int, seq_len: int, batch: int, chunk: int | None = None
) -> int:
    """Upper bound on the bytes :func:`measure_repeated` needs beyond the weights.

    One chunk's working set (:func:`sequence_bytes` per sequence: every pattern is
    ``head_index x n^2`` floats of one layer at a time) plus the per-sequence scores it keeps
    (``batch x layer x head_index`` floats of each score).

    Args:
        facts: the model's shape.
        vocab: its vocabulary size (the logits of a chunk are ``chunk x n x vocab``).
        seq_len: L, the span length.
        batch: how many sequences.
        chunk: sequences per forward pass; None for :func:`default_chunk`.
    """
    chunk = min(batch, chunk or default_chunk(facts, vocab, seq_len))
    kept = len(REPEATED_SCORES) * batch * facts.n_total_heads * 8
    return chunk * sequence_bytes(facts, vocab, repeated_positions(seq_len)) + kept


def repeated_estimate(
    model: ModelHandle, seq_len: int, batch: int, chunk: int | None = None
) -> Cost:
    """The cost of :func:`measure_repeated` on ``model``, before it runs: the forward passes,
    and the NumPy scoring of every layer's patterns (:data:`SCORING_PASSES` reads of each
    entry) as fixed seconds."""
    facts = model.facts
    n = repeated_positions(seq_len)
    entries = batch * facts.n_total_heads * n * n
    return Cost(
        flops=batch * facts.forward_flops(n),
        peak_bytes=repeated_peak_bytes(facts, facts.d_vocab, seq_len, batch, chunk),
        overhead_s=SCORING_PASSES * entries / SCORED_PER_SECOND,
        device=device_of(model.spec.device),
    )


# --- measurement ----------------------------------------------------------------------------


def layer_scorer(
    tokens: RepeatedTokens, rows: slice, out: dict[str, np.ndarray], layer: int
) -> Callable[..., None]:
    """A pattern hook that scores layer ``layer`` of the sequences ``rows`` into ``out``.

    ``out[name]`` is ``batch layer head_index``; the hook reads the ``batch head_index
    query_pos key_pos`` pattern the layer has just computed and keeps only the scores.
    """
    ids = tokens.ids[rows].numpy()

    def hook(pattern: torch.Tensor, hook: object = None) -> None:
        values = pattern.detach().to("cpu", torch.float32).numpy()
        out["induction"][rows, layer] = induction_score(values, tokens.seq_len, tokens.prefix_len)
        out["previous_token"][rows, layer] = previous_token_score(values)
        out["current_token"][rows, layer] = current_token_score(values)
        out["duplicate_token"][rows, layer] = np.stack(
            [duplicate_token_score(values[b], ids[b]) for b in range(len(ids))]
        )

    return hook


def measure_repeated(
    model: ModelHandle,
    seq_len: int = DEFAULT_SEQ_LEN,
    batch: int = DEFAULT_BATCH,
    seed: int = DEFAULT_SEED,
    chunk: int | None = None,
    progress: Progress = quiet,
) -> RepeatedScores:
    """Run the repeated random tokens through ``model`` and score every head.

    Args:
        model: a loaded model (each forward pass takes its lock).
        seq_len: L, the span length.
        batch: how many random sequences to average over.
        seed: seed of the token draw.
        chunk: sequences per forward pass (None: as many as :data:`CHUNK_BYTES` allow); the
            scores do not depend on it, the peak memory does (:func:`repeated_peak_bytes`).
        progress: ``progress(fraction, text)`` once per chunk; may raise to stop.

    Raises:
        ScoreError: for settings the model cannot run.
    """
    tokens = repeated_tokens(model, seq_len, batch, seed)
    chunk = max(1, min(batch, chunk or default_chunk(model.facts, model.facts.d_vocab, seq_len)))
    n_layers = model.facts.n_layers
    shape = (batch, n_layers, model.facts.n_heads)
    out = {name: np.full(shape, np.nan) for name in REPEATED_SCORES}
    for start in range(0, batch, chunk):
        rows = slice(start, min(start + chunk, batch))
        progress(start / batch, f"repeated tokens: sequences {start + 1}-{rows.stop} of {batch}")
        hooks = [
            (pattern_hook(layer), layer_scorer(tokens, rows, out, layer))
            for layer in range(n_layers)
        ]
        run_with_hooks(model, tokens.ids[rows], hooks, return_type=None)
    if np.isnan(out["previous_token"]).all(axis=(0, 2)).any():
        raise ScoreError(f"{model.facts.name} did not show its attention pattern in every layer.")
    progress(1.0, "done")
    return RepeatedScores(
        induction=out["induction"].mean(axis=0),
        previous_token=out["previous_token"].mean(axis=0),
        duplicate_token=out["duplicate_token"].mean(axis=0),
        current_token=out["current_token"].mean(axis=0),
        induction_per_sequence=out["induction"],
        seq_len=seq_len,
        batch=batch,
        seed=seed,
        n_vocab_drawn=tokens.n_vocab_drawn,
    )
