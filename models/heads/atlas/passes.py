"""The atlas's two passes over the corpus, each reading what it needs inside the model's hooks.

Nothing per token outlives its layer: the first pass folds every layer's pattern into the heads'
peaks (:mod:`models.heads.atlas.peaks`) and, on one text, their small pictures
(:mod:`models.heads.atlas.pictures`), and its q, k, v and output vectors into running moments
(:mod:`models.heads.atlas.lowrank`); the second, once the principal components are known, folds
the same vectors into each component's top-loading tokens. Position 0 is left out of both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from jaxtyping import Float

from models.heads.atlas.lowrank import SPACES, Components, Moments, Space, TopLoadings
from models.heads.atlas.peaks import Peaks
from models.heads.atlas.pictures import picture_text, pooled
from models.model.forward import k_hook, pattern_hook, q_hook, run_with_hooks, v_hook, z_hook
from models.model.handle import ModelHandle
from models.model.weights import output_projection
from models.progress import Progress
from models.shapes import TokenIds

SPACE_HOOKS: dict[Space, Callable[[int], str]] = {
    "query": q_hook,
    "key": k_hook,
    "value": v_hook,
    "output": z_hook,
}
Fold = Callable[[Space, int, Float[torch.Tensor, "pos head d"]], None]
ReadHook = Callable[..., None]


def output_basis(model: ModelHandle, layer: int) -> Float[torch.Tensor, "head_index d_head d_head"]:
    """``T`` with ``T T^T = W_O W_O^T`` for each head: ``z T`` has the lengths and angles of
    ``z W_O`` in ``d_head`` numbers.

    The Cholesky factor of that ``d_head x d_head`` Gram matrix is the fast path; a head whose
    Gram matrix is singular (a W_O of lower rank, such as a zeroed head) falls back to
    ``U sqrt(lambda)`` from its eigenvectors, which any positive semi-definite matrix has.
    """
    w_o, _ = output_projection(model, layer)
    gram = w_o @ w_o.transpose(1, 2)
    factor, info = torch.linalg.cholesky_ex(gram)
    failed = info > 0
    if failed.any():
        values, vectors = torch.linalg.eigh(gram[failed])
        factor[failed] = vectors * values.clamp(min=0.0).sqrt()[:, None, :]
    basis: torch.Tensor = factor
    return basis


def space_heads(model: ModelHandle, space: Space) -> int:
    """How many heads a space has per layer: key/value heads for ``key`` and ``value``."""
    facts = model.facts
    return facts.n_kv_heads if space in ("key", "value") else facts.n_heads


def _vector_hooks(model: ModelHandle, fold: Fold) -> list[tuple[str, ReadHook]]:
    bases = {layer: output_basis(model, layer) for layer in range(model.facts.n_layers)}

    def hook_for(space: Space, layer: int) -> ReadHook:
        def hook(act: torch.Tensor, hook: object = None) -> None:
            x = act[0, 1:].detach().to("cpu", torch.float64)  # pos head d, position 0 left out
            if space == "output":
                x = torch.einsum("phd,hde->phe", x, bases[layer])
            fold(space, layer, x)

        return hook

    return [
        (SPACE_HOOKS[space](layer), hook_for(space, layer))
        for layer in range(model.facts.n_layers)
        for space in SPACES
    ]


def _each_text(
    model: ModelHandle,
    encoded: Sequence[TokenIds],
    hooks_of: Callable[[int], list[tuple[str, ReadHook]]],
    progress: Progress,
    what: str,
) -> None:
    sizes = [int(ids.shape[1]) for ids in encoded]
    total, done = max(sum(sizes), 1), 0
    for t, ids in enumerate(encoded):
        progress(done / total, f"{what}: text {t + 1} of {len(encoded)} ({sizes[t]} tokens)")
        if sizes[t] > 1:
            run_with_hooks(model, ids, hooks_of(t), return_type=None)
        done += sizes[t]


def first_pass(
    model: ModelHandle, encoded: Sequence[TokenIds], progress: Progress
) -> tuple[Peaks, dict[Space, list[Moments]], Float[np.ndarray, "layer head_index pix pix"]]:
    """Every head's peak on every text, the moments of its four spaces (one list entry per
    layer), and every head's picture on the longest text (:mod:`models.heads.atlas.pictures`)."""
    facts = model.facts
    peaks = Peaks.empty(len(encoded), facts.n_layers, facts.n_heads)
    moments = {
        space: [Moments(space_heads(model, space), facts.d_head) for _ in range(facts.n_layers)]
        for space in SPACES
    }
    vectors = _vector_hooks(model, lambda space, layer, x: moments[space][layer].add(x))
    pictured = picture_text([int(ids.shape[1]) for ids in encoded]) if encoded else -1
    pictures: list[np.ndarray | None] = [None] * facts.n_layers

    def hooks_of(text: int) -> list[tuple[str, ReadHook]]:
        def peak_hook(layer: int) -> ReadHook:
            def hook(pattern: torch.Tensor, hook: object = None) -> None:
                peaks.record(text, layer, pattern[0].detach().cpu())
                if text == pictured:
                    pictures[layer] = pooled(pattern[0], facts.causal)

            return hook

        patterns = [(pattern_hook(layer), peak_hook(layer)) for layer in range(facts.n_layers)]
        return patterns + vectors

    _each_text(model, encoded, hooks_of, progress, "peaks and moments")
    return peaks, moments, _stacked(pictures, facts.n_heads)


def _stacked(
    pictures: Sequence[np.ndarray | None], n_heads: int
) -> Float[np.ndarray, "layer head_index pix pix"]:
    """The layers' pictures as one array; a layer that drew none (no softmax pattern, or no
    text long enough) is NaN."""
    side = max((p.shape[-1] for p in pictures if p is not None), default=1)
    out = np.full((len(pictures), n_heads, side, side), np.nan, dtype=np.float32)
    for layer, found in enumerate(pictures):
        if found is not None and found.shape[-1] == side:
            out[layer] = found
    return out


def second_pass(
    model: ModelHandle,
    encoded: Sequence[TokenIds],
    components: dict[Space, list[Components]],
    progress: Progress,
) -> dict[Space, list[TopLoadings]]:
    """The tokens loading most on each component (one list entry per layer)."""
    tops = {space: [TopLoadings(c) for c in per_layer] for space, per_layer in components.items()}
    current = {"text": 0}

    def fold(space: Space, layer: int, x: torch.Tensor) -> None:
        positions = torch.arange(1, x.shape[0] + 1)
        tops[space][layer].add(x, current["text"], positions)

    vectors = _vector_hooks(model, fold)

    def hooks_of(text: int) -> list[tuple[str, ReadHook]]:
        current["text"] = text
        return vectors

    _each_text(model, encoded, hooks_of, progress, "tokens on each component")
    return tops
