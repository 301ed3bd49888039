"""Linear-attention layers (Gated DeltaNet, in Qwen3-Next and Qwen3.5): the exact mixing matrix.

Such a layer keeps a state matrix instead of a softmax. Per head, with ``q`` and ``k``
L2-normalised, ``q`` scaled by ``d_k^-1/2``, a decay ``alpha_t = exp(g_t)`` and a write strength
``beta_t``::

    S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,      o_t = S_t q_t

Unrolled, ``o_t = sum_{s <= t} M[t, s] v_s`` with

    M[t, s] = beta_s k_s^T [prod_{r = s+1..t} alpha_r (I - beta_r k_r k_r^T)] q_t

(the product ordered left to right). ``M`` depends on q, k, the decay and beta, never on v: it
is exactly how much of each earlier value the layer mixes into each output. Unlike a softmax
pattern it is signed and its rows need not sum to 1, so it is drawn on its own scale and never
averaged with softmax weights.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float

RULE = (
    "Linear attention, not a softmax: each cell M[t, s] is how much of token s's value this "
    "layer adds to its output at token t (o_t = Σ_s M[t, s] v_s, exact). It is signed and its "
    "rows need not sum to 1."
)
L2_EPS = 1e-6  # transformers' (and the FLA library's) l2norm: x * rsqrt(sum x^2 + 1e-6)


def is_delta_rule(module: Any) -> bool:
    """Whether a module is a Gated DeltaNet layer (a learned decay ``A_log`` and ``dt_bias``
    beside a joint input projection)."""
    projection = any(hasattr(module, name) for name in ("in_proj_qkvz", "in_proj_qkv"))
    return projection and hasattr(module, "A_log") and hasattr(module, "dt_bias")


def value_heads(module: Any) -> int:
    """How many value heads (each with its own mixing matrix) a Gated DeltaNet layer has."""
    return int(module.num_v_heads)


def l2norm(x: Float[torch.Tensor, "*any d"]) -> Float[torch.Tensor, "*any d"]:
    """``x / sqrt(sum x^2 + 1e-6)`` over the last dimension, as the delta-rule kernel does."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + L2_EPS)


def mixing_matrix(
    q: Float[torch.Tensor, "pos k_head d_k"],
    k: Float[torch.Tensor, "pos k_head d_k"],
    g: Float[torch.Tensor, "pos v_head"],
    beta: Float[torch.Tensor, "pos v_head"],
) -> Float[torch.Tensor, "v_head query_pos key_pos"]:
    """The mixing matrix ``M`` of one Gated DeltaNet layer (see the module docstring).

    Computed in float64 by running the product backwards from every query at once: after
    handling key ``r``, column ``t`` of ``w`` holds ``prod_{r..t} alpha (I - beta k k^T) q_t``,
    so ``M[t, r - 1] = beta_{r-1} k_{r-1}^T w_t``. ``pos`` steps of ``v_head * d_k * pos``.

    Args:
        q, k: the layer's queries and keys before normalisation (after its convolution), one
            per key head; value heads share them in consecutive groups.
        g: the log decay of each step (``alpha = exp(g)``), per value head.
        beta: the write strength of each step, per value head.

    Returns:
        ``M`` per value head, zero above the diagonal.
    """
    n, n_k, d_k = q.shape
    n_v = g.shape[1]
    q64, k64 = (l2norm(x.to(torch.float64)).repeat_interleave(n_v // n_k, dim=1) for x in (q, k))
    q64 = q64 * d_k**-0.5
    alpha, b = g.to(torch.float64).exp(), beta.to(torch.float64)
    w = q64.permute(1, 2, 0).contiguous()  # v_head d_k query: column t starts as q_t
    keys = k64.transpose(0, 1)  # v_head pos d_k
    out = torch.zeros(n_v, n, n, dtype=torch.float64)
    for r in range(n - 1, -1, -1):
        active = w[:, :, r:]  # queries t >= r
        dots = torch.einsum("hd,hdt->ht", keys[:, r], active)  # k_r^T w_t
        out[:, r:, r] = b[r][:, None] * dots
        w[:, :, r:] = alpha[r][:, None, None] * (
            active - b[r][:, None, None] * keys[:, r, :, None] * dots[:, None, :]
        )
    return out.to(torch.float32)
