"""Value-weighted views of a captured run (Kobayashi et al. 2020).

``W[i, j] = A[i, j] * n_j / T_i`` with ``n_j = ||v_j W_O^h||`` (how much the head writes when it
reads key ``j``) and ``T_i = sum_j A[i, j] * n_j``, so each row still sums to 1. A sink key the
head looks at but writes almost nothing from fades out.

Every window, row or column of ``W`` needs the row totals ``T``, so :func:`value_weighting`
computes them once for every head (a band of rows at a time), together with max-pooled
thumbnails of ``W``; afterwards any view of ``W`` costs what the same view of ``A`` costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models.capture.views import pool_rows
from models.progress import Progress, quiet

if TYPE_CHECKING:
    from models.capture.run import AttentionRun


@dataclass(frozen=True)
class ValueWeighting:
    """What value-weighted views of one run need.

    Attributes:
        norms: ``layer head_index key_pos`` value norms ``||v_j W_O^h||``.
        totals: ``layer head_index query_pos`` row totals ``sum_j A[i, j] * n_j``.
        pooled: ``layer head_index pixel pixel`` max-pooled value-weighted patterns.
        overview: ``layer head_index pixel pixel`` float16 value-weighted overviews at
            ``overview_factor`` positions a pixel (made in the same pass), or None.
        overview_factor: positions per pixel edge of ``overview``.
    """

    norms: np.ndarray
    totals: np.ndarray
    pooled: np.ndarray
    overview: np.ndarray | None = None
    overview_factor: int = 1

    @property
    def nbytes(self) -> int:
        extra = 0 if self.overview is None else self.overview.nbytes
        return int(self.norms.nbytes + self.totals.nbytes + self.pooled.nbytes + extra)

    def scale(self, layer: int, head: int, rows, cols) -> np.ndarray:
        """``n_j / T_i`` for a window: multiply the attention window by it."""
        totals = self.totals[layer, head, rows]
        safe = np.where(totals > 0, totals, np.inf)
        return self.norms[layer, head, cols][None, :] / safe[:, None]


def value_weighting(
    run: AttentionRun,
    norms: np.ndarray,
    size: int = 64,
    progress: Progress = quiet,
    overview: int = 256,
) -> ValueWeighting:
    """Row totals and thumbnails of the value-weighted pattern of every head.

    Args:
        run: the captured run.
        norms: ``layer head_index key_pos`` from :func:`models.circuits.value_weighted.value_norms`
            or the streaming capture.
        size: thumbnail size in pixels (max-pooled).
        progress: called once per layer.
        overview: size in pixels of the per-head overviews made in the same pass (0: none).
    """
    n, n_layers = run.n_tokens, run.facts.n_layers
    factor = -(-n // size)
    big = -(-n // overview) if overview else 0
    band = factor * max(1, 256 // factor)
    if big:  # bands whole blocks of both pictures
        band = math.lcm(factor, big) * max(1, 256 // math.lcm(factor, big))
    totals, pooled, overviews = [], [], []
    for layer in range(n_layers):
        layer_totals, parts, big_parts = [], [], []
        for start in range(0, n, band):
            rows = slice(start, min(start + band, n))
            chunk = run.store.layer_window(layer, rows, slice(None)).astype(np.float64)
            weighted = chunk * norms[layer][:, None, :]
            row_totals = weighted.sum(axis=-1)
            layer_totals.append(row_totals)
            shown = (weighted / np.where(row_totals > 0, row_totals, np.inf)[..., None]).astype(
                np.float32
            )
            if run.facts.causal:
                above = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                shown[:, above] = np.nan
            parts.append(pool_rows(shown, factor, size))
            if big:
                big_parts.append(pool_rows(shown, big, overview).astype(np.float16))
        totals.append(np.concatenate(layer_totals, axis=-1))
        pooled.append(np.concatenate(parts, axis=-2))
        if big:
            overviews.append(np.concatenate(big_parts, axis=-2))
        progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return ValueWeighting(
        norms=np.asarray(norms, np.float32),
        totals=np.stack(totals).astype(np.float64),
        pooled=np.stack(pooled),
        overview=np.stack(overviews) if big else None,
        overview_factor=big or 1,
    )
