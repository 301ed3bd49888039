"""The passes attribution patching reads: the clean run's activations, and the corrupted run's
activations with the gradient of LD with respect to each of them.

Gradients come from zero "leaves" added to the activations at their hooks
(``act + leaf``, a no-op in the forward pass): ``d LD / d leaf`` is ``d LD / d act``, and one
backward pass gives every leaf's gradient.

GradDrop (Kramar et al. 2024) needs, for each layer ``l``, the gradients with the gradient that
flows through block ``l``'s writes to the residual stream (its attention and MLP outputs) set to
zero. Only nodes below block ``l`` see a difference, and for them the dropped gradient is the
full gradient at block ``l``'s output pushed back through the skip connection alone: a
vector-Jacobian product from block ``l``'s input (``resid_pre``) with the gradient at its output
(the next block's input, or the final norm's input). Block ``l`` costs a backward pass through
the ``l`` blocks below it, ``(L - 1) / 2`` full backward passes in all, on the graph of the one
corrupted forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from jaxtyping import Int

from models.circuits.task import CircuitsUnavailable, Setup
from models.model.forward import (
    Hook,
    final_norm_in_hook,
    missing_hooks,
    resid_pre_hook,
    run_with_hooks,
)
from models.model.handle import ModelHandle
from models.progress import Progress, quiet

Keep = Callable[[torch.Tensor], torch.Tensor]  # what to keep of an activation (e.g. a slice)


@dataclass
class GradientRun:
    """One corrupted pass with gradients.

    Attributes:
        ld: the run's logit difference.
        values: kept activations (CPU, float32), by hook name.
        grads: ``d LD / d activation`` of each leaf (CPU, float32), by hook name.
        dropped: for each layer ``l >= 1``, the gradients of the leaves in layers ``< l`` with
            block ``l``'s writes dropped (GradDrop); empty when not asked for.
    """

    ld: float
    values: dict[str, torch.Tensor]
    grads: dict[str, torch.Tensor]
    dropped: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)


def check_hooks(model: ModelHandle, names: Sequence[str]) -> None:
    """Raise :class:`CircuitsUnavailable` when the bridge lacks one of ``names``."""
    missing = missing_hooks(model, names)
    if missing:
        raise CircuitsUnavailable(
            f"Not available for {model.facts.name}: TransformerLens "
            f"exposes no {missing[0]} hook for it."
        )


def kept(part: torch.Tensor) -> torch.Tensor:
    """``part`` of an activation as a CPU float32 tensor that holds only itself: a slice such
    as a pattern's last row is copied out, so keeping it does not keep the whole pattern (every
    layer's ``n_heads x n^2`` floats) alive until the result is dropped."""
    found = part.to("cpu", torch.float32)
    if found.untyped_storage().nbytes() > found.numel() * found.element_size():
        return found.clone()
    return found


def capture(
    model: ModelHandle,
    ids: Int[torch.Tensor, "1 pos"],
    setup: Setup,
    keep: Mapping[str, Keep],
    hooks: Sequence[Hook] = (),
) -> tuple[float, dict[str, torch.Tensor]]:
    """A forward pass without gradients: its LD and ``keep[name](activation)`` per name."""
    check_hooks(model, list(keep))
    seen: dict[str, torch.Tensor] = {}

    def make(name: str) -> Callable[..., None]:
        def hook(act: torch.Tensor, hook: object = None) -> None:
            seen[name] = kept(keep[name](act.detach()))

        return hook

    logits = run_with_hooks(model, ids, [*hooks, *[(n, make(n)) for n in keep]])
    last = logits[0, -1].detach().to("cpu", torch.float64)
    return float(last[setup.answer_id] - last[setup.wrong_id]), seen


def gradient_run(
    model: ModelHandle,
    setup: Setup,
    leaves: Mapping[str, int],
    keep: Mapping[str, Keep],
    hooks: Sequence[Hook] = (),
    grad_drop: bool = False,
    progress: Progress = quiet,
) -> GradientRun:
    """The corrupted prompt forward and backward: gradients of LD at every leaf.

    Args:
        model: a loaded model.
        setup: the task.
        leaves: hook name -> layer of the activations to differentiate LD by.
        keep: hook name -> what to keep of that activation's value (leaves or not).
        hooks: extra forward hooks for the pass (e.g. freezing a norm), applied before ours.
        grad_drop: also compute the GradDrop gradients (``n_layers - 1`` partial backward
            passes on the same graph).
        progress: called before each backward pass; may raise ``Cancelled``.
    """
    n_layers = model.facts.n_layers
    residual = [resid_pre_hook(layer) for layer in range(n_layers)] + [final_norm_in_hook()]
    check_hooks(model, [*leaves, *keep, *(residual if grad_drop else [])])
    leaf_of: dict[str, torch.Tensor] = {}
    out_of: dict[str, torch.Tensor] = {}
    values: dict[str, torch.Tensor] = {}
    wanted = dict(leaves)
    if grad_drop:
        wanted.update({name: -1 for name in residual if name not in wanted})

    def add_leaf(name: str) -> Callable[..., torch.Tensor]:
        def hook(act: torch.Tensor, hook: object = None) -> torch.Tensor:
            leaf = torch.zeros_like(act, requires_grad=True)
            leaf_of[name] = leaf
            if name in keep:
                values[name] = kept(keep[name](act.detach()))
            out_of[name] = act + leaf
            return out_of[name]

        return hook

    def keep_value(name: str) -> Callable[..., None]:
        def hook(act: torch.Tensor, hook: object = None) -> None:
            values[name] = kept(keep[name](act.detach()))

        return hook

    progress(0.0, "the corrupted prompt, forward")
    ours = [(n, add_leaf(n)) for n in wanted] + [
        (n, keep_value(n)) for n in keep if n not in wanted
    ]
    logits = run_with_hooks(model, setup.corrupted_ids, [*hooks, *ours], grad=True)
    ld = logits[0, -1, setup.answer_id] - logits[0, -1, setup.wrong_id]
    names = list(wanted)
    progress(0.3 if grad_drop else 0.5, "the corrupted prompt, backward")
    found = torch.autograd.grad(
        ld, [leaf_of[n] for n in names], retain_graph=grad_drop, allow_unused=True
    )
    full = {n: _cpu(g, leaf_of[n]) for n, g in zip(names, found, strict=True)}
    run = GradientRun(ld=float(ld.detach()), values=values, grads={n: full[n] for n in leaves})
    if grad_drop:
        run.dropped = _dropped(leaves, residual, out_of, leaf_of, full, progress)
    progress(1.0, "gradients done")
    return run


def _cpu(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    grad = torch.zeros_like(like) if grad is None else grad
    return grad.detach().to("cpu", torch.float32)


def _dropped(
    leaves: Mapping[str, int],
    residual: list[str],
    out_of: dict[str, torch.Tensor],
    leaf_of: dict[str, torch.Tensor],
    full: dict[str, torch.Tensor],
    progress: Progress,
) -> dict[int, dict[str, torch.Tensor]]:
    """Gradients of the leaves below each block with that block's writes dropped."""
    n_layers = len(residual) - 1
    dropped: dict[int, dict[str, torch.Tensor]] = {}
    for layer in range(1, n_layers):
        progress(0.3 + 0.7 * layer / n_layers, f"GradDrop: block {layer} of {n_layers - 1}")
        below = [n for n, at in leaves.items() if 0 <= at < layer]
        if not below:
            dropped[layer] = {}
            continue
        after = full[residual[layer + 1]].to(
            out_of[residual[layer]].device, out_of[residual[layer]].dtype
        )
        found = torch.autograd.grad(
            out_of[residual[layer]],
            [leaf_of[n] for n in below],
            grad_outputs=after,
            retain_graph=layer < n_layers - 1,
            allow_unused=True,
        )
        dropped[layer] = {n: _cpu(g, leaf_of[n]) for n, g in zip(below, found, strict=True)}
    return dropped
