"""Patched runs that skip the blocks a patch cannot change.

A patch at block ``start`` or later leaves blocks ``< start`` exactly as in the corrupted run, so
a batch of such runs can begin at block ``start`` from the corrupted run's residual stream there
(:func:`models.model.resume.run_resumed`): checking late heads, or path patching into a late
receiver, costs only the blocks from there on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int

from models.model.forward import Hook, model_device, run_with_hooks
from models.model.loading import LoadedModel
from models.model.resume import run_resumed


def model_dtype(model: LoadedModel) -> torch.dtype:
    """The dtype of the model's parameters."""
    return next(model.bridge.parameters()).dtype


def run_from(
    model: LoadedModel,
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
        return run_with_hooks(model, ids.expand(copies, -1), hooks)
    resume = resid_pre.to(model_device(model), model_dtype(model))
    return run_resumed(model, ids, hooks, start, [resume] * start, copies=copies)
