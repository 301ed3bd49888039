"""Head loadings: the Circuits page's edges into a head, split into one part per earlier head
plus a remainder that closes the sum.

- Direct logit attribution: head ``R``'s share of LD is ``z_R(last) W_O^R . d`` (``d`` the
  readout direction, final norm scale frozen), and ``z_R(last) = sum_s A_R(last, s) v_R(s)``.
  With ``R``'s pattern and its norm's scale frozen, ``v_R(s)`` is a sum over the parts of the
  stream entering ``R``'s layer (:mod:`models.circuits.why_sides`, read through ``W_V``), so
  ``R``'s share splits exactly: each earlier head's output read through ``R``'s OV circuit,
  and the remainder (embeddings, MLPs, biases) named part by part.
- Path patching: the edge from each earlier head into ``R``'s q, k or v
  (:func:`models.circuits.paths.path_patching`) against the effect of patching that whole
  input from the clean run (one patched pass): the edges are the per-head parts, and the
  remainder -- what embeddings, MLPs and the senders' interactions carry -- is the difference,
  so the parts close the sum by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from models.circuits.attribution import readout
from models.circuits.cost import FLOAT, PassPlan, forward_cost
from models.circuits.gradients import capture
from models.circuits.input_patching import HOOK_OF, input_hooks
from models.circuits.paths import PathResult
from models.circuits.task import Setup, logit_diff
from models.circuits.why import part_head
from models.circuits.why_keep import keep, keep_cost
from models.circuits.why_sides import read_side
from models.cost import with_slack
from models.head import Head
from models.model.forward import final_norm_in_hook, run_hooks, run_with_hooks, z_hook
from models.model.handle import ModelHandle
from models.model.norms import block_norm
from models.model.weights import output_projection, pre_norm, vocab_size
from models.progress import Progress, quiet


@dataclass(frozen=True)
class Loadings:
    """One edge into head ``receiver``, split per earlier head.

    Attributes:
        receiver: the head the edge ends at.
        edge: ``dla`` (its direct effect on LD) or ``path q|k|v`` (path patching into it).
        heads: ``layer head_index`` each earlier head's part (0 for heads that cannot reach).
        remainder: what the heads do not carry.
        total: the edge itself, as the Circuits page computes it.
        rest: the remainder's named parts (``embed``, ``mlp.L``, biases) where the split is
            exact (DLA); empty for path patching.
    """

    receiver: Head
    edge: str
    heads: np.ndarray
    remainder: float
    total: float
    rest: tuple[tuple[str, float], ...] = ()

    @property
    def gap(self) -> float:
        """``sum of parts - total``: float rounding for DLA, 0 by construction for paths."""
        return float(self.heads.sum() + self.remainder - self.total)


def dla_loadings_cost(model: ModelHandle, n_tokens: int, receiver: Head) -> PassPlan:
    """Cost of :func:`dla_loadings`: the pass keeping the receiver's parts, then one pass
    reading its ``z`` and the final norm's input."""
    return keep_cost(model, n_tokens, receiver.layer).then(forward_cost(model, n_tokens))


def path_loadings_cost(model: ModelHandle, n_tokens: int) -> PassPlan:
    """Cost of :func:`path_loadings`: a clean pass keeping the input, a patched pass.

    Memory: a pass's working memory (:func:`models.circuits.cost.forward_cost`) with two more
    of a layer's ``head_index pos pos`` float32 arrays (the hooked pass builds its attention
    eagerly: measured about 110 bytes a token squared on SmolLM2 between 200 and 400 tokens,
    where the working memory counts 72), its float32 logits over every position, and the
    receiver's clean input it patches in (a ``pos x d_model`` stream, kept as the hook hands it
    on), with :func:`models.cost.with_slack`."""
    plan = forward_cost(model, n_tokens, 2.0)
    facts = model.facts
    eager = 2 * FLOAT * facts.n_heads * n_tokens**2
    logits = FLOAT * n_tokens * vocab_size(model)
    stream = FLOAT * n_tokens * facts.d_model
    peak = with_slack(plan.peak_bytes + eager + logits + stream)
    return replace(plan, cost=replace(plan.cost, peak_bytes=peak))


def dla_loadings(
    model: ModelHandle, setup: Setup, receiver: Head, progress: Progress = quiet
) -> Loadings:
    """Head ``receiver``'s direct logit attribution on the clean prompt, split by part.

    Two passes over the clean prompt: one keeping the stream entering the receiver's layer as
    parts (and its queries and keys, for its pattern), one for its ``z`` and the final norm's
    input.
    """
    last = setup.n_tokens - 1
    kept = keep(model, setup.clean_ids, receiver, progress)
    weights = kept.terms.weights(kept.raw_row(last), last)
    reading = block_norm(model, receiver.layer, "ln1") if pre_norm(model) else None
    values = read_side(model, kept.stream, kept.resid_pre, receiver, "value", reading)
    mixed = torch.einsum("s,spd->pd", weights, values.at(slice(None)))
    seen = run_hooks(model, setup.clean_ids, [final_norm_in_hook(), z_hook(receiver.layer)])
    direction = readout(model, setup, seen[final_norm_in_hook()][0, last].double())[0]
    w_o = output_projection(model, receiver.layer)[0][receiver.index]
    shares = (mixed @ w_o @ direction).numpy()
    z = seen[z_hook(receiver.layer)][0, last, receiver.index].double()
    heads = np.zeros((model.facts.n_layers, model.facts.n_heads))
    rest = []
    for name, share in zip(values.names, shares, strict=True):
        head = part_head(name)
        if head is None:
            rest.append((name, float(share)))
        else:
            heads[head] = share
    return Loadings(
        receiver=receiver,
        edge="dla",
        heads=heads,
        remainder=float(sum(share for _, share in rest)),
        total=float(z @ w_o @ direction),
        rest=tuple(rest),
    )


def path_loadings(model: ModelHandle, setup: Setup, result: PathResult) -> Loadings:
    """Path patching into ``result.receiver``'s input: the per-sender edges, and the rest of
    the effect of patching that whole input (clean, at every position) into the corrupted run,
    normalised as the edges are."""
    which, layer = result.input, result.receiver.layer
    name = HOOK_OF[which](layer)
    _, clean = capture(model, setup.clean_ids, setup, {name: lambda act: act})
    logits = run_with_hooks(
        model, setup.corrupted_ids, input_hooks(which, [(layer, result.index)], clean)
    )
    patched = float(logit_diff(logits, setup.answer_id, setup.wrong_id)[0])
    total = (patched - result.ld_corrupted) / (result.ld_clean - result.ld_corrupted)
    heads = np.asarray(result.effects, dtype=np.float64)
    return Loadings(
        receiver=result.receiver,
        edge=f"path {which}",
        heads=heads,
        remainder=float(total - heads.sum()),
        total=float(total),
    )
