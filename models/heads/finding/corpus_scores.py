"""Head scores over a corpus: each text scored on its own, then averaged with a spread, and the
passages and positions where each head fires most.

Per text (cut to ``max_tokens``), forward passes give every head's pattern, a few layers at a
time (:func:`layer_groups`), and the functions of :mod:`models.heads.finding.scores` give one
number per head: previous-, duplicate- and current-token, sink alpha on the first token, the
strongest sink anywhere, induction on natural text (weight on the token after the previous
copy of the current token), and how a head spreads its attention: the rows' entropy and the
attention-weighted distance back. Heads of attention variants add what only they have: a
learned sink's mean weight (their entropy is then over the full row, the sink included) and the
weight at a sliding window's edge; a linear-attention layer has no pattern and is left unscored.
The row-wise scores read the layer's patterns a band of rows at a time, so they add no
pattern-sized temporaries to the pass. Every text counts once in the mean
(:mod:`models.heads.finding.spread`), whatever its length. A one-text corpus is the command
line's table for one text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int

from models.cost import Cost, device_of
from models.heads.cost import forward_peak_bytes, layer_pattern_bytes
from models.heads.finding.scores import (
    current_token_score,
    distance_score,
    duplicate_mask,
    duplicate_token_score,
    entropy_score,
    induction_targets,
    learned_sink_score,
    previous_token_score,
    row_score_bytes,
    sink_alphas,
    sink_score,
    text_induction_score,
    top_sink,
)
from models.heads.finding.spread import Spread, spread
from models.heads.names import EXAMPLE_SCORES, TEXT_SCORES, ExampleScore
from models.model.facts import ModelFacts
from models.model.forward import pattern_hook, run_hooks, tokenize
from models.model.handle import ModelHandle
from models.model.tokens import readable_tokens
from models.model.variants import layer_variants
from models.model.variants.windows import edge_weight
from models.progress import Progress, quiet

TOP_K = 8
PATTERN_BYTES = 512 * 2**20  # patterns held at once per pass
SCORING_COPIES = 3  # pattern-sized temporaries the scoring of one layer makes at most


@dataclass(frozen=True)
class Example:
    """One place a head fires: text ``text``, query ``query`` looking at key ``key``.

    For the sink score the example is a whole text: ``query`` is -1 and ``key`` 0.
    """

    text: int
    query: int
    key: int
    value: float


@dataclass(frozen=True)
class TopExamples:
    """The ``TOP_K`` strongest places per head; arrays are ``layer head_index TOP_K``."""

    value: np.ndarray
    text: np.ndarray
    query: np.ndarray
    key: np.ndarray

    def of(self, layer: int, head: int) -> list[Example]:
        """The head's examples, strongest first."""
        keep = np.isfinite(self.value[layer, head])
        return [
            Example(int(t), int(q), int(k), float(v))
            for t, q, k, v in zip(
                self.text[layer, head][keep],
                self.query[layer, head][keep],
                self.key[layer, head][keep],
                self.value[layer, head][keep],
                strict=True,
            )
        ]


@dataclass(frozen=True)
class CorpusScores:
    """Every head's scores over a corpus.

    Attributes:
        spreads: score name (:data:`TEXT_SCORES`) -> :class:`Spread` over texts.
        examples: score name (:data:`EXAMPLE_SCORES`) -> :class:`TopExamples`.
        tokens: the readable tokens of each text as scored (after any cut).
        n_cut: how many texts were cut to ``max_tokens``.
        top_sink_pos: per text, the key position of each head's strongest sink (the one
            ``top_sink_alpha`` measured).
    """

    spreads: dict[str, Spread]
    examples: dict[str, TopExamples]
    tokens: tuple[tuple[str, ...], ...]
    n_cut: int
    top_sink_pos: Int[np.ndarray, "text layer head_index"]

    @property
    def n_texts(self) -> int:
        return len(self.tokens)

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


def position_values(
    pattern: np.ndarray, token_ids: Sequence[int], score: ExampleScore, causal: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where one layer's heads fire for ``score``, query by query.

    Args:
        pattern: ``head_index query_pos key_pos``.
        token_ids: the ``query_pos`` ids.
        score: one of :data:`EXAMPLE_SCORES`.
        causal: whether the model masks future keys (for the sink alpha).

    Returns:
        ``(values, queries, keys)``: values and keys ``head_index n``, queries ``n``; the sink
        score gives one value per head (query -1, key 0).
    """
    n = pattern.shape[-1]
    heads = pattern.shape[0]
    if score == "sink":
        return sink_score(pattern, causal)[:, None], np.array([-1]), np.zeros((heads, 1), int)
    if score in ("previous_token", "current_token"):
        queries = np.arange(1, n)
        keys = queries - 1 if score == "previous_token" else queries
        return pattern[:, queries, keys], queries, np.broadcast_to(keys, (heads, len(keys)))
    if score == "induction_text":
        targets = induction_targets(token_ids)
        queries = np.flatnonzero(targets >= 0)
        keys = targets[queries]
        return pattern[:, queries, keys], queries, np.broadcast_to(keys, (heads, len(keys)))
    dup = duplicate_mask(token_ids)
    queries = np.flatnonzero(dup.any(axis=-1))
    on_copies = pattern[:, queries] * dup[queries]
    return on_copies.sum(axis=-1), queries, on_copies.argmax(axis=-1)


def merge_top(
    best: dict[str, np.ndarray],
    layer: int,
    text: int,
    values: np.ndarray,
    queries: np.ndarray,
    keys: np.ndarray,
) -> None:
    """Fold one text's ``head_index n`` candidates into ``best`` (``layer head_index TOP_K``)."""
    if values.shape[-1] == 0:
        return
    cand_v = np.concatenate([best["value"][layer], np.nan_to_num(values, nan=-np.inf)], axis=1)
    heads = values.shape[0]
    cand_t = np.concatenate([best["text"][layer], np.full(values.shape, text)], axis=1)
    cand_q = np.concatenate([best["query"][layer], np.broadcast_to(queries, values.shape)], axis=1)
    cand_k = np.concatenate([best["key"][layer], keys], axis=1)
    order = np.argsort(-cand_v, axis=1, kind="stable")[:, :TOP_K]
    rows = np.arange(heads)[:, None]
    for name, cand in (("value", cand_v), ("text", cand_t), ("query", cand_q), ("key", cand_k)):
        best[name][layer] = cand[rows, order]


def layer_groups(model: ModelHandle, n_tokens: int) -> list[list[int]]:
    """Layers grouped so that one pass holds at most :data:`PATTERN_BYTES` of patterns."""
    size = max(1, PATTERN_BYTES // max(layer_pattern_bytes(model.facts, n_tokens), 1))
    layers = list(range(model.facts.n_layers))
    return [layers[i : i + size] for i in range(0, len(layers), size)]


def text_scores(
    patterns: Float[np.ndarray, "*layer head_index query_pos key_pos"],
    token_ids: Sequence[int],
    causal: bool,
    learned_sink: bool = False,
    window: int | None = None,
) -> dict[str, np.ndarray]:
    """Every head's scores on one text: :data:`TEXT_SCORES` and ``top_sink_pos``.

    Args:
        patterns: ``layer head_index query_pos key_pos`` (or one layer's ``head_index ...``).
        token_ids: the ``query_pos`` ids the patterns were computed on.
        causal: whether the model masks future keys.
        learned_sink: the heads have learned sinks: the entropy is over the full row (the sink
            included) and ``learned_sink`` is the mean weight on it (NaN otherwise).
        window: a sliding layer's window: ``window_edge`` is the mean weight on the oldest key
            each query still sees (NaN without a window, or before it cuts anything).

    Returns:
        Score name -> one value per head (the leading axes of ``patterns``).
    """
    alphas = sink_alphas(patterns, causal)
    position, alpha = top_sink(alphas, causal)
    heads = np.asarray(patterns).shape[:-2]
    return {
        "induction_text": text_induction_score(patterns, token_ids),
        "previous_token": previous_token_score(patterns),
        "duplicate_token": duplicate_token_score(patterns, token_ids),
        "current_token": current_token_score(patterns),
        "sink": alphas[..., 0],
        "top_sink_alpha": alpha,
        "top_sink_pos": position,
        "entropy": entropy_score(patterns, learned_sink),
        "distance": distance_score(patterns),
        "learned_sink": learned_sink_score(patterns) if learned_sink else np.full(heads, np.nan),
        "window_edge": edge_weight(patterns, window),
    }


def score_peak_bytes(facts: ModelFacts, vocab: int, n_tokens: int) -> int:
    """Upper bound on the bytes :func:`score_corpus` needs beyond the weights, for texts of at
    most ``n_tokens`` tokens: one pass's layer group of patterns, that pass's own working set,
    the scoring's temporaries of one layer and the row-wise scores' chunk."""
    layer = layer_pattern_bytes(facts, n_tokens)
    group = min(facts.n_layers, max(1, PATTERN_BYTES // max(layer, 1))) * layer
    rows = row_score_bytes(facts.n_heads, n_tokens, n_tokens)
    return group + forward_peak_bytes(facts, vocab, n_tokens) + SCORING_COPIES * layer + rows


def score_estimate(model: ModelHandle, sizes: Sequence[int]) -> Cost:
    """The cost of :func:`score_corpus` on texts of ``sizes`` tokens (each already cut to
    ``max_tokens``), before it runs; a long text costs one pass per layer group."""
    facts = model.facts
    return Cost(
        flops=sum(len(layer_groups(model, n)) * facts.forward_flops(n) for n in sizes),
        peak_bytes=score_peak_bytes(facts, facts.d_vocab, max(sizes, default=1)),
        device=device_of(model.spec.device),
    )


def score_corpus(
    model: ModelHandle,
    texts: Sequence[str],
    max_tokens: int | None = None,
    progress: Progress = quiet,
) -> CorpusScores:
    """Score every head on every text; see the module docstring.

    Args:
        model: a loaded model.
        texts: the passages.
        max_tokens: most tokens per text (special tokens included); the context when None.
        progress: ``progress(fraction, text)``; may raise to stop.

    Raises:
        models.errors.PromptError: an empty or oversized text.
    """
    shape = (model.facts.n_layers, model.facts.n_heads)
    encoded = [tokenize(model, text, max_tokens) for text in texts]
    sizes = np.array([ids.shape[1] for ids, _ in encoded], dtype=float)
    done = np.concatenate([[0.0], np.cumsum(sizes**1.2)]) / np.sum(sizes**1.2)
    per_text: dict[str, np.ndarray] = {
        name: np.full((len(texts), *shape), np.nan) for name in TEXT_SCORES
    }
    top_pos = np.zeros((len(texts), *shape), dtype=int)
    best = {
        name: {
            "value": np.full((*shape, TOP_K), -np.inf),
            "text": np.zeros((*shape, TOP_K), int),
            "query": np.zeros((*shape, TOP_K), int),
            "key": np.zeros((*shape, TOP_K), int),
        }
        for name in EXAMPLE_SCORES
    }
    tokens = []
    variants = layer_variants(model)
    for t, (ids, _n_full) in enumerate(encoded):
        progress(done[t], f"scoring text {t + 1} of {len(texts)} ({ids.shape[1]} tokens)")
        id_list = [int(i) for i in ids[0]]
        tokens.append(tuple(readable_tokens(model.tokenizer, id_list)))
        for group in layer_groups(model, ids.shape[1]):
            group = [layer for layer in group if variants[layer].softmax]  # linear: no pattern
            if not group:
                continue
            names = [pattern_hook(layer) for layer in group]
            acts = run_hooks(model, ids, names)
            for layer, name in zip(group, names, strict=True):
                pattern = acts.pop(name)[0].numpy()  # head_index query_pos key_pos
                found = text_scores(
                    pattern,
                    id_list,
                    model.facts.causal,
                    variants[layer].sinks,
                    variants[layer].window,
                )
                for score, values in found.items():
                    if score == "top_sink_pos":
                        top_pos[t, layer] = values
                    else:
                        per_text[score][t, layer] = values
                for score in EXAMPLE_SCORES:
                    merge_top(
                        best[score],
                        layer,
                        t,
                        *position_values(pattern, id_list, score, model.facts.causal),
                    )
    progress(1.0, "done")
    return CorpusScores(
        spreads={name: spread(values) for name, values in per_text.items()},
        examples={name: TopExamples(**arrays) for name, arrays in best.items()},
        tokens=tuple(tokens),
        n_cut=sum(1 for ids, n_full in encoded if n_full > ids.shape[1]),
        top_sink_pos=top_pos,
    )
