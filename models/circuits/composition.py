"""Q-, K- and V-composition between every pair of heads in different layers (Elhage et al. 2021),
from the weights alone.

With row vectors, head ``A`` writes ``x W_V^A W_O^A`` (its OV matrix) and head ``B`` compares
``y W_Q^B`` with ``x W_K^B`` (its QK matrix ``W_Q^B W_K^B^T``). A's output composes with B::

    Q:  ||W_OV^A W_QK^B||   / (||W_OV^A|| ||W_QK^B||)    A feeds B's queries
    K:  ||W_OV^A W_QK^B^T|| / (||W_OV^A|| ||W_QK^B||)    A feeds B's keys
    V:  ||W_OV^A W_OV^B||   / (||W_OV^A|| ||W_OV^B||)    A feeds B's values

(Frobenius norms; 0 for orthogonal subspaces, at most 1). Reading matrices carry the affine part
of the norm in front of their block (weight, and centring for LayerNorm; the division by the
norm's scale is left out, as in TransformerLens' folded weights). On GQA models a query head's
W_K and W_V are its key/value head's.

Nothing ``d_model x d_model`` is built: with ``X = W_O^A W_Q^B`` (``d_head x d_head``),
``||W_V^A X W_K^B^T||^2 = sum((W_V^A^T W_V^A X) * (X W_K^B^T W_K^B))``, so a pair costs
``2 d_head^2 d_model`` FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int

from models.head import Head
from models.model.handle import ModelHandle
from models.model.weights import attention_norm, output_weights, projection
from models.progress import Progress, quiet


@dataclass(frozen=True)
class HeadMatrices:
    """Every head's weights, flattened over layers (float64, CPU).

    Attributes:
        layer: ``head`` the layer of each query head (``n_layers * n_heads`` of them).
        q: ``head d_model d_head`` W_Q (norm folded in).
        o: ``head d_head d_model`` W_O.
        k, v: ``kv d_model d_head`` W_K and W_V of every key/value head (norm folded in).
        kv_of: ``head`` the key/value head (index into ``k``/``v``) each query head reads.
    """

    layer: np.ndarray
    q: torch.Tensor
    o: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    kv_of: np.ndarray


def head_matrices(model: ModelHandle) -> HeadMatrices:
    """Read :class:`HeadMatrices` off a loaded model (filled in place, layer by layer, so no
    second copy of every head's weights is held while they are joined)."""
    facts = model.facts
    n, kv, d_model, d_head = facts.n_heads, facts.n_kv_heads, facts.d_model, facts.d_head
    f64 = torch.float64
    q = torch.empty(facts.n_layers * n, d_model, d_head, dtype=f64)
    o = torch.empty(facts.n_layers * n, d_head, d_model, dtype=f64)
    k = torch.empty(facts.n_layers * kv, d_model, d_head, dtype=f64)
    v = torch.empty(facts.n_layers * kv, d_model, d_head, dtype=f64)
    layers, kv_of = [], []
    for layer in range(facts.n_layers):
        norm = attention_norm(model, layer)
        heads, kv_heads = slice(layer * n, (layer + 1) * n), slice(layer * kv, (layer + 1) * kv)
        q[heads] = norm.fold(projection(model, layer, "q", f64)[0])
        k[kv_heads] = norm.fold(projection(model, layer, "k", f64)[0])
        v[kv_heads] = norm.fold(projection(model, layer, "v", f64)[0])
        o[heads] = output_weights(model, layer, f64)
        layers += [layer] * n
        kv_of += [layer * kv + facts.groups.kv_head(h) for h in range(n)]
    return HeadMatrices(layer=np.array(layers), q=q, o=o, k=k, v=v, kv_of=np.array(kv_of))


def _gram(m: torch.Tensor) -> torch.Tensor:
    """``M^T M`` for ``... d_model d_head`` (``d_head x d_head``)."""
    return m.transpose(-1, -2) @ m


def _root(gram: torch.Tensor) -> torch.Tensor:
    """``F`` with ``F F^T = gram`` (symmetric positive semi-definite, float64)."""
    values, vectors = torch.linalg.eigh(gram)
    factor: torch.Tensor = vectors * values.clamp(min=0).sqrt()[..., None, :]
    return factor


def composition_scores(
    q: Float[torch.Tensor, "head d_model d_head"],
    k: Float[torch.Tensor, "kv d_model d_head"],
    v: Float[torch.Tensor, "kv d_model d_head"],
    o: Float[torch.Tensor, "head d_head d_model"],
    kv_of: Int[np.ndarray, " head"],
    layer: Int[np.ndarray, " head"],
    progress: Progress = quiet,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q-, K- and V-composition of every sender (rows) into every receiver (columns).

    Each squared norm ``tr(X^T G_left X G_right)`` (``G`` the Gram matrices of the outer
    factors) is computed as ``||F_left^T X F_right||^2`` with ``F F^T = G`` for Q-composition and
    as ``sum((Y^T Y) * G_right)``, ``Y = F_left^T X``, for K and V, where ``Y`` is shared by the
    query heads of a key/value group: a pair costs at most one ``d_head x d_model x d_head``
    product.

    Args:
        q, k, v, o: the heads' matrices (:class:`HeadMatrices`).
        kv_of: the key/value head each query head reads.
        layer: each query head's layer.
        progress: called per sender layer; may raise ``Cancelled``.

    Returns:
        three ``head head`` float64 arrays; NaN unless the sender's layer is below the
        receiver's.
    """
    kv_of_t = torch.as_tensor(kv_of)
    f32 = torch.float32
    gv, gk, gq, go = _gram(v), _gram(k), _gram(q), o @ o.transpose(-1, -2)
    ov_norm2 = (gv[kv_of_t] * go).sum(dim=(-2, -1))
    qk_norm2 = (gq * gk[kv_of_t]).sum(dim=(-2, -1))
    writes = (_root(gv)[kv_of_t].transpose(-1, -2) @ o).to(f32)  # head d_head d_model
    q_reads = (q @ _root(gk)[kv_of_t]).to(f32)  # head d_model d_head
    right = {"k": gq.to(f32), "v": go.to(f32)}
    kv_reads = {"k": k.to(f32), "v": v.to(f32)}
    n, d_model = len(layer), o.shape[2]
    out = {which: np.full((n, n), np.nan) for which in ("q", "k", "v")}
    layers = np.unique(layer)
    for step, sender_layer in enumerate(layers):
        progress(step / len(layers), f"composition from layer {sender_layer}")
        senders, later = np.nonzero(layer == sender_layer)[0], np.nonzero(layer > sender_layer)[0]
        if not len(later):
            continue
        s_idx, l_idx = torch.as_tensor(senders), torch.as_tensor(later)
        rows = writes[s_idx].reshape(-1, d_model)  # (sender d_head) d_model
        x = _products(rows, q_reads[l_idx], len(senders))
        found = {"q": (x * x).sum(dim=(-2, -1))}
        kv_later = torch.unique(kv_of_t[l_idx])
        group = len(later) // len(kv_later)  # later layers are whole, so groups are complete
        for which in ("k", "v"):
            shared = _products(rows, kv_reads[which][kv_later], len(senders))
            gram = shared.transpose(-1, -2) @ shared  # ||X F||^2 = sum((X^T X) * (F F^T))
            outer = right[which][l_idx].view(len(kv_later), group, *gram.shape[-2:])
            found[which] = torch.einsum("skij,kgij->skg", gram, outer).reshape(len(senders), -1)
        for which, num in found.items():
            other = ov_norm2 if which == "v" else qk_norm2
            scale = torch.sqrt(ov_norm2[s_idx][:, None] * other[l_idx][None])
            out[which][np.ix_(senders, later)] = (num.double().clamp(min=0).sqrt() / scale).numpy()
    return out["q"], out["k"], out["v"]


def _products(rows: torch.Tensor, reads: torch.Tensor, n_senders: int) -> torch.Tensor:
    """``sender reader d_head d_head`` blocks of ``rows @ reads`` in one matrix product."""
    d_head = reads.shape[-1]
    cols = reads.permute(1, 0, 2).reshape(reads.shape[1], -1)
    return (rows @ cols).view(n_senders, -1, len(reads), d_head).transpose(1, 2)


@dataclass(frozen=True)
class Composition:
    """Composition scores between every pair of heads (sender rows, receiver columns, in
    ``layer * n_heads + head`` order; NaN unless the sender sits in an earlier layer)."""

    n_heads: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray

    def head(self, flat: int) -> Head:
        return Head(flat // self.n_heads, flat % self.n_heads)

    def pairs(self) -> list[tuple[Head, Head, float, float, float]]:
        """``(sender, receiver, q, k, v)`` for every pair in different layers."""
        senders, receivers = np.nonzero(np.isfinite(self.q))
        return [
            (
                self.head(int(s)),
                self.head(int(r)),
                float(self.q[s, r]),
                float(self.k[s, r]),
                float(self.v[s, r]),
            )
            for s, r in zip(senders, receivers, strict=True)
        ]


def composition(model: ModelHandle, progress: Progress = quiet) -> Composition:
    """Q-, K- and V-composition scores of ``model`` (see the module docstring)."""
    m = head_matrices(model)
    q, k, v = composition_scores(m.q, m.k, m.v, m.o, m.kv_of, m.layer, progress)
    return Composition(n_heads=model.facts.n_heads, q=q, k=k, v=v)
