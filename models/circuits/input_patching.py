"""Exact activation patching of each head's inputs: its query, or a key/value head's key or value.

The clean q (or k, or v) of one head, at every position, replaces the corrupted one; the patch
effect is normalised like :func:`models.circuits.patching.head_effects`. q and k are patched
before the rotation on RoPE models (``hook_q``/``hook_k``): the model rotates the patched value
itself, and since clean and corrupted share positions that is the rotated clean value. On GQA
models k and v are patched per key/value head, which every query head of its group reads.

This is the exact answer the q/k/v estimates of :mod:`models.circuits.atp` approximate; it
costs ``ceil(heads / batch)`` batched forward passes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import torch

from models.circuits.gradients import capture
from models.circuits.patching import MIN_GAP, batch_size
from models.circuits.task import Setup, TaskError, logit_diff
from models.model.forward import Hook, k_hook, q_hook, run_with_hooks, v_hook
from models.model.handle import ModelHandle
from models.model.weights import Projection, n_heads_of
from models.progress import Progress, quiet

HOOK_OF: dict[str, Callable[[int], str]] = {"q": q_hook, "k": k_hook, "v": v_hook}


def input_hooks(
    which: Projection, rows: Sequence[tuple[int, int]], clean: dict[str, torch.Tensor]
) -> list[Hook]:
    """Hooks that give batch row ``i`` the clean ``which`` of head ``rows[i]``."""
    by_layer: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for row, (layer, index) in enumerate(rows):
        by_layer[layer].append((row, index))

    def make(name: str, items: list[tuple[int, int]]) -> Callable[..., torch.Tensor]:
        def hook(act: torch.Tensor, hook: object = None) -> torch.Tensor:
            src = clean[name][0].to(act.device, act.dtype)
            out = act.clone()
            for row, index in items:
                out[row, :, index] = src[:, index]
            return out

        return hook

    name_of = HOOK_OF[which]
    return [
        (name_of(layer), make(name_of(layer), items)) for layer, items in sorted(by_layer.items())
    ]


def input_effects(
    model: ModelHandle,
    setup: Setup,
    which: Projection,
    *,
    hooks: Sequence[Hook] = (),
    layers: Sequence[int] | None = None,
    batch: int | None = None,
    progress: Progress = quiet,
) -> np.ndarray:
    """Patch effect of each head's clean ``which`` (all positions), one head at a time.

    Args:
        model: a causal language model.
        setup: the prepared task.
        which: ``"q"`` (per query head), ``"k"`` or ``"v"`` (per key/value head).
        hooks: forward hooks applied to every run, the clean one included.
        layers: patch only the heads of these layers (others stay NaN); default all.
        batch: patched runs per forward pass (default: a memory budget).
        progress: called before each pass; may raise ``Cancelled``.

    Returns:
        ``layer head_index`` (q) or ``layer kv_head`` (k, v) float64 (NaN outside ``layers``).

    Raises:
        TaskError: the clean and corrupted runs give the same logit difference.
    """
    n_layers, n_index = model.facts.n_layers, n_heads_of(model.facts, which)
    names = [HOOK_OF[which](layer) for layer in range(n_layers)]
    progress(0.0, "the clean and corrupted prompts")
    ld_clean, clean = capture(model, setup.clean_ids, setup, {n: lambda a: a for n in names}, hooks)
    ld_corrupted, _ = capture(model, setup.corrupted_ids, setup, {}, hooks)
    if abs(ld_clean - ld_corrupted) < MIN_GAP:
        raise TaskError(
            "The clean and corrupted prompts give the same logit difference: "
            "there is nothing for a patch to restore."
        )
    chosen = range(n_layers) if layers is None else sorted(set(layers))
    rows = [(layer, index) for layer in chosen for index in range(n_index)]
    batch = batch or batch_size(model, setup.n_tokens)
    n_passes = math.ceil(len(rows) / batch)
    ld = np.zeros(len(rows))
    for i in range(n_passes):
        chunk = rows[i * batch : (i + 1) * batch]
        progress(0.1 + 0.9 * i / n_passes, f"patching {which}: pass {i + 1} of {n_passes}")
        ids = setup.corrupted_ids.expand(len(chunk), -1)
        logits = run_with_hooks(model, ids, [*hooks, *input_hooks(which, chunk, clean)])
        ld[i * batch : i * batch + len(chunk)] = logit_diff(
            logits, setup.answer_id, setup.wrong_id
        ).numpy()
    progress(1.0, "done")
    out = np.full((n_layers, n_index), np.nan)
    for (layer, index), value in zip(rows, ld, strict=True):
        out[layer, index] = (value - ld_corrupted) / (ld_clean - ld_corrupted)
    return out
