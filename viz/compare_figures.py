"""Figures of a two-prompt comparison: every head's divergence, and one head's A − B.

The grid has the all-heads grid's layout (layers down, heads across) coloured by divergence; the
difference heatmap uses the explorer heatmap's conventions (queries down, keys across on top,
``(i) token`` labels escaped, cells the model cannot see left blank) with a diverging scale
centred on zero: red where A attends more, blue where B does.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from jaxtyping import Float

from viz.heatmap import safe_labels

DIVERGENCE_COLOURS = "Reds"
DIFFERENCE_COLOURS = "RdBu_r"


def divergence_grid(
    divergence: Float[np.ndarray, "layer head_index"],
    *,
    title: str,
    selected: tuple[int, int] | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """A ``layer x head`` grid coloured by divergence (0 white), the chosen head outlined.

    Args:
        divergence: each head's mean JSD in bits.
        title: figure title (escaped here).
        selected: ``(layer, head)`` to outline.
        zmax: top of the colour scale; ``None``: the largest divergence (small values show).
    """
    values = np.asarray(divergence, dtype=np.float64)
    n_layers, n_heads = values.shape
    finite = values[np.isfinite(values)]
    top = zmax if zmax is not None else (float(finite.max()) if finite.size else 1.0)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[str(h) for h in range(n_heads)],
            y=[str(li) for li in range(n_layers)],
            colorscale=DIVERGENCE_COLOURS,
            zmin=0.0,
            zmax=max(top, 1e-9),
            colorbar={"title": "JSD (bits)"},
            hovertemplate="head %{y}.%{x}<br>divergence %{z:.4f} bits<extra></extra>",
        )
    )
    if selected is not None:
        layer, head = selected
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            line={"color": "#222", "width": 2},
        )
    fig.update_layout(
        title=html.escape(title),
        height=120 + 22 * n_layers,
        xaxis={"title": "head", "type": "category"},
        yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def difference_heatmap(
    difference: Float[np.ndarray, "query key"],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str,
    zmax: float | None = None,
) -> go.Figure:
    """A − B of one head on aligned positions, diverging colours centred on zero.

    Args:
        difference: ``query key`` A − B weights; NaN cells (not visible) are left blank.
        row_labels: a label per row, ``(i) token`` (escaped here).
        col_labels: a label per column (the unaligned bin has its own label).
        title: figure title (escaped here).
        zmax: the colour scale runs from ``-zmax`` to ``zmax``; ``None``: the largest |A − B|.
    """
    shown = np.asarray(difference, dtype=np.float64)
    finite = np.abs(shown[np.isfinite(shown)])
    top = zmax if zmax is not None else (float(finite.max()) if finite.size else 1.0)
    top = max(top, 1e-6)
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=safe_labels(col_labels),
            y=safe_labels(row_labels),
            colorscale=DIFFERENCE_COLOURS,
            zmid=0.0,
            zmin=-top,
            zmax=top,
            colorbar={"title": "A − B"},
            hoverongaps=False,
            hovertemplate="query %{y}<br>key %{x}<br>A − B %{z:+.4f}<extra></extra>",
        )
    )
    n = max(len(row_labels), len(col_labels))
    size = min(900, max(360, 18 * n + 160))
    fig.update_layout(
        title={
            "text": html.escape(title),
            "x": 0.5,
            "xanchor": "center",
            "y": 0.005,
            "yanchor": "bottom",
        },
        height=size + 60,
        margin={"l": 10, "r": 10, "t": 110, "b": 50},
        xaxis={"title": "key (attended to)", "side": "top", "tickangle": -60, "type": "category"},
        yaxis={"title": "query (attending)", "autorange": "reversed", "type": "category"},
        plot_bgcolor="#f4f4f4",
    )
    return fig
