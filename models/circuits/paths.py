"""Path patching (Wang et al. 2022, IOI; Goldowsky-Dill et al. 2023): the effect of each earlier
head (the sender) on a chosen head (the receiver) through one of the receiver's inputs alone.

The sender's clean output reaches the receiver's q, k or v while every other head keeps its
corrupted output; the receiver's input so computed is patched into the corrupted run, and the
rest of the model runs from there. Two variants, :data:`MLPMode`:

- ``recomputed`` (the IOI paper's): MLPs between sender and receiver recompute, so the path
  runs through them too. One pass per sender: heads frozen at their corrupted outputs but the
  sender's, the residual entering the receiver's block read and then reset to the corrupted
  one, the receiver's input recomputed from what was read;
- ``direct`` (TransformerLens' direct path patching): MLPs frozen too, so the receiver's input
  is ``norm(resid_corrupted + (z_clean^s - z_corrupted^s) W_O^s) W_x + b_x``, and the pass
  starts at the receiver's block.

A head in the receiver's layer or later cannot reach it: its effect is 0. Many senders share
one forward pass as in :mod:`models.circuits.patching`; effects are normalised by
``LD_clean - LD_corrupted``.

On GQA models the k and v inputs belong to a key/value head shared by
``n_heads // n_kv_heads`` query heads: the path into "k of L.H" patches that shared key/value
head, which every head of the group reads (:attr:`PathResult.shared_by`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from jaxtyping import Float

from models.circuits.gradients import capture
from models.circuits.input_patching import HOOK_OF
from models.circuits.patching import MIN_GAP, batch_size
from models.circuits.resumed import run_from
from models.circuits.task import CircuitsUnavailable, Setup, TaskError, logit_diff
from models.head import Head
from models.model.forward import Hook, resid_pre_hook, z_hook
from models.model.handle import ModelHandle
from models.model.weights import (
    Projection,
    input_norm,
    output_weights,
    projection,
)
from models.progress import Progress, quiet

SELF_CHECK = 1e-3  # largest relative gap between our receiver input and the model's own
MLPMode = Literal["recomputed", "direct"]


@dataclass(frozen=True)
class PathResult:
    """Path patching into one receiver input.

    Attributes:
        receiver: the receiving head.
        input: ``"q"``, ``"k"`` or ``"v"``.
        index: the head index of the patched input (the key/value head for k and v).
        shared_by: the query heads that read that input (just the receiver for q).
        effects: ``layer head_index`` path effect of each sender (0 where it cannot reach).
        ld_clean, ld_corrupted: the unpatched runs' logit differences.
        mlps: whether MLPs recomputed on the way (``recomputed``) or were frozen (``direct``).
    """

    receiver: Head
    input: Projection
    index: int
    shared_by: tuple[int, ...]
    effects: np.ndarray
    ld_clean: float
    ld_corrupted: float
    mlps: MLPMode = "recomputed"


def receiver_input(
    model: ModelHandle,
    layer: int,
    which: Projection,
    index: int,
    resid: Float[torch.Tensor, "batch pos d_model"],
) -> Float[torch.Tensor, "batch pos d_head"]:
    """Head ``index``'s q, k or v (before any rotation) computed from the residual ``resid``
    entering block ``layer``, with the model's own norm and weights (on the model's device)."""
    weight, bias = projection(model, layer, which)
    with torch.no_grad():
        normed = input_norm(model, layer)(resid.to(weight.device, weight.dtype))
        return normed @ weight[index] + bias[index]


def sender_writes(
    model: ModelHandle,
    clean: dict[str, torch.Tensor],
    corrupted: dict[str, torch.Tensor],
    senders: Sequence[Head],
) -> Float[torch.Tensor, "sender pos d_model"]:
    """``(z_clean - z_corrupted) W_O`` of each sender at every position (model dtype/device)."""
    out = []
    for head in senders:
        w_o = output_weights(model, head.layer)[head.index]
        name = z_hook(head.layer)
        delta = (clean[name][0, :, head.index] - corrupted[name][0, :, head.index]).to(w_o)
        out.append(delta @ w_o)
    return torch.stack(out)


def check_receiver(
    model: ModelHandle,
    layer: int,
    which: Projection,
    index: int,
    corrupted: dict[str, torch.Tensor],
) -> None:
    """Raise :class:`CircuitsUnavailable` unless :func:`receiver_input` reproduces the model's
    own input on the corrupted run (a norm or projection this module does not know about)."""
    ours = receiver_input(model, layer, which, index, corrupted[resid_pre_hook(layer)])
    theirs = corrupted[HOOK_OF[which](layer)][0, :, index].to(ours)
    gap = float((ours[0] - theirs).abs().max())
    if gap > SELF_CHECK * max(1.0, float(theirs.abs().max())):
        raise CircuitsUnavailable(
            f"Path patching is not available for {model.facts.name}: its {which} inputs are "
            f"not norm(residual) @ W_{which.upper()} (off by {gap:.3g})."
        )


def path_patching(
    model: ModelHandle,
    setup: Setup,
    receiver: Head,
    which: Projection,
    *,
    mlps: MLPMode = "recomputed",
    hooks: Sequence[Hook] = (),
    batch: int | None = None,
    progress: Progress = quiet,
) -> PathResult:
    """Path effect of every head in an earlier layer on ``receiver`` through its ``which``.

    Args:
        model: a causal language model.
        setup: the prepared task.
        receiver: the receiving head.
        which: ``"q"``, ``"k"`` or ``"v"``.
        mlps: ``recomputed`` (IOI) or ``direct`` (MLPs frozen).
        hooks: forward hooks applied to every run (e.g. to freeze a later norm); they must act
            on the receiver's block or later.
        batch: senders per forward pass (default: a memory budget).
        progress: called before each pass; may raise ``Cancelled``.

    Raises:
        ValueError: the receiver is not a head of the model.
        TaskError: the clean and corrupted runs give the same logit difference.
        CircuitsUnavailable: a hook is missing, or the receiver's input cannot be recomputed.
    """
    facts = model.facts
    if not receiver.fits(facts.n_layers, facts.n_heads):
        raise ValueError(f"{receiver} is not a head of {facts.name}")
    layer = receiver.layer
    index = receiver.index if which == "q" else facts.groups.kv_head(receiver.index)
    shared = (receiver.index,) if which == "q" else tuple(facts.groups.query_heads(index))
    z_names = {z_hook(earlier): _whole for earlier in range(layer)}
    progress(0.0, "the clean and corrupted prompts")
    ld_clean, clean = capture(model, setup.clean_ids, setup, z_names, hooks)
    resid_names = {resid_pre_hook(earlier): _whole for earlier in range(layer + 1)}
    wanted = {**z_names, **resid_names, HOOK_OF[which](layer): _whole}
    ld_corrupted, corrupted = capture(model, setup.corrupted_ids, setup, wanted, hooks)
    if abs(ld_clean - ld_corrupted) < MIN_GAP:
        raise TaskError(
            "The clean and corrupted prompts give the same logit difference: there is "
            "nothing for a patch to restore."
        )
    check_receiver(model, layer, which, index, corrupted)
    senders = [Head(s_layer, s_head) for s_layer in range(layer) for s_head in range(facts.n_heads)]
    effects = np.zeros((facts.n_layers, facts.n_heads))
    batch = batch or batch_size(model, setup.n_tokens)
    n_passes = math.ceil(len(senders) / batch)
    for i in range(n_passes):
        chunk = senders[i * batch : (i + 1) * batch]
        progress(0.1 + 0.9 * i / n_passes, f"path patching: pass {i + 1} of {n_passes}")
        if mlps == "direct":
            resid = corrupted[resid_pre_hook(layer)]
            writes = sender_writes(model, clean, corrupted, chunk).to(resid)
            inputs = receiver_input(model, layer, which, index, resid + writes)
            ours, start = [(HOOK_OF[which](layer), _replace(index, inputs))], layer
        else:
            ours, start = _recomputed_hooks(model, receiver, which, index, chunk, clean, corrupted)
        logits = run_from(
            model,
            setup.corrupted_ids,
            [*hooks, *ours],
            start,
            corrupted[resid_pre_hook(start)],
            len(chunk),
        )
        ld = logit_diff(logits, setup.answer_id, setup.wrong_id).numpy()
        for head, value in zip(chunk, ld, strict=True):
            effects[head] = (value - ld_corrupted) / (ld_clean - ld_corrupted)
    progress(1.0, "done")
    return PathResult(receiver, which, index, shared, effects, ld_clean, ld_corrupted, mlps)


def frozen_heads(
    chunk: Sequence[Head],
    clean: dict[str, torch.Tensor],
    corrupted: dict[str, torch.Tensor],
    start: int,
    stop: int,
) -> list[Hook]:
    """``hook_z`` hooks for blocks ``start..stop-1``: every head at its corrupted output but
    batch row ``i``'s sender ``chunk[i]``, which gets its clean output."""

    def heads(at: int) -> Callable[..., torch.Tensor]:
        def hook(z: torch.Tensor, hook: object = None) -> torch.Tensor:
            out = corrupted[z_hook(at)].to(z.device, z.dtype).expand_as(z).clone()
            for row, head in enumerate(chunk):
                if head.layer == at:
                    out[row, :, head.index] = clean[z_hook(at)][0, :, head.index].to(out)
            return out

        return hook

    return [(z_hook(at), heads(at)) for at in range(start, stop)]


def _recomputed_hooks(
    model: ModelHandle,
    receiver: Head,
    which: Projection,
    index: int,
    chunk: Sequence[Head],
    clean: dict[str, torch.Tensor],
    corrupted: dict[str, torch.Tensor],
) -> tuple[list[Hook], int]:
    """Hooks of one pass of the ``recomputed`` variant, and the block it starts at: heads
    below the receiver frozen (:func:`frozen_heads`), the receiver block's incoming residual
    read and reset to the corrupted one, the receiver's input recomputed from what was read."""
    start, layer = min(head.layer for head in chunk), receiver.layer
    read: dict[str, torch.Tensor] = {}

    def reset(resid: torch.Tensor, hook: object = None) -> torch.Tensor:
        read["resid"] = resid.detach()
        return corrupted[resid_pre_hook(layer)].to(resid.device, resid.dtype).expand_as(resid)

    def inputs() -> torch.Tensor:
        return receiver_input(model, layer, which, index, read["resid"])

    ours = frozen_heads(chunk, clean, corrupted, start, layer)
    ours += [(resid_pre_hook(layer), reset), (HOOK_OF[which](layer), _replace(index, inputs))]
    return ours, start


def sender_residuals(
    model: ModelHandle,
    setup: Setup,
    chunk: Sequence[Head],
    clean: dict[str, torch.Tensor],
    corrupted: dict[str, torch.Tensor],
    layers: Sequence[int],
) -> dict[int, torch.Tensor]:
    """The residual entering each of ``layers`` when only sender ``chunk[i]`` (row ``i``) has its
    clean output and MLPs recompute: the first step of ``recomputed`` path patching, for every
    receiver layer at once (one pass). ``corrupted`` must hold every layer's ``resid_pre``.

    Returns:
        layer -> ``sender pos d_model`` (CPU, float32).
    """
    start, stop = min(head.layer for head in chunk), max(layers)
    seen: dict[int, torch.Tensor] = {}

    def keep(at: int) -> Callable[..., None]:
        def hook(resid: torch.Tensor, hook: object = None) -> None:
            seen[at] = resid.detach().to("cpu", torch.float32)

        return hook

    ours = frozen_heads(chunk, clean, corrupted, start, stop)
    ours += [(resid_pre_hook(at), keep(at)) for at in layers if at > start]
    run_from(model, setup.corrupted_ids, ours, start, corrupted[resid_pre_hook(start)], len(chunk))
    base = {at: corrupted[resid_pre_hook(at)].expand(len(chunk), -1, -1) for at in layers}
    return {at: seen.get(at, base[at]) for at in layers}


def _whole(act: torch.Tensor) -> torch.Tensor:
    return act


def _replace(
    index: int, values: torch.Tensor | Callable[[], torch.Tensor]
) -> Callable[..., torch.Tensor]:
    """A hook that sets head ``index`` of batch row ``i`` to ``values[i]`` (``values()`` when a
    function: computed when the hook fires)."""

    def hook(act: torch.Tensor, hook: object = None) -> torch.Tensor:
        out = act.clone()
        found = values() if callable(values) else values
        out[:, :, index] = found.to(act.device, act.dtype)
        return out

    return hook
