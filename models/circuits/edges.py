"""A first picture of the whole head-to-head graph: attribution-patching estimates of every path
effect (sender head -> receiver head's q, k or v), from the passes of
:func:`models.circuits.atp_runs.attribution_runs` (and, with MLPs recomputed, one forward pass
per sender, batched).

For sender ``s`` and receiver input ``x`` (in a later layer), the receiver's new input is
computed exactly as path patching computes it (the residual entering the receiver's block with
only the sender's output clean, through the receiver's own norm and projection: with MLPs
recomputed, one batched forward pass per chunk of senders gives it for every receiver layer at
once; with ``direct`` it is the corrupted residual plus the sender's write, no pass at all),
and only the step from there to LD is linearised::

    edge(s -> x) = (x(s) - x_corrupted) . dLD/dx

With the QK fix, a q or k edge instead recomputes the receiver's attention pattern with the new
(rotated) q or k and linearises from the pattern: ``(A(s) - A) . dLD/dA``, summed over the
query heads of a key/value group for k. v edges are always first order after the value.
Estimates are normalised by ``LD_clean - LD_corrupted`` like every patch effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.circuits.atp_fixes import patched_patterns, pattern_effect, softmax
from models.circuits.atp_runs import AtPRuns
from models.circuits.paths import MLPMode, sender_residuals, sender_writes
from models.circuits.task import Setup
from models.head import Head, all_heads
from models.model.forward import (
    k_hook,
    pattern_hook,
    q_hook,
    resid_pre_hook,
    scores_hook,
    softmax_qk,
    v_hook,
)
from models.model.handle import ModelHandle
from models.model.softmax_terms import rotate
from models.model.weights import Projection, input_norm, n_heads_of, projection
from models.progress import Progress, quiet

INPUTS: tuple[Projection, ...] = ("q", "k", "v")
SENDER_CHUNK = 32
BUDGET_BYTES = 256 * 2**20


def chunk_size(model: ModelHandle, n_tokens: int, budget: int = BUDGET_BYTES) -> int:
    """Senders handled at once: each holds its residual at every layer (float32) and, with the
    QK fix, three float64 copies of a layer's patterns."""
    f = model.facts
    per_sender = 4 * f.n_layers * n_tokens * f.d_model + 24 * f.n_heads * n_tokens**2
    return int(max(1, min(SENDER_CHUNK, budget // per_sender)))


@dataclass(frozen=True)
class EdgeEstimates:
    """Estimated path effects, receiver first.

    Attributes:
        q: ``layer head_index layer head_index``: ``q[L, H, l, h]`` is sender ``l.h`` into the
            q of receiver ``L.H``.
        k, v: ``layer kv_head layer head_index``: into key/value head ``G`` of layer ``L``.
        qk_fix: whether q and k edges recomputed the receiver's pattern.
        group: query heads per key/value head.
        mlps: whether the sender reached the receiver through MLPs too (see
            :mod:`models.circuits.paths`).
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    qk_fix: bool
    group: int
    mlps: MLPMode = "recomputed"

    def of(self, which: Projection) -> np.ndarray:
        """The array of one input kind."""
        return {"q": self.q, "k": self.k, "v": self.v}[which]

    def into(self, receiver: Head, which: Projection) -> np.ndarray:
        """``layer head_index`` estimates of every sender into ``receiver``'s ``which``."""
        index = receiver.index if which == "q" else receiver.index // self.group
        row: np.ndarray = self.of(which)[receiver.layer, index]
        return row


def layer_inputs(
    model: ModelHandle, layer: int, which: Projection, resid: torch.Tensor
) -> torch.Tensor:
    """Every head's q, k or v (``... pos head_index d_head``, float64, CPU) from ``resid``."""
    weight, bias = projection(model, layer, which)
    with torch.no_grad():
        normed = input_norm(model, layer)(resid.to(weight.device, weight.dtype))
        out = torch.einsum("...pm,hmd->...phd", normed, weight) + bias
    return out.to("cpu", torch.float64)


def _rotated(runs: AtPRuns, layer: int, x: torch.Tensor) -> torch.Tensor:
    if layer not in runs.rotation:
        return x
    cos, sin = (t.to(torch.float64) for t in runs.rotation[layer])
    flat = x.reshape(-1, *x.shape[-3:])
    return rotate(flat, cos.expand(len(flat), -1, -1), sin.expand(len(flat), -1, -1)).view_as(x)


def _layer_edges(
    model: ModelHandle, runs: AtPRuns, layer: int, moved_resid: torch.Tensor
) -> dict[str, torch.Tensor]:
    """``sender head`` estimates into every input of block ``layer`` (unnormalised), given the
    residual entering it with each sender's clean output (``sender pos d_model``)."""
    values, grads = runs.run.values, runs.run.grads
    resid = values[resid_pre_hook(layer)]
    out: dict[str, torch.Tensor] = {}
    for which, name in zip(INPUTS, (q_hook(layer), k_hook(layer), v_hook(layer)), strict=True):
        base = layer_inputs(model, layer, which, resid)
        delta = layer_inputs(model, layer, which, moved_resid.to(resid)) - base
        grad = grads[name][0].double()
        out[which] = torch.einsum("sphd,phd->sh", delta, grad)
        if runs.qk_fix and which in ("q", "k") and runs.source is not None:
            q_old, k_old = (t[0].double() for t in softmax_qk(values, layer, runs.source))
            scores = values[scores_hook(layer)][0].double()
            moved = _rotated(runs, layer, delta)  # sender pos head d_head
            q_new = q_old + moved if which == "q" else q_old
            k_new = k_old + moved if which == "k" else k_old
            new = patched_patterns(scores, q_old, q_new, k_old, k_new, runs.scales[layer])
            effect = pattern_effect(new, softmax(scores), grads[pattern_hook(layer)][0])
            group = q_old.shape[1] // k_old.shape[1]
            out[which] = effect if which == "q" else effect.view(len(moved), -1, group).sum(-1)
    return out


def edge_estimates(
    model: ModelHandle,
    runs: AtPRuns,
    setup: Setup,
    *,
    mlps: MLPMode = "recomputed",
    layers: Sequence[int] | None = None,
    progress: Progress = quiet,
) -> EdgeEstimates:
    """Estimated path effect of every sender into every receiver input.

    Args:
        model: the model the runs came from.
        runs: :func:`models.circuits.atp_runs.attribution_runs` (its ``qk_fix`` decides the
            estimate for q and k).
        setup: the task the runs were made for.
        mlps: ``recomputed`` (the sender's output reaches the receiver through MLPs too; one
            forward pass per sender, :func:`chunk_size` senders a pass) or ``direct``
            (through the residual stream alone; no forward pass).
        layers: receiver layers to fill (default all); other entries stay 0.
        progress: called per chunk of senders; may raise ``Cancelled``.
    """
    facts = model.facts
    n_layers, n_heads = facts.n_layers, facts.n_heads
    arrays = {w: np.zeros((n_layers, n_heads_of(facts, w), n_layers, n_heads)) for w in INPUTS}
    wanted = sorted(set(range(1, n_layers) if layers is None else layers) - {0})
    senders = [s for s in all_heads(n_layers, n_heads) if wanted and s.layer < wanted[-1]]
    values = runs.run.values
    size = chunk_size(model, setup.n_tokens)
    for start in range(0, len(senders), size):
        chunk = senders[start : start + size]
        progress(start / max(len(senders), 1), f"edges from {chunk[0]} to {chunk[-1]}")
        later = [layer for layer in wanted if layer > chunk[0].layer]
        if mlps == "direct":
            writes = sender_writes(model, runs.clean, values, chunk)
            moved = {at: values[resid_pre_hook(at)] + writes.to(torch.float32) for at in later}
        else:
            moved = sender_residuals(model, setup, chunk, runs.clean, values, later)
        for layer in later:
            rows = [row for row, sender in enumerate(chunk) if sender.layer < layer]
            found = _layer_edges(model, runs, layer, moved[layer][rows])
            for which in INPUTS:
                estimate = found[which].numpy() / runs.gap
                for row, sender in enumerate(chunk[i] for i in rows):
                    arrays[which][layer, :, sender.layer, sender.index] = estimate[row]
    progress(1.0, "done")
    group = facts.groups.size
    return EdgeEstimates(
        q=arrays["q"], k=arrays["k"], v=arrays["v"], qk_fix=runs.qk_fix, group=group, mlps=mlps
    )
