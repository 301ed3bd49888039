"""Patched runs that skip the blocks a patch cannot change, and the exact check of the heads an
estimate ranks highest.

A patch at block ``start`` or later leaves blocks ``< start`` exactly as in the corrupted run, so
a batch of such runs can begin at block ``start`` from the corrupted run's residual stream there
(:func:`models.model.resume.run_resumed`): checking late heads, or path patching into a late
receiver, costs only the blocks from there on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float, Int

from models.circuits.patching import batch_size, patch_hooks
from models.circuits.task import Setup, logit_diff
from models.model.forward import Hook, model_device, resid_pre_hook, run_with_hooks, z_hook
from models.model.handle import ModelHandle
from models.model.resume import run_resumed
from models.model.weights import parameter_dtype


def run_from(
    model: ModelHandle,
    ids: Int[torch.Tensor, "1 pos"],
    hooks: Sequence[Hook],
    start: int,
    resid_pre: Float[torch.Tensor, "1 pos d_model"] | None,
    copies: int,
) -> Float[torch.Tensor, "batch pos d_vocab"]:
    """Logits of ``copies`` copies of ``ids`` under ``hooks`` (all on blocks ``>= start``),
    computing blocks from ``start`` on only; ``resid_pre`` is the unpatched residual entering
    block ``start`` (``None``, or ``start == 0``: run every block)."""
    if start <= 0 or resid_pre is None:
        logits: torch.Tensor = run_with_hooks(model, ids.expand(copies, -1), hooks)
        return logits
    resume = resid_pre.to(model_device(model), parameter_dtype(model))
    return run_resumed(model, ids, hooks, start, [resume] * start, copies=copies)


def check_top(
    model: ModelHandle,
    setup: Setup,
    clean: dict[str, torch.Tensor],
    corrupted: dict[str, torch.Tensor],
    estimate: np.ndarray,
    k: int,
    ld_clean: float,
    ld_corrupted: float,
    batch: int | None = None,
) -> np.ndarray:
    """Exact patch effects of the ``k`` heads with the largest ``|estimate|`` (NaN elsewhere).

    The patched runs resume at the lowest layer among them from the corrupted run's residual
    stream there (:func:`models.model.resume.run_resumed`), so checking late heads costs only
    the blocks after them.

    Args:
        clean: the clean run's ``hook_z`` values by hook name (``1 pos head_index d_head``).
        corrupted: the corrupted run's ``resid_pre`` values by hook name (``1 pos d_model``).
    """
    n_layers, n_heads = estimate.shape
    order = np.argsort(-np.abs(estimate).ravel(), kind="stable")[:k]
    rows = [[(int(i) // n_heads, int(i) % n_heads, None)] for i in order]
    start = min(layer for ((layer, _, _),) in rows)
    clean_z = tuple(clean[z_hook(layer)][0] for layer in range(n_layers))
    batch = batch or batch_size(model, setup.n_tokens)
    ld = np.zeros(len(rows))
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        logits = run_from(
            model,
            setup.corrupted_ids,
            patch_hooks(chunk, clean_z),
            start,
            corrupted[resid_pre_hook(start)],
            copies=len(chunk),
        )
        ld[i : i + len(chunk)] = logit_diff(logits, setup.answer_id, setup.wrong_id).numpy()
    out = np.full(n_layers * n_heads, np.nan)
    out[order] = (ld - ld_corrupted) / (ld_clean - ld_corrupted)
    return out.reshape(n_layers, n_heads)
