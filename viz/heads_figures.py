"""Figures of the head finder: loss versus heads pruned."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go


def pruning_curve(
    losses: Sequence[float],
    order: Sequence[tuple[int, int]],
    *,
    title: str,
    loss_name: str = "loss",
    ks: Sequence[int] | None = None,
) -> go.Figure:
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
    fig = go.Figure(
        go.Scatter(
            x=ks,
            y=list(losses),
            mode="lines+markers",
            customdata=removed,
            hovertemplate="k = %{x}<br>last head removed: %{customdata}<br>"
            "loss %{y:.4f}<extra></extra>",
        )
    )
    fig.add_hline(
        y=float(losses[0]), line_dash="dot", line_color="#888", annotation_text="no head removed"
    )
    fig.update_layout(
        title=html.escape(title),
        height=380,
        xaxis={"title": "k least important heads removed together"},
        yaxis={"title": html.escape(loss_name)},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig
