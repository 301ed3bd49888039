"""Run a prompt through a loaded model and keep every head's attention pattern.

The result, :class:`AttentionRun`, holds only NumPy arrays and plain Python values, so it can be
cached and shared between sessions without holding the model or an ActivationCache.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from jaxtyping import Float

from models.capture.extras import RunExtras
from models.capture.fidelity import Fidelity, linear_layer_error, measure, sample_rows, tolerance
from models.capture.hooked import capture_hooked
from models.capture.overview import Arithmetic
from models.capture.store import (
    DensePatterns,
    FactoredPatterns,
    PatternStore,
    SdpaCheck,
    iter_layers,
    read_only,
)
from models.capture.streaming import stream
from models.capture.variant_pass import capture_reference, capture_variants
from models.model.eager import run_eager
from models.model.facts import DENSE_LIMIT_BYTES, ModelFacts
from models.model.forward import every_layer, pattern_hook, run_hooks, tokenize
from models.model.handle import ModelHandle
from models.model.parity import parity_of
from models.model.spec import ModelSpec
from models.model.tokens import readable_tokens
from models.model.variants import AttentionKind, all_plain, layer_variants
from models.progress import Progress, part, quiet
from models.shapes import HeadPattern, LayerPatterns, PatternStack, TokenIds

FIDELITY_PREFIX = 128  # the eager pass it takes is at most a quarter of a 512-token capture
CapturePath = Literal["dense", "fused", "hooks", "shortened", "transformers"]


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
            ``hooks`` (q and k through the bridge's hooks), ``shortened`` (a dense capture of
            the first tokens only, when nothing else could read this model) or
            ``transformers`` (every pattern from transformers' own eager pass, when the
            bridge's logits disagree with it).
        fallback: why the fused pass was not used, when a long prompt fell back (for the page).
        extras: what the run holds beside softmax patterns (sinks, gates, linear layers'
            mixing matrices, latent queries and keys), for a model whose layers are not all
            plain softmax; None otherwise.
        fidelity: how closely the patterns reproduce each layer's own output, measured.
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
    extras: RunExtras | None = None
    fidelity: Fidelity | None = None

    @property
    def dtype(self) -> str:
        """The dtype the model ran in (q and k are kept, and patterns rebuilt, in float32)."""
        return self.spec.dtype if self.spec is not None else "float32"

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        """Memory the stored patterns (or q, k, LSE and thumbnails) and extras take."""
        return self.store.nbytes + (self.extras.nbytes if self.extras is not None else 0)

    def kind(self, layer: int) -> AttentionKind:
        """What layer ``layer`` computes: ``softmax``, ``sliding`` or ``linear``."""
        return "softmax" if self.extras is None else self.extras.kind(layer)

    def heads_in(self, layer: int) -> int:
        """How many heads layer ``layer`` has: a linear-attention layer counts its value heads
        (each with its own mixing matrix), which may outnumber the softmax layers' heads."""
        return self.facts.n_heads if self.extras is None else self.extras.layers[layer].n_heads

    @property
    def layer_heads(self) -> tuple[int, ...]:
        """Each layer's head count (see :meth:`heads_in`)."""
        return tuple(self.heads_in(layer) for layer in range(self.facts.n_layers))

    @property
    def grid_heads(self) -> int:
        """Heads of the widest layer: a head grid's columns."""
        return max(self.facts.n_heads, *self.layer_heads)

    def softmax_layers(self) -> list[int]:
        """The layers with a softmax pattern (every layer but linear-attention ones)."""
        n = self.facts.n_layers
        return list(range(n)) if self.extras is None else self.extras.softmax_layers()

    def window_of(self, layer: int) -> int | None:
        """The sliding window's width of layer ``layer`` (None for a global layer)."""
        return None if self.extras is None else self.extras.layers[layer].window

    def sink(self, layer: int, head: int, rows: slice) -> Float[np.ndarray, " row"] | None:
        """Each row's weight on head ``layer.head``'s learned sink (None when it has none)."""
        return None if self.extras is None else self.extras.sink(layer, head, rows)

    def signed(self, layer: int) -> bool:
        """Whether layer ``layer`` is drawn from a signed mixing matrix (a linear-attention
        layer), not from softmax weights."""
        return self.kind(layer) == "linear"

    def drawn(self, layer: int, head: int, rows: slice, cols: slice) -> HeadPattern:
        """What a view draws of head ``layer.head``: its pattern's window, or for a
        linear-attention layer the window of its signed mixing matrix (NaN for a head past the
        layer's value heads)."""
        found = self.extras.mixing.get(layer) if self.extras is not None else None
        if found is None:
            return self.window(layer, head, rows, cols)
        if head >= found.shape[0]:  # the window's shape, without reading a pattern for it
            return np.full(found[0, rows, cols].shape, np.nan, dtype=np.float32)
        drawn: HeadPattern = found[head, rows, cols]
        return drawn

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


def capture_dense(model: ModelHandle, ids: TokenIds) -> DensePatterns:
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
    model: ModelHandle,
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
    parity = parity_of(model)
    disagrees = parity is not None and not parity.agrees
    if disagrees or not all_plain(layer_variants(model)):
        return _variant_run(model, prompt, ids, n_full, dense_limit, reference=disagrees)
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
    if isinstance(store, FactoredPatterns) and store.layer_errors is not None:
        fidelity = fused_fidelity(model, store.layer_errors, store.check)
    else:
        fidelity = eager_fidelity(model, ids, store)
    return _run(model, prompt, ids, n_full, store, path, fallback, None, fidelity)


def _run(
    model: ModelHandle,
    prompt: str,
    ids: TokenIds,
    n_full: int,
    store: PatternStore,
    path: CapturePath,
    fallback: str | None,
    extras: RunExtras | None,
    fidelity: Fidelity | None,
) -> AttentionRun:
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
        extras=extras,
        fidelity=fidelity,
    )


def fused_fidelity(
    model: ModelHandle, errors: tuple[float, ...], check: SdpaCheck | None
) -> Fidelity:
    """The fused pass's own check, per layer, as a :class:`Fidelity`."""
    return Fidelity(
        errors=tuple(errors),
        rows=check.rows if check is not None else (),
        tolerance=tolerance(model.spec.dtype),
        reference="the model's own fused attention output (before its output projection)",
        architecture=model.facts.architecture,
    )


def eager_fidelity(
    model: ModelHandle,
    ids: TokenIds,
    store: PatternStore,
    extras: RunExtras | None = None,
    linear: dict[int, float] | None = None,
) -> Fidelity:
    """The fidelity of ``store``'s patterns against transformers' own eager pass.

    A decoder is measured on rows of its first :data:`FIDELITY_PREFIX` tokens (what a causal
    model computes there does not depend on later tokens), so the eager pass stays small on a
    long prompt; an encoder on the whole prompt.
    """
    n = int(ids.shape[1])
    limit = min(n, FIDELITY_PREFIX) if model.facts.causal else n
    rows = sample_rows(limit)
    _, reference = run_eager(model, ids[:, :limit])
    kinds = extras.layers if extras is not None else None

    def shown(layer: int) -> np.ndarray | None:
        if kinds is not None and not kinds[layer].softmax:
            return None
        return store.layer_window(layer, rows, slice(0, limit))

    return measure(
        model.facts.n_layers,
        rows,
        shown,
        reference,
        extras.gates if extras is not None else {},
        linear or {},
        model.spec.dtype,
        model.facts.architecture,
    )


def _variant_run(
    model: ModelHandle,
    prompt: str,
    ids: TokenIds,
    n_full: int,
    dense_limit: int,
    reference: bool = False,
) -> AttentionRun:
    """A model whose layers are not all plain softmax (or whose bridge disagrees with
    transformers: ``reference``), read whole; a prompt whose patterns outgrow ``dense_limit``
    is cut to what fits, and the run says so."""
    fits = max(1, int((dense_limit / model.facts.pattern_bytes(1)) ** 0.5))
    path: CapturePath = "transformers" if reference else "dense"
    fallback = None
    if ids.shape[1] > fits:
        path, ids = "shortened", ids[:, :fits]
        fallback = f"this model's layers are read whole, and only {fits:,} tokens fit"
    found = (capture_reference if reference else capture_variants)(model, ids)
    rows = sample_rows(int(ids.shape[1]))
    linear = {
        layer: linear_layer_error(found.extras.mixing[layer], v, out, rows)
        for layer, (v, out) in found.linear_io.items()
    }
    fidelity = eager_fidelity(model, ids, found.store, found.extras, linear)
    extras = None if all_plain(found.extras.layers) else found.extras
    return _run(model, prompt, ids, n_full, found.store, path, fallback, extras, fidelity)
