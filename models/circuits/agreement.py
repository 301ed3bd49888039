"""How well an estimate of per-head patch effects agrees with the exact ones.

Pearson (values), Spearman (ranks), top-k recall (of the ``k`` heads with the largest exact
``|effect|``, the share the estimate also puts in its top ``k``), and the heads where the two
differ most, each flagged when its attention is saturated (the published failure of attribution
patching: a softmax near 0/1 has a near-zero gradient however far a patch moves it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from models.head import Head

TOP_K = 10
N_DISAGREE = 5


@dataclass(frozen=True)
class Disagreement:
    """One head where estimate and exact differ: the numbers and whether it is saturated."""

    head: Head
    estimate: float
    exact: float
    saturated: bool

    @property
    def gap(self) -> float:
        return self.estimate - self.exact


@dataclass(frozen=True)
class Agreement:
    """Estimate against exact over ``n`` heads.

    Attributes:
        pearson, spearman: correlations (NaN when either side is constant).
        recall: share of the exact top ``k`` (by ``|effect|``) in the estimate's top ``k``.
        k: the ``k`` of ``recall``.
        n: heads compared (finite on both sides).
        worst: the heads with the largest ``|estimate - exact|``, largest first.
    """

    pearson: float
    spearman: float
    recall: float
    k: int
    n: int
    worst: tuple[Disagreement, ...]

    def summary(self) -> str:
        """One line: ``Pearson 0.93, Spearman 0.99, top-10 recall 1.00 (270 heads)``."""
        return (
            f"Pearson {self.pearson:.3f}, Spearman {self.spearman:.3f}, top-{self.k} "
            f"recall {self.recall:.2f} ({self.n} heads)"
        )


def correlations(a: np.ndarray, b: np.ndarray) -> tuple[float, float, int]:
    """Pearson and Spearman of two arrays over the entries finite in both, and how many."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    n = int(ok.sum())
    if n < 2 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan"), float("nan"), n
    return (float(stats.pearsonr(a[ok], b[ok])[0]), float(stats.spearmanr(a[ok], b[ok])[0]), n)


def top_k_recall(estimate: np.ndarray, exact: np.ndarray, k: int = TOP_K) -> float:
    """Share of the ``k`` largest ``|exact|`` that are among the ``k`` largest ``|estimate|``."""
    est, ex = np.abs(np.ravel(estimate)), np.abs(np.ravel(exact))
    k = min(k, ex.size)
    if k == 0:
        return float("nan")
    top_exact = set(np.argsort(-np.nan_to_num(ex, nan=-1.0), kind="stable")[:k].tolist())
    top_est = set(np.argsort(-np.nan_to_num(est, nan=-1.0), kind="stable")[:k].tolist())
    return len(top_exact & top_est) / k


def agreement(
    estimate: np.ndarray,
    exact: np.ndarray,
    saturated: np.ndarray | None = None,
    k: int = TOP_K,
    n_worst: int = N_DISAGREE,
) -> Agreement:
    """Compare ``layer head_index`` estimates with exact patch effects.

    Args:
        estimate: e.g. :attr:`AtPResult.z_star`.
        exact: e.g. :func:`models.circuits.patching.head_effects`.
        saturated: ``layer head_index`` flags (:attr:`AtPResult.saturated`), or ``None``.
        k: the top-k of the recall.
        n_worst: how many disagreeing heads to name.
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    if estimate.shape != exact.shape:
        raise ValueError(f"shapes differ: {estimate.shape} and {exact.shape}")
    pearson, spearman, n = correlations(estimate, exact)
    n_heads = exact.shape[1]
    gap = np.nan_to_num(np.abs(estimate - exact), nan=-1.0).ravel()
    order = np.argsort(-gap, kind="stable")[:n_worst]
    flags = (
        np.zeros(exact.shape, dtype=bool)
        if saturated is None
        else np.asarray(saturated, dtype=bool)
    )
    worst = tuple(
        Disagreement(
            Head(int(i) // n_heads, int(i) % n_heads),
            float(estimate.flat[i]),
            float(exact.flat[i]),
            bool(flags.flat[i]),
        )
        for i in order
    )
    return Agreement(
        pearson=pearson,
        spearman=spearman,
        recall=top_k_recall(estimate, exact, k),
        k=k,
        n=n,
        worst=worst,
    )
