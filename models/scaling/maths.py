"""Softmax saturation as the attention logits are scaled: the maths of the scaling sweep.

Everything here is a pure function of arrays. A *factor* ``c`` multiplies a head's logits on top of
the model's own scale, so ``c = 1`` is the model as trained and the pattern at ``c`` is
``softmax(c * scores)`` with masked keys kept masked. Dividing ``q . k`` by ``d_k ** alpha``
instead of ``sqrt(d_k)`` is the same thing with ``c = d_k ** (0.5 - alpha)``.

Row statistics (each over the keys a query may see):

- entropy ``H = -sum p log p`` in nats (``0 log 0 = 0``); normalised entropy ``H / log n_allowed``;
- max weight ``max p``; effective number of keys ``exp(H)``;
- the Frobenius norm of the softmax Jacobian ``J = diag(p) - p p^T``: a uniform row over ``n``
  keys gives ``(n - 1) / n^2``, a one-hot row gives 0 (no gradient flows back through the
  softmax). See :func:`jacobian_norm` for how it keeps its accuracy near one-hot rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.model.variants.windows import capped

STAT_NAMES = ("entropy", "norm_entropy", "max_weight", "eff_keys", "jacobian")
ONE_HOT = {"entropy": 0.0, "norm_entropy": 0.0, "max_weight": 1.0, "eff_keys": 1.0, "jacobian": 0.0}


def factor_grid(lo: float = 1 / 16, hi: float = 16.0, n: int = 25) -> np.ndarray:
    """``n`` factors spaced evenly in log between ``lo`` and ``hi``; 1.0 is exact when on the grid.

    Returns:
        ``(n,)`` float64, increasing.
    """
    if not (0 < lo < hi) or n < 2:
        raise ValueError("need 0 < lo < hi and at least two points")
    grid = np.exp(np.linspace(np.log(lo), np.log(hi), n))
    grid[np.isclose(grid, 1.0, rtol=1e-9, atol=0)] = 1.0
    return grid


def alpha_to_factor(alpha: np.ndarray | float, d_k: int) -> np.ndarray:
    """Factor ``c`` equivalent to dividing ``q . k`` by ``d_k ** alpha``:
    ``d_k ** (0.5 - alpha)``."""
    return np.power(float(d_k), 0.5 - np.asarray(alpha, dtype=np.float64))


def masked_entries(scores: torch.Tensor) -> torch.Tensor:
    """Where a score tensor is masked: ``-inf`` or a huge negative sentinel (dtype min / 2 or less).

    Bridges mask either with ``-inf`` or with ``torch.finfo(dtype).min``; the second would come
    back into play if it were multiplied by ``c < 1``, so both are detected here.
    """
    if not scores.is_floating_point():
        raise TypeError("scores must be floating point")
    return torch.isneginf(scores) | (scores <= torch.finfo(scores.dtype).min / 2)


def with_inf_mask(scores: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A copy of ``scores`` in ``dtype`` with every masked entry set to ``-inf``.

    The mask is read in the original dtype: a float32 ``finfo.min`` sentinel is not "huge" in
    float64, so converting first would lose it.
    """
    return scores.to(dtype).masked_fill(masked_entries(scores), -torch.inf)


def rescaled(scores: torch.Tensor, factor: float, softcap: float | None = None) -> torch.Tensor:
    """The logits at ``factor`` times the model's own scale: ``c * s``, or for a soft-capped
    layer (Gemma 2), whose ``scores`` are its raw logits ``s``, ``cap * tanh(c * s / cap)``:
    what the model computes with another scale (at ``c = 1`` its own capped logits)."""
    return capped(scores * factor, softcap)


def scale_scores(scores: torch.Tensor, factor: float, softcap: float | None = None) -> torch.Tensor:
    """:func:`rescaled` scores with masked entries left exactly as they were (a new tensor).

    Args:
        scores: ``... query_pos key_pos`` logits, masked entries as in :func:`masked_entries`.
        factor: ``c > 0``.
        softcap: the layer's logit cap (the scores are the raw logits before it), or None.
    """
    if not factor > 0:
        raise ValueError(f"the factor must be positive, got {factor}")
    mask = masked_entries(scores)
    return torch.where(mask, scores, rescaled(scores.masked_fill(mask, 0.0), factor, softcap))


def scaled_patterns(
    scores: torch.Tensor, factor: float, softcap: float | None = None
) -> torch.Tensor:
    """``softmax(c * scores)`` over keys, masked keys at exactly 0; a row with no key is all 0.

    Args:
        scores: ``... query_pos key_pos`` logits (the model's own scale already applied).
        factor: ``c > 0``.
        softcap: the layer's logit cap: the scores are the raw logits, scaled and then capped
            (:func:`rescaled`).

    Returns:
        Patterns with the same shape, float32 or wider.
    """
    mask = masked_entries(scores)
    work = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    scaled = rescaled(work.masked_fill(mask, 0.0), factor, softcap)
    logits = torch.where(mask, torch.full_like(work, -torch.inf), scaled)
    empty = mask.all(dim=-1, keepdim=True)
    pattern = torch.softmax(logits.masked_fill(empty, 0.0), dim=-1)
    return pattern.masked_fill(empty, 0.0)


def row_entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row ``... key_pos`` (``0 log 0 = 0``); shape ``...``."""
    entropy: torch.Tensor = -torch.special.xlogy(p, p).sum(dim=-1)
    return entropy


def row_max(p: torch.Tensor) -> torch.Tensor:
    """Largest weight of each row ``... key_pos``; shape ``...``."""
    return p.max(dim=-1).values


def effective_keys(p: torch.Tensor) -> torch.Tensor:
    """``exp(H)``: the number of equally weighted keys with the same entropy; shape ``...``."""
    return torch.exp(row_entropy(p))


def jacobian_norm(p: torch.Tensor) -> torch.Tensor:
    """``||diag(p) - p p^T||_F`` of each row ``... key_pos``; shape ``...``.

    Row by row, ``||J||_F^2 = sum_i p_i^2 ((1 - p_i)^2 + sum_{j != i} p_j^2)``: the diagonal entry
    ``p_i (1 - p_i)`` squared plus the off-diagonal entries ``p_i p_j`` squared. Every term is
    positive, so nothing cancels. The two leave-one-out sums are formed from the other entries
    for the largest weight of the row (``1 - p_max`` as ``1 - p`` would lose every digit when the
    row is nearly one-hot, exactly where saturation is measured) and as ``1 - p_i`` and
    ``s2 - p_i^2`` for the rest, whose ``p_i`` is at most one half.
    """
    is_max = torch.zeros_like(p, dtype=torch.bool).scatter_(
        -1, p.argmax(dim=-1, keepdim=True), True
    )
    others = p.masked_fill(is_max, 0.0)
    rest = torch.where(is_max, others.sum(dim=-1, keepdim=True), 1.0 - p)
    square = p * p
    rest_sq = torch.where(
        is_max,
        (others * others).sum(dim=-1, keepdim=True),
        square.sum(dim=-1, keepdim=True) - square,
    )
    return torch.sqrt((square * (rest * rest + rest_sq)).sum(dim=-1))


@dataclass(frozen=True)
class SweepStats:
    """Per-head row averages at every factor.

    Attributes:
        factors: ``(n_c,)`` the factors ``c``.
        entropy, norm_entropy, max_weight, eff_keys, jacobian: ``n_c layer head_index`` means
            over the rows of each head. ``norm_entropy`` skips rows with a single allowed key
            (``log 1 = 0``: the first query of a causal model), every other mean skips only rows
            with no allowed key.
        n_rows: rows counted per head; ``n_rows_norm``: rows counted for ``norm_entropy``.
        uniform: each statistic's value when every row is uniform over its allowed keys (the
            ``c -> 0`` limit); :data:`ONE_HOT` holds the ``c -> infinity`` limit.
    """

    factors: np.ndarray
    entropy: np.ndarray
    norm_entropy: np.ndarray
    max_weight: np.ndarray
    eff_keys: np.ndarray
    jacobian: np.ndarray
    n_rows: int
    n_rows_norm: int
    uniform: dict[str, float]

    def curve(self, name: str, layer: int | None = None, head: int | None = None) -> np.ndarray:
        """``(n_c,)`` one statistic for one head, or the mean over every head when ``layer`` is
        None."""
        values = getattr(self, name)
        if layer is None or head is None:
            mean: np.ndarray = values.mean(axis=(1, 2))
            return mean
        one: np.ndarray = values[:, layer, head]
        return one


def row_stats(p: torch.Tensor, allowed: torch.Tensor) -> dict[str, torch.Tensor]:
    """Row statistics of ``layer head_index query_pos key_pos`` patterns, averaged per head.

    Args:
        p: patterns ``layer head_index query_pos key_pos``.
        allowed: bool, same shape (or broadcastable): keys each query may see.

    Returns:
        Name -> ``layer head_index`` means (see :class:`SweepStats`).
    """
    n_allowed = allowed.sum(dim=-1).to(p.dtype).expand(p.shape[:-1])
    rows = n_allowed >= 1
    multi = n_allowed >= 2
    ent = row_entropy(p)
    norm = torch.where(multi, ent / torch.log(torch.clamp(n_allowed, min=2.0)), 0.0)

    def mean(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        keep = keep.to(values.dtype)
        return (values * keep).sum(-1) / torch.clamp(keep.sum(-1), min=1.0)

    return {
        "entropy": mean(ent, rows),
        "norm_entropy": mean(norm, multi),
        "max_weight": mean(row_max(p), rows),
        "eff_keys": mean(torch.exp(ent), rows),
        "jacobian": mean(jacobian_norm(p), rows),
    }


def sweep(
    scores: torch.Tensor | np.ndarray,
    factors: np.ndarray,
    softcaps: tuple[float | None, ...] = (),
) -> SweepStats:
    """Saturation statistics of every head at every factor.

    Args:
        scores: ``layer head_index query_pos key_pos`` logits at the model's own scale, masked
            entries ``-inf`` (or the dtype's minimum).
        factors: ``(n_c,)`` positive factors.
        softcaps: each layer's logit cap (its scores are the raw logits), or ``()`` for none.

    Returns:
        :class:`SweepStats` with ``n_c layer head_index`` arrays.
    """
    scores = torch.as_tensor(scores)
    if scores.ndim != 4:
        raise ValueError("scores must be layer head_index query_pos key_pos")
    per_c: dict[str, list[np.ndarray]] = {name: [] for name in STAT_NAMES}
    for c in factors:
        per_layer: dict[str, list[torch.Tensor]] = {name: [] for name in STAT_NAMES}
        for layer, layer_scores in enumerate(scores):  # one layer at a time: float64 stays small
            layer_scores = with_inf_mask(layer_scores)[None]
            cap = softcaps[layer] if softcaps else None
            stats = row_stats(
                scaled_patterns(layer_scores, float(c), cap), ~masked_entries(layer_scores)
            )
            for name in STAT_NAMES:
                per_layer[name].append(stats[name][0])
        for name in STAT_NAMES:
            per_c[name].append(torch.stack(per_layer[name]).numpy())
    allowed = ~masked_entries(scores[:1])
    uniform = row_stats(
        allowed.to(torch.float64) / allowed.sum(-1, keepdim=True).clamp(min=1), allowed
    )
    n_allowed = allowed[0, 0].sum(-1)
    return SweepStats(
        factors=np.asarray(factors, dtype=np.float64),
        **{name: np.stack(per_c[name]) for name in STAT_NAMES},
        n_rows=int((n_allowed >= 1).sum()),
        n_rows_norm=int((n_allowed >= 2).sum()),
        uniform={name: float(uniform[name].mean()) for name in STAT_NAMES},
    )


@dataclass(frozen=True)
class SyntheticPanel:
    """Random ``q, k`` with i.i.d. N(0, 1) entries: how logits grow with ``d_k``.

    Attributes:
        d_ks: ``(n_d,)`` key widths.
        var_raw, var_scaled: ``(n_d,)`` sample variance of ``q . k`` and of ``q . k / sqrt(d_k)``
            over ``n_pairs`` independent pairs (theory: ``d_k`` and 1).
        max_raw, max_scaled: ``(n_d,)`` mean over ``n_rows`` softmax rows of the largest weight,
            each row one query against ``n_keys`` keys, without and with the ``1/sqrt(d_k)``.
        n_pairs, n_rows, n_keys, seed: the sample sizes and the seed.
    """

    d_ks: np.ndarray
    var_raw: np.ndarray
    var_scaled: np.ndarray
    max_raw: np.ndarray
    max_scaled: np.ndarray
    n_pairs: int
    n_rows: int
    n_keys: int
    seed: int


DEFAULT_D_KS = (16, 32, 64, 128, 256, 512, 1024)


def _dot_variance(gen: torch.Generator, d_k: int, n_pairs: int, chunk: int) -> float:
    dots = []
    for start in range(0, n_pairs, chunk):
        size = min(chunk, n_pairs - start)
        q = torch.randn(size, d_k, generator=gen)
        k = torch.randn(size, d_k, generator=gen)
        dots.append((q * k).sum(-1, dtype=torch.float64))
    return float(torch.cat(dots).var(unbiased=True))


def _mean_max(
    gen: torch.Generator, d_k: int, n_rows: int, n_keys: int, chunk: int
) -> tuple[float, float]:
    raw, scaled = [], []
    for start in range(0, n_rows, chunk):
        size = min(chunk, n_rows - start)
        q = torch.randn(size, d_k, 1, generator=gen)
        k = torch.randn(size, n_keys, d_k, generator=gen)
        logits = torch.bmm(k, q)[..., 0].double()
        raw.append(torch.softmax(logits, -1).max(-1).values)
        scaled.append(torch.softmax(logits / d_k**0.5, -1).max(-1).values)
    return float(torch.cat(raw).mean()), float(torch.cat(scaled).mean())


def synthetic_panel(
    d_ks: tuple[int, ...] = DEFAULT_D_KS,
    n_pairs: int = 20_000,
    n_rows: int = 500,
    n_keys: int = 64,
    seed: int = 0,
) -> SyntheticPanel:
    """Measure ``Var(q . k)`` and the mean max softmax weight for random unit-variance ``q, k``.

    With ``n_pairs = 20,000`` the relative standard error of the variance is about
    ``sqrt((2 + 6 / d_k) / n_pairs)`` (1.1 % at ``d_k = 16``), so it lands within 5 % of ``d_k``.

    Args:
        d_ks: key widths to try.
        n_pairs: independent ``(q, k)`` pairs per width for the variance.
        n_rows: softmax rows per width for the max weight; ``n_keys`` keys per row.
        seed: seed of the generator; the same seed gives the same numbers.

    Returns:
        A :class:`SyntheticPanel`.
    """
    gen = torch.Generator().manual_seed(seed)
    var_raw, max_raw, max_scaled = [], [], []
    for d_k in d_ks:
        var_raw.append(_dot_variance(gen, d_k, n_pairs, chunk=max(1, 2**21 // d_k)))
        raw, scaled = _mean_max(gen, d_k, n_rows, n_keys, chunk=max(1, 2**21 // (d_k * n_keys)))
        max_raw.append(raw)
        max_scaled.append(scaled)
    dims = np.asarray(d_ks, dtype=np.float64)
    var = np.asarray(var_raw)
    return SyntheticPanel(
        d_ks=np.asarray(d_ks),
        var_raw=var,
        var_scaled=var / dims,
        max_raw=np.asarray(max_raw),
        max_scaled=np.asarray(max_scaled),
        n_pairs=n_pairs,
        n_rows=n_rows,
        n_keys=n_keys,
        seed=seed,
    )
