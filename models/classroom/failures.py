"""Small numerical demonstrations of where attention goes wrong or gets slow.

* :func:`saturation`: random unit-variance q, k; logits with and without ``1 / sqrt(d_k)``.
* :func:`online_softmax_trace`: a row's softmax computed tile by tile with a running max and
  sum, as FlashAttention does, so the page can show it equals the plain softmax.
* :func:`hbm_traffic`: bytes one head moves to and from GPU memory, naive versus tiled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.classroom.steps import softmax_rows


@dataclass(frozen=True)
class Saturation:
    """Statistics of one query's logits over ``n_keys`` random keys.

    Attributes:
        logit_std: standard deviation of ``q . k`` (about ``sqrt(d_k)``).
        scaled_std: standard deviation of ``q . k / sqrt(d_k)`` (about 1).
        top_weight: largest softmax weight without scaling.
        scaled_top_weight: largest softmax weight with scaling.
        grad_norm: Frobenius norm of the softmax Jacobian ``diag(p) - p p^T`` without scaling.
        scaled_grad_norm: the same with scaling.
    """

    logit_std: float
    scaled_std: float
    top_weight: float
    scaled_top_weight: float
    grad_norm: float
    scaled_grad_norm: float


def _jacobian_norm(p: np.ndarray) -> float:
    return float(np.linalg.norm(np.diag(p) - np.outer(p, p)))


def saturation(d_k: int, n_keys: int = 16, n_queries: int = 256, seed: int = 0) -> Saturation:
    """Average over ``n_queries`` random queries of the logit spread and the softmax peak.

    Args:
        d_k: width of a query/key.
        n_keys: keys per query.
        n_queries: how many queries to average over.
        seed: random seed (results are reproducible).
    """
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_queries, d_k))
    k = rng.standard_normal((n_keys, d_k))
    logits = q @ k.T
    scaled = logits / math.sqrt(d_k)
    p, ps = softmax_rows(logits), softmax_rows(scaled)
    return Saturation(
        logit_std=float(logits.std()),
        scaled_std=float(scaled.std()),
        top_weight=float(p.max(axis=1).mean()),
        scaled_top_weight=float(ps.max(axis=1).mean()),
        grad_norm=float(np.mean([_jacobian_norm(row) for row in p])),
        scaled_grad_norm=float(np.mean([_jacobian_norm(row) for row in ps])),
    )


TraceRow = dict[str, int | str | float]


def online_softmax_trace(logits: np.ndarray, tile: int) -> tuple[list[TraceRow], np.ndarray]:
    """Softmax of one row read ``tile`` entries at a time, keeping a running max and sum.

    Args:
        logits: ``key_pos`` one row of scores.
        tile: keys per tile.

    Returns:
        (one ``{"tile", "keys", "running_max", "running_sum"}`` dict per tile, the weights).
        The weights equal the plain softmax: earlier sums are rescaled by ``exp(old - new max)``.
    """
    logits = np.asarray(logits, dtype=np.float64)
    running_max, running_sum = -math.inf, 0.0
    trace: list[TraceRow] = []
    for number, start in enumerate(range(0, len(logits), tile)):
        block = logits[start : start + tile]
        new_max = max(running_max, float(block.max()))
        running_sum = running_sum * math.exp(running_max - new_max) + float(
            np.exp(block - new_max).sum()
        )
        running_max = new_max
        trace.append(
            {
                "tile": number + 1,
                "keys": f"{start + 1}–{start + len(block)}",
                "running_max": running_max,
                "running_sum": running_sum,
            }
        )
    lse = running_max + math.log(running_sum)
    return trace, np.exp(logits - lse)


H100_RIDGE = 989e12 / 3.35e12  # dense bf16 FLOP/s over HBM3 bytes/s: about 295 FLOP per byte


def hbm_traffic(
    n: int, d_head: int, bytes_per_element: int = 2, block_q: int = 128
) -> dict[str, float]:
    """Bytes one head moves through GPU main memory (HBM) in a forward pass, and FLOPs per byte.

    Naive: read Q, K, V; write the ``n x n`` scores, read them back for the softmax, write the
    pattern, read it again for ``A V``; write the output. Tiled (FlashAttention): read Q, K, V and
    write the output plus one log-sum-exp per row; the ``n x n`` matrix stays on chip. K and V are
    read once per query tile of ``block_q`` rows; ``tiled_no_cache`` counts those re-reads as if
    no cache absorbed them (an upper bound).

    Returns:
        ``naive``, ``tiled``, ``tiled_no_cache`` (bytes), ``flops`` (``4 n^2 d_head``) and
        ``naive_intensity`` / ``tiled_intensity`` (FLOPs per byte).
    """
    vec = n * d_head * bytes_per_element
    square = n * n * bytes_per_element
    flops = 4 * n * n * d_head
    naive = 4 * vec + 4 * square
    tiled = 4 * vec + 4 * n
    rereads = 2 * vec * (math.ceil(n / block_q) - 1)
    return {
        "naive": naive,
        "tiled": tiled,
        "tiled_no_cache": tiled + rereads,
        "flops": flops,
        "naive_intensity": flops / naive,
        "tiled_intensity": flops / tiled,
    }
