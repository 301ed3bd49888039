"""Plotly heatmaps of attention patterns.

Token labels go through :func:`html.escape`: plotly renders a subset of HTML in axis and hover
text, and a prompt is data, never markup.
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

COLORSCALE = "Blues"


def safe_labels(labels: Sequence[str]) -> list[str]:
    return [html.escape(label, quote=True) for label in labels]


def masked(pattern: np.ndarray, causal: bool) -> np.ndarray:
    """A copy of ``query_pos key_pos`` with positions the model cannot see set to NaN (blank)."""
    shown = np.array(pattern, dtype=np.float32, copy=True)
    if causal:
        n_q, n_k = shown.shape
        offset = n_k - n_q
        rows, cols = np.triu_indices(n=n_q, k=1 + offset, m=n_k)
        shown[rows, cols] = np.nan
    return shown


def head_heatmap(pattern: np.ndarray, labels: Sequence[str], *, causal: bool, title: str,
                 zmax: float | None = 1.0, selected: int | None = None) -> go.Figure:
    """One head's pattern: rows are queries, columns keys, masked cells left blank.

    Args:
        pattern: ``query_pos key_pos`` weights.
        labels: ``(i) token`` label per position.
        causal: blank the cells above the diagonal.
        title: figure title (escaped here).
        zmax: top of the colour scale; ``None`` scales to the data.
        selected: a query row to outline.
    """
    text = safe_labels(labels)
    fig = go.Figure(go.Heatmap(
        z=masked(pattern, causal), x=text, y=text, colorscale=COLORSCALE, zmin=0.0, zmax=zmax,
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
        colorbar={"title": "weight"}, hoverongaps=False,
    ))
    n = len(labels)
    if selected is not None and 0 <= selected < n:
        fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=selected - 0.5, y1=selected + 0.5,
                      line={"color": "#e4572e", "width": 2})
    size = min(900, max(360, 18 * n + 160))
    fig.update_layout(
        title={"text": html.escape(title), "x": 0.5, "xanchor": "center", "y": 0.995,
               "yanchor": "top"},
        height=size + 60, margin={"l": 10, "r": 10, "t": 130, "b": 10},
        xaxis={"title": "key (attended to)", "side": "top", "tickangle": -60, "type": "category"},
        yaxis={"title": "query (attending)", "autorange": "reversed", "type": "category"},
        plot_bgcolor="#f4f4f4",
    )
    return fig


def score_grid(values: np.ndarray, *, title: str, flagged: np.ndarray | None = None,
               zmin: float | None = None, zmax: float | None = None,
               colorscale: str = "Viridis") -> go.Figure:
    """A ``layer head_index`` grid of one number per head, flagged heads marked with a star."""
    n_layers, n_heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=[str(h) for h in range(n_heads)], y=[str(layer) for layer in range(n_layers)],
        colorscale=colorscale, zmin=zmin, zmax=zmax,
        hovertemplate="head %{y}.%{x}<br>%{z:.4f}<extra></extra>",
    ))
    if flagged is not None:
        ys, xs = np.nonzero(flagged)
        fig.add_trace(go.Scatter(x=[str(x) for x in xs], y=[str(y) for y in ys], mode="text",
                                 text=["★"] * len(xs), textfont={"color": "white", "size": 16},
                                 hoverinfo="skip", showlegend=False))
    fig.update_layout(title=html.escape(title), height=120 + 34 * n_layers,
                      xaxis={"title": "head", "type": "category"},
                      yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
