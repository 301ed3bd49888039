"""Ablating heads: the hooks that zero or mean-replace them, the head-mask gradient, the order.

Every intervention acts on each layer's ``hook_z`` (``batch pos head_index d_head``, the
per-head output before the output projection) through :mod:`models.model.forward`, which runs
one pass under the model's lock and removes its hooks when the pass ends. Inputs are never
modified in place. The hooks take a batch of copies of one text, each with its own heads
ablated (:func:`copy_hooks`): :mod:`models.heads.pruning.importance` runs them resumed from the
clean pass, and :func:`ablated_loss` is the plain path beside it, one whole pass per head set,
which the batched path is checked and timed against.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch
from jaxtyping import Float

from models.head import Head
from models.heads.names import AblationMethod
from models.heads.pruning.loss import LossTask, LossUnavailable, loss_from_logits
from models.model.forward import every_layer, missing_hooks, model_device, run_with_hooks, z_hook
from models.model.handle import ModelHandle

HookFn = Callable[..., torch.Tensor]


def check_hooks(model: ModelHandle) -> None:
    """Raise :class:`LossUnavailable` when the bridge exposes no ``hook_z`` to ablate."""
    missing = missing_hooks(model, every_layer(z_hook, model.facts.n_layers))
    if missing:
        raise LossUnavailable(
            f"Not available for {model.facts.name}: TransformerLens exposes no "
            f"per-head output hook ({missing[0]}) for it."
        )


def copy_hooks(
    masks: Sequence[Iterable[tuple[int, int]]],
    method: AblationMethod,
    means: Float[torch.Tensor, "layer head_index d_head"] | None = None,
) -> list[tuple[str, HookFn]]:
    """``hook_z`` hooks for a batch: copy ``i`` has the heads of ``masks[i]`` ablated.

    Args:
        masks: one collection of heads (``Head`` or ``(layer, index)``) per batch row; an
            empty one leaves its row clean. A single row applies to a batch of one.
        method: ``zero`` or ``mean``.
        means: ``layer head_index d_head``; needed for ``mean``.
    """
    if method == "mean" and means is None:
        raise ValueError("mean ablation needs the heads' means")
    per_layer: dict[int, list[tuple[int, list[int]]]] = defaultdict(list)
    for row, heads in enumerate(masks):
        by_layer: dict[int, list[int]] = defaultdict(list)
        for layer, index in heads:
            by_layer[int(layer)].append(int(index))
        for layer, idx in by_layer.items():
            per_layer[layer].append((row, sorted(idx)))

    def make(layer: int, rows: list[tuple[int, list[int]]]) -> HookFn:
        def hook(z: torch.Tensor, hook: object = None) -> torch.Tensor:
            out = z.clone()
            for row, idx in rows:
                if method == "zero":
                    out[row, :, idx] = 0.0
                else:
                    assert means is not None
                    out[row, :, idx] = means[layer, idx].to(out.device, out.dtype)
            return out

        return hook

    return [(z_hook(layer), make(layer, rows)) for layer, rows in sorted(per_layer.items())]


def first_layer(masks: Sequence[Iterable[tuple[int, int]]], n_layers: int) -> int:
    """The earliest layer any copy ablates (``n_layers`` when none does)."""
    return min((int(layer) for heads in masks for layer, _ in heads), default=n_layers)


def ablated_loss(
    model: ModelHandle,
    task: LossTask,
    heads: Iterable[tuple[int, int]] = (),
    method: AblationMethod = "zero",
    means: Float[torch.Tensor, "layer head_index d_head"] | None = None,
) -> float:
    """The plain path: the task's loss after one whole forward pass with every head of
    ``heads`` ablated together; no heads gives the clean loss."""
    logits = run_with_hooks(model, task.ids, copy_hooks([list(heads)], method, means))
    return float(loss_from_logits(logits, task.labels))


def mask_gradient(
    model: ModelHandle, task: LossTask
) -> tuple[Float[np.ndarray, "layer head_index"], float]:
    """``dL / d xi_h`` (signed) for a head mask ``xi`` (all ones), one backward pass.

    Each head's ``hook_z`` is multiplied by ``xi[layer, head]`` (all ones, so the forward pass
    is unchanged). Gradients are taken with ``torch.autograd.grad`` on ``xi`` only, so no
    ``.grad`` lands on the model. ``|dL/dxi_h|`` is Michel et al.'s (2019) importance and
    ``-dL/dxi_h`` the first-order estimate of the loss change when head ``h`` is zeroed.

    Returns:
        ``(layer head_index gradient, clean loss)``.
    """
    xi = torch.ones(
        model.facts.n_layers, model.facts.n_heads, requires_grad=True, device=model_device(model)
    )

    def make(layer: int) -> HookFn:
        def hook(z: torch.Tensor, hook: object = None) -> torch.Tensor:
            return z * xi[layer].to(z.dtype)[None, None, :, None]

        return hook

    hooks = [(z_hook(layer), make(layer)) for layer in range(model.facts.n_layers)]
    logits = run_with_hooks(model, task.ids, hooks, grad=True)
    loss = loss_from_logits(logits, task.labels)
    (grad,) = torch.autograd.grad(loss, xi)
    return grad.detach().cpu().double().numpy(), float(loss.detach())


def pruning_order(importance: Float[np.ndarray, "layer head_index"]) -> list[Head]:
    """Heads from least to most important; NaN last, ties in ``L.H`` order.

    Args:
        importance: ``layer head_index``; smaller means less important.
    """
    flat = np.where(np.isnan(importance), np.inf, importance).ravel()
    n_heads = importance.shape[1]
    return [Head(*divmod(int(i), n_heads)) for i in np.argsort(flat, kind="stable")]
