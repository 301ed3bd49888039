"""Run a prompt through a loaded model and keep every head's attention pattern.

The result, :class:`AttentionRun`, holds only NumPy arrays and plain Python values, so it can be
cached and shared between sessions without holding the model or an ActivationCache.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.capture.hooked import capture_hooked
from models.capture.overview import Arithmetic
from models.capture.store import (
    DensePatterns,
    FactoredPatterns,
    PatternStore,
    iter_layers,
    read_only,
)
from models.capture.streaming import stream
from models.model.facts import DENSE_LIMIT_BYTES, ModelFacts
from models.model.forward import every_layer, pattern_hook, run_hooks, tokenize
from models.model.loading import LoadedModel
from models.model.spec import ModelSpec
from models.model.tokens import readable_tokens
from models.progress import Progress, part, quiet
from models.shapes import HeadPattern, LayerPatterns, PatternStack, TokenIds

CapturePath = Literal["dense", "fused", "hooks", "shortened"]


@dataclass(frozen=True)
class AttentionRun:
    """Every head's attention on one prompt.

    Attributes:
        prompt: the text as typed.
        token_ids: ids fed to the model, special tokens included.
        tokens: readable label of each position.
        store: the patterns, held whole or rebuilt on demand (see :mod:`models.capture.store`).
        facts: the model's shape and attention behaviour.
        first_is_special: position 0 is a BOS / [CLS] token the tokenizer added.
        n_prompt_tokens: how many tokens the full prompt had before truncation.
        spec: the model the run was captured on.
        path: how the patterns were read: ``dense`` (every pattern through the bridge's hooks),
            ``fused`` (one pass through the model's own fused attention, in its own dtype),
            ``hooks`` (q and k through the bridge's hooks) or ``shortened`` (a dense capture of
            the first tokens only, when nothing else could read this model).
        fallback: why the fused pass was not used, when a long prompt fell back (for the page).
    """

    prompt: str
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    store: PatternStore
    facts: ModelFacts
    first_is_special: bool
    n_prompt_tokens: int
    spec: ModelSpec | None = None
    path: CapturePath = "dense"
    fallback: str | None = None

    @property
    def dtype(self) -> str:
        """The dtype the model ran in (q and k are kept, and patterns rebuilt, in float32)."""
        return self.spec.dtype if self.spec is not None else "float32"

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        """Memory the stored patterns (or q, k, LSE and thumbnails) take."""
        return self.store.nbytes

    @property
    def truncated(self) -> bool:
        return self.n_prompt_tokens > self.n_tokens

    @property
    def factored(self) -> bool:
        return isinstance(self.store, FactoredPatterns)

    @property
    def patterns(self) -> PatternStack:
        """The whole ``layer head_index query_pos key_pos`` stack (built if factored: large)."""
        if isinstance(self.store, DensePatterns):
            return self.store.stack
        return np.stack(list(self.iter_layers()))

    def layer_patterns(self, layer: int) -> LayerPatterns:
        """Every head's pattern of one layer."""
        return self.store.layer(layer)

    def iter_layers(self) -> Iterator[LayerPatterns]:
        """Layer after layer, holding one at a time: for streaming analyses of long prompts."""
        return iter_layers(self.store, self.facts.n_layers)

    def pattern(self, layer: int, head: int) -> HeadPattern:
        """One head's whole pattern."""
        return self.store.window(layer, head, slice(None), slice(None))

    def window(self, layer: int, head: int, rows: slice, cols: slice) -> HeadPattern:
        """Part of one head's pattern: ``rows`` queries by ``cols`` keys."""
        return self.store.window(layer, head, rows, cols)

    def labels(self) -> list[str]:
        """Axis labels ``(i) token`` that stay distinct when a token repeats."""
        return [f"({i}) {tok}" for i, tok in enumerate(self.tokens)]


def capture_dense(model: LoadedModel, ids: TokenIds) -> DensePatterns:
    """Every layer's ``hook_pattern``, stacked.

    Args:
        model: the loaded model.
        ids: ``1 pos`` token ids.

    Returns:
        The whole stack held at once (``n_layers * n_heads * pos^2`` float32).
    """
    names = every_layer(pattern_hook, model.facts.n_layers)
    acts = run_hooks(model, ids, names)
    return DensePatterns(read_only(np.stack([acts[name][0].numpy() for name in names])))


def capture(
    model: LoadedModel,
    prompt: str,
    max_tokens: int | None = None,
    dense_limit: int = DENSE_LIMIT_BYTES,
    progress: Progress = quiet,
    overview_arithmetic: Arithmetic = "float32",
) -> AttentionRun:
    """Every head's pattern on ``prompt``.

    Patterns are held whole when they take at most ``dense_limit`` bytes and the model runs in
    float32. Longer prompts, and every prompt on a bfloat16 / float16 model (whose own patterns
    are rounded to its dtype), keep q, k and the float32 log-sum-exp instead: first through the
    model's own fused attention
    (:func:`models.capture.streaming.capture_streaming`), else through the bridge's hooks
    (:func:`models.capture.hooked.capture_hooked`), else a shorter dense capture.

    Args:
        model: a loaded model.
        prompt: the text; special tokens are added as the model's tokenizer does.
        max_tokens: an optional cap below the model's context length.
        dense_limit: the most bytes the full pattern stack may take.
        progress: called per layer for long prompts; may raise Cancelled.
        overview_arithmetic: how the fused pass computes overviews in a low-precision model
            (``float32``: exact; ``model``: faster, within a stated bound; see
            :func:`models.capture.overview.layer_overview`).

    Returns:
        An :class:`AttentionRun`.

    Raises:
        PromptError: for an empty or oversized prompt.
    """
    ids, n_full = tokenize(model, prompt, max_tokens)
    store: PatternStore | None = None
    path: CapturePath = "dense"
    fallback = None
    # a low-precision model's own patterns are rounded: the fused pass rebuilds them in float32
    low_precision = model.spec.dtype != "float32"
    if low_precision or model.facts.pattern_bytes(int(ids.shape[1])) > dense_limit:
        store, fallback = stream(model, ids, part(progress, 0.0, 0.95), overview_arithmetic)
        path = "fused"
        if store is None:
            progress(0.0, f"reading q and k through the bridge's hooks (slower): {fallback}")
            store, path = capture_hooked(model, ids), "hooks"
        if store is None:  # q/k hooks do not rebuild the scores: keep what fits whole
            fits = max(1, int((dense_limit / model.facts.pattern_bytes(1)) ** 0.5))
            path = "shortened" if ids.shape[1] > fits else "dense"
            ids = ids[:, :fits]
    if store is None:
        store = capture_dense(model, ids)
    id_list = [int(i) for i in ids[0]]
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    return AttentionRun(
        prompt=prompt,
        token_ids=tuple(id_list),
        tokens=tuple(readable_tokens(model.tokenizer, id_list)),
        store=store,
        facts=model.facts,
        first_is_special=id_list[0] in special,
        n_prompt_tokens=n_full,
        spec=model.spec,
        path=path,
        fallback=fallback,
    )
