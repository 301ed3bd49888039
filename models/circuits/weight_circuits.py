"""What each head's weights say without any prompt: its OV circuit's copying score and its QK
circuit's positional preferences (Elhage et al. 2021). Composition between heads is
:mod:`models.circuits.composition`.

Copying score: ``sum(lambda) / sum(|lambda|)`` over the eigenvalues of the OV circuit, 1 for a
head that copies every token to the logits, -1 for one that suppresses it. Two bases:

- ``tokens``: ``W_E W_V W_O W_U`` (vocab x vocab, token to logit), used when the unembedding is
  the embedding's transpose (tied). Its nonzero eigenvalues are those of the ``d_head x d_head``
  ``W_O W_U W_E W_V`` (the eigenvalues of AB and BA agree), so no vocab x vocab matrix is built;
- ``residual``: the full OV ``W_V W_O`` on the residual basis (nonzero eigenvalues those of
  ``W_O W_V``), for untied embeddings, encoders and models without an unembedding.

The norm in front of W_V (and the final norm before W_U) enters through its affine part: its
weight, and centring for LayerNorm.

Positional preference of the QK circuit: the logits the head gives an *average token* (the mean
token embedding, ``e``) at query position ``i`` and key position ``j < N`` (``N`` =
:data:`POSITIONS`), through the block's own norm, projections and scale:

- learned positions: ``x_i = norm(e + p_i)``, ``s_ij = scale * (x_i W_Q + b_Q).(x_j W_K + b_K)``
  (``norm`` the block's input norm; for a post-norm model such as BERT, the embedding norm);
- RoPE: ``x = norm(e)``, ``s_ij = scale * R_i (x W_Q) . R_j (x W_K)``, a function of ``i - j``
  (the RoPE relative-offset score), with the model's own rotation tables.

``A = softmax_j(s_ij)`` over the keys a query may see (``j <= i`` when causal). Reported:
``qk_prev`` = mean over queries ``i >= 1`` of ``A[i, i-1]``; ``qk_self`` = mean of ``A[i, i]``;
``qk_first`` = mean over ``i >= 1`` of ``A[i, 0]``; ``qk_locality`` = ``1 - E_A|i-j| /
E_uniform|i-j|`` (1: attends to itself, 0: no preference by distance, < 0: prefers far keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from jaxtyping import Float

from models.circuits.agreement import correlations
from models.circuits.task import CircuitsUnavailable
from models.model.forward import cos_hook, missing_hooks, run_hooks, sin_hook
from models.model.handle import ModelHandle
from models.model.softmax_terms import layer_scales, rotate
from models.model.weights import (
    attention_norm,
    embedding,
    embedding_norm,
    final_reading_norm,
    input_norm,
    mean_embedding,
    output_weights,
    position_embedding,
    projection,
    tied_embeddings,
    unembedding,
    vocab_size,
)
from models.progress import Progress, part, quiet

Basis = Literal["tokens", "residual"]
POSITIONS = 64
VOCAB_CHUNK = 8192


@dataclass(frozen=True)
class WeightScores:
    """Per-head scores read from the weights (``layer head_index`` float64 arrays).

    Attributes:
        copying: OV copying score in ``basis``.
        basis: ``tokens`` or ``residual`` (see the module docstring).
        qk_prev, qk_self, qk_first, qk_locality: positional preferences (NaN when the model
            exposes no rotation tables).
        notes: how the scores were computed, for the page.
    """

    copying: np.ndarray
    basis: Basis
    qk_prev: np.ndarray
    qk_self: np.ndarray
    qk_first: np.ndarray
    qk_locality: np.ndarray
    notes: tuple[str, ...]


def default_basis(model: ModelHandle) -> Basis:
    """``tokens`` for a causal model with tied embeddings, ``residual`` otherwise."""
    return "tokens" if model.facts.causal and tied_embeddings(model) else "residual"


def token_gram(model: ModelHandle) -> torch.Tensor:
    """``W_U' W_E`` (``d_model x d_model``, float64), W_U' with the final norm folded in.

    Read :data:`VOCAB_CHUNK` tokens at a time; the norm is folded into the product (folding
    multiplies ``W_U`` on the left, so it commutes with the sum over tokens)."""
    if unembedding(model, slice(0, 1)) is None:
        raise CircuitsUnavailable(f"{model.facts.name} has no unembedding: use the residual basis.")
    d_model = model.facts.d_model
    gram = torch.zeros(d_model, d_model, dtype=torch.float64)
    n_vocab = vocab_size(model)
    for start in range(0, n_vocab, VOCAB_CHUNK):
        tokens = slice(start, start + VOCAB_CHUNK)
        w_u = unembedding(model, tokens)
        assert w_u is not None
        gram += w_u @ embedding(model, tokens)
    norm = final_reading_norm(model)
    return gram if norm is None else norm.fold(gram)


def copying_score(eigenvalues: np.ndarray) -> float:
    """``sum(lambda) / sum(|lambda|)`` (real: the sum of a real matrix's eigenvalues is real)."""
    size = float(np.abs(eigenvalues).sum())
    return float(np.real(eigenvalues.sum()) / size) if size > 0 else float("nan")


def ov_copying_score(
    w_v: Float[torch.Tensor, "d_model d_head"],
    w_o: Float[torch.Tensor, "d_head d_model"],
    gram: Float[torch.Tensor, "d_model d_model"] | None = None,
) -> float:
    """Copying score of one OV circuit from its ``d_head x d_head`` twin.

    With ``gram = W_U W_E`` the circuit is ``W_E W_V W_O W_U`` (tokens), whose nonzero
    eigenvalues are those of ``W_O W_U W_E W_V``; without, it is ``W_V W_O`` (residual basis),
    whose nonzero eigenvalues are those of ``W_O W_V``.
    """
    small = w_o @ w_v if gram is None else w_o @ gram @ w_v
    return copying_score(np.linalg.eigvals(small.detach().to("cpu", torch.float64).numpy()))


def copying_scores(
    model: ModelHandle, basis: Basis | None = None, progress: Progress = quiet
) -> tuple[np.ndarray, Basis]:
    """Every head's OV copying score, and the basis used (default :func:`default_basis`)."""
    basis = basis or default_basis(model)
    facts = model.facts
    progress(0.0, "the token basis (W_U W_E)" if basis == "tokens" else "OV circuits")
    gram = token_gram(model) if basis == "tokens" else None
    out = np.zeros((facts.n_layers, facts.n_heads))
    for layer in range(facts.n_layers):
        progress(0.5 + 0.5 * layer / facts.n_layers, f"OV circuits of layer {layer}")
        w_v = attention_norm(model, layer).fold(projection(model, layer, "v", torch.float64)[0])
        w_o = output_weights(model, layer, torch.float64)
        for head in range(facts.n_heads):
            out[layer, head] = ov_copying_score(w_v[facts.groups.kv_head(head)], w_o[head], gram)
    return out, basis


def _rotation(model: ModelHandle, n: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]] | None:
    """Each layer's RoPE tables for positions ``0..n-1`` (a forward pass over ``n`` tokens)."""
    names = [f(layer) for layer in range(model.facts.n_layers) for f in (cos_hook, sin_hook)]
    if missing_hooks(model, names):
        return None
    try:
        acts = run_hooks(model, torch.zeros(1, n, dtype=torch.long), names)
    except KeyError:
        return None
    return {
        layer: (acts[cos_hook(layer)].double(), acts[sin_hook(layer)].double())
        for layer in range(model.facts.n_layers)
    }


def positional_logits(
    model: ModelHandle,
    layer: int,
    n: int,
    rotation: dict[int, tuple[torch.Tensor, torch.Tensor]] | None,
) -> torch.Tensor:
    """``head_index query_pos key_pos`` logits of the average token (module docstring)."""
    mean = mean_embedding(model)
    positions = position_embedding(model)
    rows = mean[None].expand(n, -1) if positions is None else mean[None] + positions[:n]
    norm = input_norm(model, layer)
    w_q, b_q = projection(model, layer, "q")
    with torch.no_grad():
        x = norm(embedding_norm(model)(rows.to(w_q.device, w_q.dtype)[None]))  # 1 pos d_model
        q = torch.einsum("bpm,hmd->bphd", x, w_q) + b_q
        w_k, b_k = projection(model, layer, "k")
        k = torch.einsum("bpm,hmd->bphd", x, w_k) + b_k
    q, k = q.to("cpu", torch.float64), k.to("cpu", torch.float64)
    if rotation is not None and layer in rotation:
        cos, sin = rotation[layer]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    return layer_scales(model)[0][layer] * torch.einsum("qhd,khd->hqk", q[0], k[0])


def preference(logits: torch.Tensor, causal: bool) -> tuple[np.ndarray, ...]:
    """``(prev, self, first, locality)`` per head from ``head query key`` logits."""
    n = logits.shape[-1]
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    allowed = (j <= i) if causal else torch.ones(n, n, dtype=torch.bool)
    weights = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)
    distance = (i - j).abs().double()
    uniform = (allowed * distance).sum(-1) / allowed.sum(-1)
    expected = (weights * distance).sum(-1)
    rows = torch.arange(1, n)
    prev = weights[:, rows, rows - 1].mean(-1)
    self_ = weights.diagonal(dim1=-2, dim2=-1)[:, 1:].mean(-1)
    first = weights[:, rows, 0].mean(-1)
    locality = 1 - expected[:, rows].mean(-1) / uniform[rows].mean()
    return tuple(t.numpy() for t in (prev, self_, first, locality))


def weight_scores(
    model: ModelHandle,
    basis: Basis | None = None,
    positions: int = POSITIONS,
    progress: Progress = quiet,
) -> WeightScores:
    """Copying and positional scores of every head (see the module docstring).

    Args:
        model: a loaded model (an encoder too).
        basis: ``tokens`` or ``residual`` for the copying score (default
            :func:`default_basis`).
        positions: how many positions the positional scores look at.
        progress: progress callback; may raise ``Cancelled``.
    """
    facts = model.facts
    copying, used = copying_scores(model, basis, part(progress, 0.0, 0.8))
    notes = [
        f"copying score on the {used} basis"
        + (" (tied embeddings: W_E W_V W_O W_U)" if used == "tokens" else " (W_V W_O)")
    ]
    n = min(positions, facts.n_ctx)
    rotation = _rotation(model, n) if facts.positional == "rotary" else None
    shape = (facts.n_layers, facts.n_heads)
    scores = [np.full(shape, np.nan) for _ in range(4)]
    if facts.positional == "rotary" and rotation is None:
        notes.append("positional scores unavailable: the model exposes no rotation tables")
    else:
        for layer in range(facts.n_layers):
            progress(0.8 + 0.2 * layer / facts.n_layers, f"QK positions of layer {layer}")
            for table, values in zip(
                scores,
                preference(positional_logits(model, layer, n, rotation), facts.causal),
                strict=True,
            ):
                table[layer] = values
        notes.append(f"positional scores of the mean token over {n} positions ({facts.positional})")
    prev, self_, first, locality = scores
    progress(1.0, "done")
    return WeightScores(copying, used, prev, self_, first, locality, notes=tuple(notes))


@dataclass(frozen=True)
class Correlation:
    """A weight score against its data-based twin over ``n`` heads."""

    pearson: float
    spearman: float
    n: int


def weight_data_correlation(weight: np.ndarray, data: np.ndarray) -> Correlation:
    """Correlation of a weight score with a data score (e.g. copying vs induction, ``qk_prev``
    vs the previous-token score), over heads finite in both."""
    return Correlation(*correlations(weight, data))
