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


def masked(pattern: np.ndarray, causal: bool, row0: int = 0, col0: int = 0) -> np.ndarray:
    """A copy of ``query_pos key_pos`` with positions the model cannot see set to NaN (blank).

    ``row0`` and ``col0`` are the absolute positions of the first row and column when
    ``pattern`` is a window of a larger one.
    """
    shown = np.array(pattern, dtype=np.float32, copy=True)
    if causal:
        rows = row0 + np.arange(shown.shape[0])[:, None]
        cols = col0 + np.arange(shown.shape[1])[None, :]
        shown[cols > rows] = np.nan
    return shown


def head_heatmap(pattern: np.ndarray, labels: Sequence[str], *, causal: bool, title: str,
                 zmax: float | None = 1.0, selected: int | None = None,
                 rows: slice = slice(None), cols: slice = slice(None)) -> go.Figure:
    """One head's pattern: rows are queries, columns keys, masked cells left blank.

    Args:
        pattern: ``query_pos key_pos`` weights, or the window ``rows`` x ``cols`` of them.
        labels: ``(i) token`` label of every position of the prompt.
        causal: blank the cells above the diagonal.
        title: figure title (escaped here).
        zmax: top of the colour scale; ``None`` scales to the data.
        selected: the absolute position of a query row to outline.
        rows, cols: which part of the whole pattern ``pattern`` is (default: all of it).
    """
    row_labels = safe_labels(labels[rows])
    col_labels = safe_labels(labels[cols])
    row0 = rows.start or 0
    fig = go.Figure(go.Heatmap(
        z=masked(pattern, causal, row0, cols.start or 0), x=col_labels, y=row_labels,
        colorscale=COLORSCALE, zmin=0.0, zmax=zmax,
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
        colorbar={"title": "weight"}, hoverongaps=False,
    ))
    n = max(len(row_labels), len(col_labels))
    if selected is not None and 0 <= selected - row0 < len(row_labels):
        at = selected - row0
        fig.add_shape(type="rect", x0=-0.5, x1=len(col_labels) - 0.5, y0=at - 0.5, y1=at + 0.5,
                      line={"color": "#e4572e", "width": 2})
    size = min(900, max(360, 18 * n + 160))
    fig.update_layout(
        title={"text": html.escape(title), "x": 0.5, "xanchor": "center", "y": 0.005,
               "yanchor": "bottom"},  # below the plot: the key axis and its labels are on top
        height=size + 60, margin={"l": 10, "r": 10, "t": 110, "b": 50},
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
