"""Pruning importance: measured loss change under head ablation, and Michel et al.'s gradient.

Every intervention acts on each layer's ``hook_z`` (``batch pos head_index d_head``, the
per-head output before the output projection) through :mod:`models.model.forward`, which runs
one pass under the model's lock and removes its hooks when the pass ends. Inputs are never
modified in place.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Literal, Sequence

import numpy as np
import torch

from models.heads.loss import LossTask, LossUnavailable, loss_from_logits
from models.model.forward import (every_layer, missing_hooks, model_device, run_hooks,
                                  run_with_hooks, z_hook)
from models.model.loading import LoadedModel
from models.progress import Progress, quiet

AblationMethod = Literal["zero", "mean"]
Ranking = Literal["zero", "mean", "gradient"]
Head = tuple[int, int]



def check_hooks(model: LoadedModel) -> None:
    """Raise :class:`LossUnavailable` when the bridge exposes no ``hook_z`` to ablate."""
    missing = missing_hooks(model, every_layer(z_hook, model.facts.n_layers))
    if missing:
        raise LossUnavailable(f"Not available for {model.facts.name}: TransformerLens exposes no "
                              f"per-head output hook ({missing[0]}) for it.")


def head_means(model: LoadedModel, task: LossTask) -> torch.Tensor:
    """Each head's ``hook_z`` averaged over the reference text's positions.

    Returns:
        ``layer head_index d_head`` float32 on CPU.
    """
    names = every_layer(z_hook, model.facts.n_layers)
    acts = run_hooks(model, task.ids, names)
    return torch.stack([acts[name].mean(dim=(0, 1)) for name in names])


def ablation_hooks(heads: Iterable[Head], method: AblationMethod,
                   means: torch.Tensor | None = None) -> list[tuple[str, Callable]]:
    """Forward hooks that replace the listed heads' ``hook_z`` by zeros or by their means.

    Args:
        heads: ``(layer, head)`` pairs.
        method: ``zero`` or ``mean`` ablation.
        means: ``layer head_index d_head`` from :func:`head_means`; needed for ``mean``.
    """
    if method == "mean" and means is None:
        raise ValueError("mean ablation needs the heads' means")
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        by_layer[int(layer)].append(int(head))

    def make(layer: int, idx: list[int]) -> Callable:
        def hook(z: torch.Tensor, hook=None) -> torch.Tensor:
            out = z.clone()
            if method == "zero":
                out[:, :, idx] = 0.0
            else:
                out[:, :, idx] = means[layer, idx].to(out.device, out.dtype)
            return out
        return hook

    return [(z_hook(layer), make(layer, idx)) for layer, idx in sorted(by_layer.items())]


def task_loss(model: LoadedModel, task: LossTask,
              fwd_hooks: Sequence[tuple[str, Callable]] = ()) -> float:
    """The task's loss after one forward pass with ``fwd_hooks`` (none: the clean loss)."""
    logits = run_with_hooks(model, task.ids, fwd_hooks)
    return float(loss_from_logits(logits, task.labels))


def ablated_loss(model: LoadedModel, task: LossTask, heads: Iterable[Head],
                 method: AblationMethod = "zero", means: torch.Tensor | None = None) -> float:
    """Loss with every head in ``heads`` ablated together; no heads gives the clean loss."""
    return task_loss(model, task, ablation_hooks(heads, method, means))


def single_head_effects(model: LoadedModel, task: LossTask, method: AblationMethod,
                        base_loss: float, means: torch.Tensor | None = None,
                        progress: Progress = quiet) -> np.ndarray:
    """Loss change ``L(head ablated) - L(clean)`` for every head, one forward pass each.

    Returns:
        ``layer head_index`` float64.
    """
    n_layers, n_heads = model.facts.n_layers, model.facts.n_heads
    out = np.zeros((n_layers, n_heads))
    for i, (layer, head) in enumerate(np.ndindex(n_layers, n_heads)):
        progress(i / (n_layers * n_heads), f"{method}-ablating head {layer}.{head}")
        out[layer, head] = ablated_loss(model, task, [(layer, head)], method, means) - base_loss
    return out


def mask_gradient(model: LoadedModel, task: LossTask) -> tuple[np.ndarray, float]:
    """``dL / d xi_h`` (signed) for a head mask ``xi`` (all ones), one backward pass.

    Each head's ``hook_z`` is multiplied by ``xi[layer, head]`` (all ones, so the forward pass
    is unchanged). Gradients are taken with ``torch.autograd.grad`` on ``xi`` only, so no
    ``.grad`` lands on the model. ``-dL/dxi_h`` is the first-order estimate of the loss change
    when head ``h`` is zeroed (``xi_h``: 1 -> 0).

    Returns:
        ``(layer head_index gradient, clean loss)``.
    """
    xi = torch.ones(model.facts.n_layers, model.facts.n_heads, requires_grad=True,
                    device=model_device(model))

    def make(layer: int) -> Callable:
        def hook(z: torch.Tensor, hook=None) -> torch.Tensor:
            return z * xi[layer].to(z.dtype)[None, None, :, None]
        return hook

    hooks = [(z_hook(l), make(l)) for l in range(model.facts.n_layers)]
    logits = run_with_hooks(model, task.ids, hooks, grad=True)
    loss = loss_from_logits(logits, task.labels)
    (grad,) = torch.autograd.grad(loss, xi)
    return grad.detach().cpu().double().numpy(), float(loss.detach())


def gradient_importance(model: LoadedModel, task: LossTask) -> tuple[np.ndarray, float]:
    """Michel et al. (2019) importance ``|dL / d xi_h|`` through a head mask, one backward pass.

    The raw absolute gradient of :func:`mask_gradient`, not normalised per layer.

    Returns:
        ``(layer head_index importance, clean loss)``.
    """
    grad, loss = mask_gradient(model, task)
    return np.abs(grad), loss


def pruning_order(importance: np.ndarray) -> list[Head]:
    """Heads from least to most important; NaN last, ties in ``L.H`` order.

    Args:
        importance: ``layer head_index``; smaller means less important.
    """
    flat = np.where(np.isnan(importance), np.inf, importance).ravel()
    n_heads = importance.shape[1]
    return [(int(i) // n_heads, int(i) % n_heads) for i in np.argsort(flat, kind="stable")]


def cumulative_pruning(model: LoadedModel, task: LossTask, order: Sequence[Head],
                       method: AblationMethod, means: torch.Tensor | None = None,
                       progress: Progress = quiet) -> list[float]:
    """Measured loss with the first ``k`` heads of ``order`` ablated together, ``k = 0..N``.

    Each point is its own forward pass with all ``k`` heads ablated at once, not a sum of
    single-head effects.

    Returns:
        ``N + 1`` losses; entry 0 is the clean loss.
    """
    losses = []
    for k in range(len(order) + 1):
        progress(k / (len(order) + 1), f"pruning the {k} least important heads together")
        losses.append(ablated_loss(model, task, order[:k], method, means))
    return losses


@dataclass(frozen=True)
class Importance:
    """Every head's pruning importance on one reference text; arrays are ``layer head_index``.

    ``zero``/``mean``: loss change when the head alone is ablated; ``gradient``: ``|dL/dxi|``.
    """

    base_loss: float
    zero: np.ndarray
    mean: np.ndarray
    gradient: np.ndarray
    means: torch.Tensor
    kind: str
    n_targets: int

    def ranking(self, by: Ranking) -> np.ndarray:
        return {"zero": self.zero, "mean": self.mean, "gradient": self.gradient}[by]


def measure_importance(model: LoadedModel, task: LossTask,
                       progress: Progress = quiet) -> Importance:
    """Zero- and mean-ablation effects of every head, then gradient importance.

    Costs ``2 * n_heads_total + 2`` forward passes and one backward pass.

    Raises:
        LossUnavailable: the model exposes no ``hook_z``.
    """
    check_hooks(model)
    total = model.facts.n_total_heads
    base = task_loss(model, task)
    means = head_means(model, task)

    def part(start: float) -> Progress:
        return lambda f, text: progress(start + 0.49 * f, text)

    zero = single_head_effects(model, task, "zero", base, None, part(0.0))
    mean = single_head_effects(model, task, "mean", base, means, part(0.49))
    progress(0.98, f"gradient of the loss through a mask over {total} heads")
    gradient, _ = gradient_importance(model, task)
    progress(1.0, "done")
    return Importance(base_loss=base, zero=zero, mean=mean, gradient=gradient, means=means,
                      kind=task.kind, n_targets=task.n_targets)
