"""Figures of the head finder: where each head's strongest sink is, and loss versus heads pruned.

Token text comes from the prompt, so it is escaped before plotly sees it.
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from viz.heatmap import score_grid


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
    where = np.vectorize(lambda p: f"({p}) {html.escape(str(tokens[p]), quote=True)}",
                         otypes=[object])(positions)
    fig = score_grid(alpha, title=title, flagged=flagged, zmin=0.0, zmax=1.0)
    fig.update_traces(
        customdata=where, selector={"type": "heatmap"},
        hovertemplate="head %{y}.%{x}<br>sink on %{customdata}<br>alpha %{z:.4f}<extra></extra>")
    return fig


def pruning_curve(losses: Sequence[float], order: Sequence[tuple[int, int]], *,
                  title: str, loss_name: str = "loss",
                  ks: Sequence[int] | None = None) -> go.Figure:
    """Measured loss with the ``k`` least important heads ablated together.

    Args:
        losses: one loss per ``k``; ``k = 0`` (the clean model) first.
        order: the heads in pruning order.
        title: figure title (escaped here).
        loss_name: y-axis label.
        ks: the ``k`` of each loss; ``0..N`` when not given.
    """
    ks = list(range(len(losses))) if ks is None else [int(k) for k in ks]
    names = ["none"] + [f"{layer}.{head}" for layer, head in order]
    removed = [names[k] for k in ks]
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
