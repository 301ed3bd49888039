"""Figures of the circuits page: per-head grids on a scale centred at 0, per-position patch
effects, and the parts of the logit difference.

Token text comes from the prompt, so it is escaped before plotly sees it.
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

DIVERGING = "RdBu"  # negative red, 0 white, positive blue
GROUP_COLOURS = {"embeddings": "#7f7f7f", "heads": "#1f77b4", "MLPs": "#ff7f0e",
                 "biases": "#2ca02c"}
MAX_CELL_TEXT = 64


def symmetric_range(values: np.ndarray, floor: float = 0.0) -> float:
    """Half-width of a colour scale centred at 0 that holds every finite value."""
    finite = np.abs(np.asarray(values, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return float(max(finite.max() if finite.size else 0.0, floor)) or 1.0


def head_grid(values: np.ndarray, *, title: str, value_name: str,
              floor: float = 0.0) -> go.Figure:
    """A ``layer head_index`` grid on a diverging scale centred at 0.

    Args:
        values: one number per head.
        title: figure title (escaped here).
        value_name: what the number is, for the hover and the colour bar.
        floor: the scale reaches at least ``±floor`` (e.g. 1 for patch effects).
    """
    n_layers, n_heads = values.shape
    top = symmetric_range(values, floor)
    text = n_layers * n_heads <= MAX_CELL_TEXT
    fig = go.Figure(go.Heatmap(
        z=values, x=[str(h) for h in range(n_heads)], y=[str(layer) for layer in range(n_layers)],
        colorscale=DIVERGING, zmin=-top, zmax=top, zmid=0.0,
        texttemplate="%{z:.2f}" if text else None,
        colorbar={"title": html.escape(value_name)},
        hovertemplate=f"head %{{y}}.%{{x}}<br>{html.escape(value_name)} %{{z:.4f}}"
                      "<extra></extra>",
    ))
    fig.update_layout(title=html.escape(title), height=140 + 30 * n_layers,
                      xaxis={"title": "head", "type": "category"},
                      yaxis={"title": "layer", "autorange": "reversed", "type": "category"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def position_bars(effects: np.ndarray, tokens: Sequence[str], *, title: str,
                  differs: Sequence[bool] | None = None) -> go.Figure:
    """Patch effect of one head at each position, labelled ``(i) token``.

    Args:
        effects: ``pos`` patch effects.
        tokens: readable labels of the clean prompt.
        title: figure title (escaped here).
        differs: positions where the clean and corrupted tokens differ (drawn darker).
    """
    labels = [html.escape(f"({i}) {tok}", quote=True) for i, tok in enumerate(tokens)]
    colours = ["#d62728" if differs is not None and differs[i] else "#1f77b4"
               for i in range(len(labels))]
    fig = go.Figure(go.Bar(x=labels, y=np.asarray(effects, dtype=np.float64),
                           marker_color=colours,
                           hovertemplate="%{x}<br>patch effect %{y:.4f}<extra></extra>"))
    fig.update_layout(title=html.escape(title), height=360,
                      xaxis={"title": "position patched (red: the prompts differ there)",
                             "type": "category", "tickangle": -60},
                      yaxis={"title": "patch effect"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def parts_bars(parts: Sequence[tuple[str, str, float]], *, title: str) -> go.Figure:
    """Horizontal bars of the logit difference's parts, coloured by group.

    Args:
        parts: ``(group, part, value)`` rows in residual-stream order.
        title: figure title (escaped here).
    """
    fig = go.Figure()
    for group, colour in GROUP_COLOURS.items():
        rows = [(name, value) for g, name, value in parts if g == group]
        if rows:
            fig.add_trace(go.Bar(
                y=[html.escape(name) for name, _ in rows], x=[value for _, value in rows],
                orientation="h", name=group, marker_color=colour,
                hovertemplate="%{y}<br>%{x:.4f}<extra></extra>"))
    order = [html.escape(name) for _, name, _ in parts]
    fig.update_layout(title=html.escape(title), height=max(300, 60 + 18 * len(parts)),
                      xaxis={"title": "share of the logit difference", "zeroline": True},
                      yaxis={"categoryorder": "array", "categoryarray": order,
                             "autorange": "reversed"},
                      barmode="overlay", margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
