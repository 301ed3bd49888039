"""Value-weighted views of a captured run (Kobayashi et al. 2020).

``W[i, j] = A[i, j] * n_j / T_i`` with ``n_j = ||v_j W_O^h||`` (how much the head writes when it
reads key ``j``) and ``T_i = sum_j A[i, j] * n_j``, so each row still sums to 1. A sink key the
head looks at but writes almost nothing from fades out.

Every window, row or column of ``W`` needs the row totals ``T``, so :func:`value_weighting`
computes them once for every head (a band of rows at a time), together with max-pooled
thumbnails of ``W``; afterwards any view of ``W`` costs what the same view of ``A`` costs.
"""

from __future__ import annotations

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
    """

    norms: np.ndarray
    totals: np.ndarray
    pooled: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.norms.nbytes + self.totals.nbytes + self.pooled.nbytes)

    def scale(self, layer: int, head: int, rows, cols) -> np.ndarray:
        """``n_j / T_i`` for a window: multiply the attention window by it."""
        totals = self.totals[layer, head, rows]
        safe = np.where(totals > 0, totals, np.inf)
        return self.norms[layer, head, cols][None, :] / safe[:, None]


def value_weighting(run: "AttentionRun", norms: np.ndarray, size: int = 64,
                    progress: Progress = quiet) -> ValueWeighting:
    """Row totals and thumbnails of the value-weighted pattern of every head.

    Args:
        run: the captured run.
        norms: ``layer head_index key_pos`` from :func:`models.circuits.value_weighted.value_norms`
            or the streaming capture.
        size: thumbnail size in pixels (max-pooled).
        progress: called once per layer.
    """
    n, n_layers = run.n_tokens, run.facts.n_layers
    factor = -(-n // size)
    band = factor * max(1, 256 // factor)
    totals, pooled = [], []
    for layer in range(n_layers):
        layer_totals, parts = [], []
        for start in range(0, n, band):
            rows = slice(start, min(start + band, n))
            chunk = run.store.layer_window(layer, rows, slice(None)).astype(np.float64)
            weighted = chunk * norms[layer][:, None, :]
            row_totals = weighted.sum(axis=-1)
            layer_totals.append(row_totals)
            shown = (weighted / np.where(row_totals > 0, row_totals, np.inf)[..., None]).astype(
                np.float32)
            if run.facts.causal:
                above = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                shown[:, above] = np.nan
            parts.append(pool_rows(shown, factor, size))
        totals.append(np.concatenate(layer_totals, axis=-1))
        pooled.append(np.concatenate(parts, axis=-2))
        progress((layer + 1) / n_layers, f"layer {layer + 1} of {n_layers}")
    return ValueWeighting(norms=np.asarray(norms, np.float32),
                          totals=np.stack(totals).astype(np.float64),
                          pooled=np.stack(pooled))
