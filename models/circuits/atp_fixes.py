"""AtP*'s two fixes (Kramar et al. 2024, arXiv 2403.00745) as pure functions of tensors.

QK fix. A patched query or key changes a head's output only through its attention pattern, and
the softmax is where a first-order estimate fails (a saturated row has a near-zero gradient
however far the patch moves it). So the pattern is recomputed exactly with the patched q or k
and only the step from the pattern to LD is linearised::

    estimate = sum_{query, key} (A_patched - A_corrupted) * dLD/dA

``A_patched = softmax(s + scale * (q' k'^T - q k^T))`` from the corrupted run's own scores ``s``
(which already hold the causal mask, sliding windows and ALiBi), with q and k as the softmax sees
them (rotated on RoPE models).

GradDrop. Paths through different later layers can cancel in the gradient, hiding a node whose
patch matters. For every layer ``l`` the estimate ``I_l`` is recomputed with the gradient
through block ``l``'s residual writes dropped, and the paper's equation 11 averages their sizes::

    c_GradDrop(n) = 1 / (L - 1) * sum_{l=1..L} |I_l(n)|

For a node in layer ``m``: ``I_l = AtP`` for ``l < m`` (nothing downstream changed), ``I_m = 0``
(its only way out is block ``m``'s write), so a node whose paths do not cancel gets exactly
``|AtP|``. The paper ranks by this size; to put it on the signed patch-effect scale we give it
the sign of the largest ``I_l`` in size, the path that dominates.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from jaxtyping import Float


def patched_patterns(
    scores: Float[torch.Tensor, "head_index query_pos key_pos"],
    q_old: Float[torch.Tensor, "*batch pos head_index d_head"],
    q_new: Float[torch.Tensor, "*batch pos head_index d_head"],
    k_old: Float[torch.Tensor, "*batch pos kv_head d_head"],
    k_new: Float[torch.Tensor, "*batch pos kv_head d_head"],
    scale: float,
) -> Float[torch.Tensor, "*batch head_index query_pos key_pos"]:
    """Every head's pattern with its q (and its key/value group's k) replaced, in float64.

    Heads are independent, so replacing every head's q at once gives each head the pattern it
    would have were only its own q patched; a k patch changes the patterns of the query heads
    of its group. Leading batch axes (e.g. one per sender) broadcast.

    Args:
        scores: the corrupted run's attention logits (masked entries very negative or -inf).
        q_old, q_new: queries as the softmax sees them, before and after the patch.
        k_old, k_new: keys likewise, ``n_kv_heads`` of them.
        scale: the layer's logit multiplier.
    """
    group = q_old.shape[-2] // k_old.shape[-2]
    k_old = k_old.to(torch.float64).repeat_interleave(group, dim=-2)
    k_new = k_new.to(torch.float64).repeat_interleave(group, dim=-2)
    change = torch.einsum("...qhd,...khd->...hqk", q_new.to(torch.float64), k_new) - torch.einsum(
        "...qhd,...khd->...hqk", q_old.to(torch.float64), k_old
    )
    return softmax(scores.to(torch.float64) + scale * change)


def softmax(scores: Float[torch.Tensor, "... key_pos"]) -> Float[torch.Tensor, "... key_pos"]:
    """Softmax over keys; a row with no allowed key gives zeros, not NaN."""
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)


def pattern_effect(
    new: Float[torch.Tensor, "head_index query_pos key_pos"],
    old: Float[torch.Tensor, "head_index query_pos key_pos"],
    grad: Float[torch.Tensor, "head_index query_pos key_pos"],
) -> Float[torch.Tensor, " head_index"]:
    """``sum (new - old) * grad`` per head (float64)."""
    return ((new - old) * grad.to(torch.float64)).sum(dim=(-2, -1))


def grad_drop_combine(atp: np.ndarray, dropped: Mapping[int, np.ndarray]) -> np.ndarray:
    """Equation 11 of the AtP* paper, signed by the largest term.

    Args:
        atp: ``layer ...`` plain estimates (the gradient with nothing dropped).
        dropped: for each layer ``l`` from 1 to ``L - 1``, ``layer ...`` estimates with block
            ``l``'s gradient dropped; only the entries of layers ``< l`` are read. Missing
            layers count as unchanged (``AtP``).

    Returns:
        ``layer ...`` float64: ``sum_l |I_l| / (L - 1)`` with the sign of the largest ``I_l``;
        ``atp`` itself for a one-layer model.
    """
    atp = np.asarray(atp, dtype=np.float64)
    n_layers = atp.shape[0]
    if n_layers < 2:
        return atp.copy()
    terms = np.repeat(atp[None], n_layers, axis=0)  # drop layer l, node layer m
    for node_layer in range(n_layers):
        terms[node_layer, node_layer] = 0.0
    for layer, values in dropped.items():
        values = np.asarray(values, dtype=np.float64)
        terms[layer, :layer] = values[:layer]
    size = np.abs(terms).sum(axis=0) / (n_layers - 1)
    strongest = np.take_along_axis(terms, np.abs(terms).argmax(axis=0)[None], axis=0)[0]
    signed: np.ndarray = np.sign(strongest) * size
    return signed
