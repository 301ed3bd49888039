"""Figures of the head finder: where each head's strongest sink is, and loss versus heads pruned.

Token text comes from the prompt, so it is escaped before plotly sees it.
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go


def sink_position_grid(alpha: np.ndarray, positions: np.ndarray, tokens: Sequence[str], *,
                       title: str, flagged: np.ndarray | None = None) -> go.Figure:
    """``layer head_index`` grid of each head's strongest sink alpha; hover names its token.

    Args:
        alpha: ``layer head_index`` top alpha per head.
        positions: ``layer head_index`` key position of that alpha.
        tokens: token labels of the prompt.
        title: figure title (escaped here).
        flagged: heads to mark with a star.
    """
    n_layers, n_heads = alpha.shape
    where = np.vectorize(lambda p: f"({p}) {html.escape(str(tokens[p]), quote=True)}",
                         otypes=[object])(positions)
    fig = go.Figure(go.Heatmap(
        z=alpha, x=[str(h) for h in range(n_heads)], y=[str(l) for l in range(n_layers)],
        customdata=where, colorscale="Viridis", zmin=0.0, zmax=1.0,
        hovertemplate="head %{y}.%{x}<br>sink on %{customdata}<br>alpha %{z:.4f}<extra></extra>",
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


def pruning_curve(losses: Sequence[float], order: Sequence[tuple[int, int]], *,
                  title: str, loss_name: str = "loss") -> go.Figure:
    """Measured loss with the ``k`` least important heads ablated together, ``k = 0..N``.

    Args:
        losses: ``N + 1`` losses, entry 0 the clean model.
        order: the ``N`` heads in pruning order.
        title: figure title (escaped here).
        loss_name: y-axis label.
    """
    ks = list(range(len(losses)))
    removed = ["none"] + [f"{layer}.{head}" for layer, head in order]
    fig = go.Figure(go.Scatter(
        x=ks, y=list(losses), mode="lines+markers", customdata=removed,
        hovertemplate="k = %{x}<br>last head removed: %{customdata}<br>"
                      "loss %{y:.4f}<extra></extra>",
    ))
    fig.add_hline(y=float(losses[0]), line_dash="dot", line_color="#888",
                  annotation_text="no head removed")
    fig.update_layout(title=html.escape(title), height=380,
                      xaxis={"title": "k least important heads removed together"},
                      yaxis={"title": html.escape(loss_name)},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
