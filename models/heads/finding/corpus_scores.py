"""Head scores over a corpus: each text scored on its own, then averaged with a spread, and the
passages and positions where each head fires most.

Per text (cut to ``max_tokens``), one forward pass gives every head's pattern, and the
functions of :mod:`models.heads.scores` give one number per head: previous-, duplicate- and
current-token, sink alpha on the first token, the strongest sink anywhere, and induction on
natural text (weight on the token after the previous copy of the current token). Every text
counts once in the mean (:mod:`models.heads.spread`), whatever its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from models.heads.scores import (duplicate_mask, induction_targets, prompt_scores, sink_score,
                                 text_induction_score)
from models.heads.spread import Spread, spread
from models.model.forward import pattern_hook, run_hooks, tokenize
from models.model.loading import LoadedModel
from models.model.tokens import readable_tokens
from models.progress import Progress, quiet

TEXT_SCORES = ("induction_text", "previous_token", "duplicate_token", "current_token", "sink",
               "top_sink_alpha")
EXAMPLE_SCORES = ("induction_text", "previous_token", "duplicate_token", "current_token", "sink")
TOP_K = 8
PATTERN_BYTES = 512 * 2**20  # patterns held at once per pass


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
        return [Example(int(t), int(q), int(k), float(v)) for t, q, k, v in zip(
            self.text[layer, head][keep], self.query[layer, head][keep],
            self.key[layer, head][keep], self.value[layer, head][keep])]


@dataclass(frozen=True)
class CorpusScores:
    """Every head's scores over a corpus.

    Attributes:
        spreads: score name (:data:`TEXT_SCORES`) -> :class:`Spread` over texts.
        examples: score name (:data:`EXAMPLE_SCORES`) -> :class:`TopExamples`.
        tokens: the readable tokens of each text as scored (after any cut).
        n_cut: how many texts were cut to ``max_tokens``.
    """

    spreads: dict[str, Spread]
    examples: dict[str, TopExamples]
    tokens: tuple[tuple[str, ...], ...]
    n_cut: int

    @property
    def n_texts(self) -> int:
        return len(self.tokens)

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


def position_values(pattern: np.ndarray, token_ids: Sequence[int], score: str, causal: bool
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


def merge_top(best: dict[str, np.ndarray], layer: int, text: int, values: np.ndarray,
              queries: np.ndarray, keys: np.ndarray) -> None:
    """Fold one text's ``head_index n`` candidates into ``best`` (``layer head_index TOP_K``)."""
    if values.shape[-1] == 0:
        return
    cand_v = np.concatenate([best["value"][layer], np.nan_to_num(values, nan=-np.inf)], axis=1)
    heads = values.shape[0]
    cand_t = np.concatenate([best["text"][layer], np.full(values.shape, text)], axis=1)
    cand_q = np.concatenate([best["query"][layer],
                             np.broadcast_to(queries, values.shape)], axis=1)
    cand_k = np.concatenate([best["key"][layer], keys], axis=1)
    order = np.argsort(-cand_v, axis=1, kind="stable")[:, :TOP_K]
    rows = np.arange(heads)[:, None]
    for name, cand in (("value", cand_v), ("text", cand_t), ("query", cand_q), ("key", cand_k)):
        best[name][layer] = cand[rows, order]


def layer_groups(model: LoadedModel, n_tokens: int) -> list[list[int]]:
    """Layers grouped so that one pass holds at most :data:`PATTERN_BYTES` of patterns."""
    per_layer = model.facts.n_heads * n_tokens * n_tokens * 4
    size = max(1, PATTERN_BYTES // max(per_layer, 1))
    layers = list(range(model.facts.n_layers))
    return [layers[i:i + size] for i in range(0, len(layers), size)]


def text_scores(patterns: np.ndarray, token_ids: Sequence[int], causal: bool
                ) -> dict[str, np.ndarray]:
    """:data:`TEXT_SCORES` of every head on one text; ``patterns`` is ``layer head q k``."""
    scores = prompt_scores(patterns, token_ids, causal)
    out = {name: getattr(scores, name) for name in TEXT_SCORES if name != "induction_text"}
    out["induction_text"] = text_induction_score(patterns, token_ids)
    return out


def score_corpus(model: LoadedModel, texts: Sequence[str], max_tokens: int | None = None,
                 progress: Progress = quiet) -> CorpusScores:
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
    done = np.concatenate([[0.0], np.cumsum(sizes ** 1.2)]) / np.sum(sizes ** 1.2)
    per_text = {name: np.full((len(texts),) + shape, np.nan) for name in TEXT_SCORES}
    best = {name: {"value": np.full(shape + (TOP_K,), -np.inf), "text": np.zeros(
        shape + (TOP_K,), int), "query": np.zeros(shape + (TOP_K,), int), "key": np.zeros(
        shape + (TOP_K,), int)} for name in EXAMPLE_SCORES}
    tokens = []
    for t, (ids, _n_full) in enumerate(encoded):
        progress(done[t], f"scoring text {t + 1} of {len(texts)} ({ids.shape[1]} tokens)")
        id_list = [int(i) for i in ids[0]]
        tokens.append(tuple(readable_tokens(model.tokenizer, id_list)))
        for group in layer_groups(model, ids.shape[1]):
            names = [pattern_hook(layer) for layer in group]
            acts = run_hooks(model, ids, names)
            patterns = np.stack([acts[name][0].numpy() for name in names])
            for name, values in text_scores(patterns, id_list, model.facts.causal).items():
                per_text[name][t, group] = values
            for layer, pattern in zip(group, patterns):
                for name in EXAMPLE_SCORES:
                    merge_top(best[name], layer, t, *position_values(
                        pattern, id_list, name, model.facts.causal))
    progress(1.0, "done")
    return CorpusScores(
        spreads={name: spread(values) for name, values in per_text.items()},
        examples={name: TopExamples(**arrays) for name, arrays in best.items()},
        tokens=tuple(tokens),
        n_cut=sum(1 for ids, n_full in encoded if n_full > ids.shape[1]),
    )

